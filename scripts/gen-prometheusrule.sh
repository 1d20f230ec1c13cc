#!/usr/bin/env bash
# Generates config/kubernetes/prometheusrule.yaml (a Prometheus Operator PrometheusRule) from
# the Prometheus rule files config/prometheus/*.yml, so the rules are written once and the
# Kubernetes manifest cannot drift from them (scripts/validate-deploy.sh fails if it has).
#
#   bash scripts/gen-prometheusrule.sh            # rewrite config/kubernetes/prometheusrule.yaml
#   bash scripts/gen-prometheusrule.sh -o FILE    # write FILE instead ("-" for stdout)
#
# The alert-label contract (docs/alerts.md, "Routing"), each a setting here:
#   --namespace NS            metadata.namespace, and the `namespace` label on every alert, so
#                             an AlertmanagerConfig in NS (the Operator adds a namespace
#                             matcher to its routes) matches (default: inferprobe)
#   --no-namespace-label      leave the alerts' `namespace` label to the series
#   --severity critical=P1,warning=P3,info=P4
#                             the values written for the shipped severities (default: as is)
#   --alert-label KEY=VALUE   a static label on every alert (repeatable: team, service, ...)
#   --runbook-base URL        where docs/alerts.md is served, absolute, no fragment (default:
#                             Cargo.toml's repository + /blob/main/docs/alerts.md); every
#                             runbook_url is URL#<alert name in lower case>
# and the SLO's:
#   --slo-window W            the error budget's window, whole days (default: the shipped
#                             rules', 7d; 30d where the Prometheus keeps 31 days): the SLO
#                             groups as scripts/gen-slo-rules.py --window W writes them
#
# spec.groups is the groups of every file, in file-name order. Needs only bash and python3's
# standard library: each file's `groups:` list is copied as text, re-indented under
# `spec.groups`, so comments and block scalars (`expr: |`) come through unchanged. A file
# must be a single YAML document whose only top-level key is `groups`; anything else fails.
set -euo pipefail
cd "$(dirname "$0")/.."

out=config/kubernetes/prometheusrule.yaml
namespace=inferprobe
namespace_label=1
severity=
runbook_base=
slo_window=
alert_labels=()
usage() {
  echo "usage: $0 [-o FILE|-] [--namespace NS] [--no-namespace-label] [--severity critical=X,warning=Y,info=Z] [--alert-label KEY=VALUE]... [--runbook-base URL] [--slo-window W]" >&2
  exit 64
}
while [ $# -gt 0 ]; do
  case "$1" in
    -o | --output | --namespace | --severity | --alert-label | --runbook-base | --slo-window)
      [ $# -ge 2 ] || usage
      case "$1" in
        -o | --output) out="$2" ;;
        --namespace) namespace="$2" ;;
        --severity) severity="$2" ;;
        --alert-label) alert_labels+=("$2") ;;
        --runbook-base) runbook_base="$2" ;;
        --slo-window) slo_window="$2" ;;
      esac
      shift 2
      ;;
    --no-namespace-label)
      namespace_label=0
      shift
      ;;
    *) usage ;;
  esac
done
if [ -z "$runbook_base" ]; then
  repo=$(sed -n 's/^repository = "\(.*\)"$/\1/p' Cargo.toml)
  [ -n "$repo" ] || {
    echo "$0: no repository in Cargo.toml: pass --runbook-base" >&2
    exit 1
  }
  runbook_base="$repo/blob/main/docs/alerts.md"
fi

shopt -s nullglob
files=(config/prometheus/*.yml config/prometheus/*.yaml)
if [ ${#files[@]} -eq 0 ]; then
  echo "$0: no rule files in config/prometheus/" >&2
  exit 1
fi
mapfile -t files < <(printf '%s\n' "${files[@]}" | LC_ALL=C sort)
if [ -n "$slo_window" ]; then
  # The SLO groups at another window: the rule files as scripts/gen-slo-rules.py writes them
  # there, in place of the shipped ones (the manifest's header names the shipped paths).
  windowed=$(mktemp -d)
  trap 'rm -rf "$windowed"' EXIT
  python3 scripts/gen-slo-rules.py --window "$slo_window" --out "$windowed/config/prometheus" >&2 ||
    exit 64
  export GEN_WINDOWED="$windowed"
fi

export GEN_NAMESPACE="$namespace" GEN_NAMESPACE_LABEL="$namespace_label" GEN_SEVERITY="$severity" \
  GEN_RUNBOOK_BASE="$runbook_base" GEN_ALERT_LABELS="$(printf '%s\n' "${alert_labels[@]+"${alert_labels[@]}"}")"
python3 - "$out" "${files[@]}" <<'PY'
import os
import re
import sys

out, files = sys.argv[1], sys.argv[2:]
ITEM_INDENT = 4  # list items of spec.groups

# The shipped rules' side of the contract: these severities, and runbook links under this
# base (tests/docs_pages.rs holds the rule files to it).
SEVERITIES = ("critical", "warning", "info")
SOURCE_RUNBOOK = "https://github.com/inferprobe/inferprobe/blob/main/docs/alerts.md"
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def usage(why):
    sys.exit(f"gen-prometheusrule: {why}")


namespace = os.environ["GEN_NAMESPACE"]
severity = {s: s for s in SEVERITIES}
for pair in filter(None, os.environ["GEN_SEVERITY"].split(",")):
    key, sep, value = pair.partition("=")
    if not sep or key not in SEVERITIES or not value.strip():
        usage(f"--severity {pair!r}: expected one of {', '.join(SEVERITIES)}=VALUE")
    severity[key] = value.strip()
# The labels the rules set themselves: a static label of the same name would be a second
# key in one mapping (as `namespace` would beside the namespace label).
RULE_LABELS = ("alertname", "severity", "slo")
extra = {}
annotations = {}
if os.environ["GEN_NAMESPACE_LABEL"] == "1":
    extra["namespace"] = namespace
    # A discovered replica's series carry its own namespace, which the static label hides.
    # Kept as an annotation, not a label: Prometheus writes a rule label that expands to
    # nothing (every configured target's alert) into its ALERTS series as the raw template.
    annotations["replica_namespace"] = "{{ $labels.namespace }}"
for pair in filter(None, os.environ["GEN_ALERT_LABELS"].split("\n")):
    key, sep, value = pair.partition("=")
    if not sep or not LABEL_NAME.match(key) or key.startswith("__"):
        usage(f"--alert-label {pair!r}: expected KEY=VALUE with a Prometheus label name")
    if key in RULE_LABELS or (key == "namespace" and "namespace" in extra):
        usage(f"--alert-label {key}: set by the rules (--severity sets its values; --no-namespace-label frees `namespace`)")
    extra[key] = value
for value in [*severity.values(), *extra.values()]:
    # Prometheus expands rule labels as Go templates: a stray `{{` fails every alert at load.
    if "{{" in value:
        usage(f"{value!r}: a static label value may not contain '{{{{'")
runbook_base = os.environ["GEN_RUNBOOK_BASE"]
if not re.match(r"^https?://[^#\s]+$", runbook_base):
    usage(f"--runbook-base {runbook_base!r}: an absolute http(s) URL without a '#' fragment")


def quoted(value):
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


SEVERITY_LINE = re.compile(r"^(\s*)severity: (\S+)\s*$")
RUNBOOK_LINE = re.compile(
    r"^(\s*)runbook_url: ([\"']?)" + re.escape(SOURCE_RUNBOOK) + r"#([a-z0-9-]+)\2\s*$"
)


def contract(path, lineno, line):
    """The line as the contract writes it: the severity mapped, the static labels after it
    (same indentation, so inside the alert's `labels:`), the runbook under its base."""
    m = SEVERITY_LINE.match(line)
    if m:
        indent, value = m.groups()
        if value not in SEVERITIES:
            fail(path, lineno, f"severity {value!r}: the contract has {', '.join(SEVERITIES)}")
        return [f"{indent}severity: {quoted(severity[value])}"] + [
            f"{indent}{k}: {quoted(v)}" for k, v in extra.items()
        ]
    m = RUNBOOK_LINE.match(line)
    if m:
        return [f"{m.group(1)}runbook_url: {quoted(runbook_base + '#' + m.group(3))}"] + [
            f"{m.group(1)}{k}: {quoted(v)}" for k, v in annotations.items()
        ]
    if "runbook_url:" in line:
        fail(path, lineno, f"runbook_url not under {SOURCE_RUNBOOK}#")
    return [line]

TOP_KEY = re.compile(r"^groups:\s*(#.*)?$")


def fail(path, lineno, why):
    sys.exit(f"gen-prometheusrule: {path}:{lineno}: {why}")


def source(path):
    """The rule file, or its copy at --slo-window's budget window."""
    windowed = os.path.join(os.environ.get("GEN_WINDOWED", ""), path)
    return windowed if os.environ.get("GEN_WINDOWED") and os.path.exists(windowed) else path


def groups_block(path):
    """The lines of the file's `groups:` list, re-indented for spec.groups, and the
    file's leading comment."""
    with open(source(path), encoding="utf-8") as f:
        lines = f.read().splitlines()
    header, body, seen = [], [], False
    for n, line in enumerate(lines, 1):
        if "\t" in line[: len(line) - len(line.lstrip())]:
            fail(path, n, "tab in indentation")
        if not seen:
            if TOP_KEY.match(line):
                seen = True
            elif line.startswith("#"):
                header.append(line)
            elif line.strip() in ("", "---"):
                pass
            else:
                fail(path, n, "expected comments, then a top-level `groups:` key")
            continue
        stripped = line.strip()
        if stripped in ("---", "..."):
            fail(path, n, "only one YAML document per rule file is supported")
        # After `groups:`, a line at column 0 may only be a comment or a list item.
        if stripped and not line[0].isspace() and not line.startswith(("#", "- ")) and line != "-":
            fail(path, n, "only the top-level key `groups` is supported")
        body.extend(contract(path, n, line))
    if not seen:
        fail(path, 1, "no top-level `groups:` key")
    while body and not body[-1].strip():
        body.pop()
    content = [l for l in body if l.strip()]
    if not any(l.lstrip().startswith("- ") or l.strip() == "-" for l in content):
        fail(path, 1, "`groups:` is not a non-empty block list")
    # Shift every non-blank line by the same amount: relative indentation, and so YAML
    # structure and block-scalar contents, are unchanged.
    shift = ITEM_INDENT - min(len(l) - len(l.lstrip(" ")) for l in content)
    shifted = []
    for l in body:
        if not l.strip():
            shifted.append("")
        elif shift >= 0:
            shifted.append(" " * shift + l)
        else:
            shifted.append(l[-shift:])
    return header, shifted


parts = ["# GENERATED by scripts/gen-prometheusrule.sh from:"]
parts.extend(f"#   {path}" for path in files)
parts += [
    "# Do not edit: change the rule files and re-run the script (scripts/validate-deploy.sh",
    "# fails when this file differs from a fresh generation). Needs the Prometheus Operator's",
    "# CRDs; kustomization.yaml's `labels` put kube-prometheus-stack's `release` label on it.",
    "apiVersion: monitoring.coreos.com/v1",
    "kind: PrometheusRule",
    "metadata:",
    "  name: inferprobe",
    f"  namespace: {namespace}",
    "  labels:",
    "    app.kubernetes.io/name: inferprobe",
    "    app.kubernetes.io/instance: inferprobe",
    "spec:",
    "  groups:",
]
for path in files:
    header, block = groups_block(path)
    parts.append(f"    # ---- from {path} ----")
    parts.extend(("    " + h).rstrip() for h in header)
    parts.extend(block)
text = "\n".join(parts) + "\n"

# When PyYAML is importable (the validation venv, Debian's python3-yaml), prove the copy:
# spec.groups must equal the concatenated groups of the files.
try:
    import yaml
except ImportError:
    yaml = None
if yaml is not None:
    want = []
    for path in files:
        with open(source(path), encoding="utf-8") as f:
            want.extend(yaml.safe_load(f)["groups"])
    for group in want:
        for rule in group["rules"]:
            if "alert" in rule:
                labels = rule["labels"]
                labels["severity"] = severity[labels["severity"]]
                labels.update(extra)
                anchor = rule["annotations"]["runbook_url"].split("#", 1)[1]
                rule["annotations"]["runbook_url"] = f"{runbook_base}#{anchor}"
                rule["annotations"].update(annotations)
    got = yaml.safe_load(text)["spec"]["groups"]
    if got != want:
        sys.exit("gen-prometheusrule: internal error: generated groups differ from the files'")

if out == "-":
    sys.stdout.write(text)
else:
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {out} ({len(files)} rule file(s))", file=sys.stderr)
PY
