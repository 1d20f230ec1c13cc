#!/usr/bin/env python3
"""The labels that identify a site (a cluster, a region), kept in every aggregation.

Behind Thanos, Mimir or a federating Prometheus, two clusters each with a target named
`vllm` must stay two series: every recording and alerting rule aggregates `by (cluster,
target, ...)` and joins `on (cluster, target, ...)`, and both dashboards filter and group by
a `$cluster` variable. `cluster` is the default, as in the monitoring mixins'
`_config.clusterLabel`; a label the series do not carry is harmless (an empty value groups
and joins like any other).

This script is that one setting. With `--labels region,cluster` it rewrites the shipped
rules (config/prometheus/*.yml) and dashboards (dashboards/*.json) for those labels:

    python3 scripts/site_labels.py --labels region,cluster --out /tmp/site
    python3 scripts/site_labels.py --labels cluster --in-place     # the shipped files

Every `by (...)` and `on (...)` list that names a target-level label gets the site labels
first; alert annotations name them; each dashboard gets one variable per site label
(`label_values(inferprobe_requests_total, <label>)`, All = `.*`, which also matches series
without the label) and a matcher for it on every selector.
"""
import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
RULES = ["config/prometheus/recording-rules.yml", "config/prometheus/alerting-rules.yml"]
DASHBOARDS = ["dashboards/inferprobe-overview.json", "dashboards/inferprobe-target.json"]
# The labels site labels go in front of (a list without any of them, such as `by (le)` in a
# heatmap or `by (instance)`, is about something else).
KEYS = {"target", "pod", "discovery", "instance", "reason", "category", "namespace", "node"}
# Where an alert names its subject, the site follows. The marker is what the shipped
# annotations carry for the default label.
SITE_MARKER = "{{ with $labels.cluster }} in {{ . }}{{ end }}"

GROUPING = re.compile(r"\b(by|on)(\s*)\(([^()]*)\)")


def group(expr, labels, keys=KEYS):
    def fix(m):
        items = [i.strip() for i in m.group(3).split(",") if i.strip()]
        rest = [i for i in items if i not in labels and i != "cluster"]
        if not any(i in keys for i in rest):
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}({', '.join(labels + rest)})"
    return GROUPING.sub(fix, expr)


def site_text(labels):
    return "".join("{{ with $labels.%s }} in {{ . }}{{ end }}" % l for l in labels)


def rules(text, labels):
    out = []
    for line in text.split("\n"):
        if line.lstrip().startswith("#"):
            out.append(line)
            continue
        line = group(line, labels)
        line = line.replace(SITE_MARKER, site_text(labels))
        # A query in an annotation names the site too: {cluster=%q,target=%q} $labels...
        line = line.replace("{cluster=%q,target=%q}` $labels.cluster $labels.target",
                            "{" + ",".join(f"{l}=%q" for l in labels) + ",target=%q}` "
                            + " ".join(f"$labels.{l}" for l in labels) + " $labels.target")
        out.append(line)
    return "\n".join(out)


def dashboard_expr(expr, labels):
    expr = group(expr, labels)
    # Whatever site matchers were there go; every selector that filters on a template
    # variable starts with the labels' own.
    for label in set(labels) | {"cluster"}:
        expr = re.sub(r'(?<![a-z_])%s=~"\$%s",\s*' % (label, label), "", expr)
    site = "".join(f'{l}=~"${l}", ' for l in labels)
    return re.sub(r'\{(?=[^{}]*=~"\$)', lambda m: "{" + site, expr)


def variable(label, template):
    v = json.loads(json.dumps(template))
    v.update({
        "name": label,
        "label": label,
        "query": {"query": f"label_values(inferprobe_requests_total, {label})", "refId": "site"},
        "definition": f"label_values(inferprobe_requests_total, {label})",
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "description": f"The site label `{label}` (Thanos, Mimir, federation). All (`.*`) also "
                       "matches series without it: with one site, leave it at All.",
    })
    return v


def dashboard(doc, labels):
    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "expr" and isinstance(v, str):
                    o[k] = dashboard_expr(v, labels)
                else:
                    walk(v)
        elif isinstance(o, list):
            for x in o:
                walk(x)
    walk(doc.get("panels", []))
    variables = doc["templating"]["list"]
    template = next(v for v in variables if v["name"] == "model")
    kept = [v for v in variables if v["name"] not in labels and v["name"] != "cluster"]
    at = next(i for i, v in enumerate(kept) if v["name"] == "target")
    site = [variable(l, template) for l in labels]
    for v in kept:
        if v["name"] in ("target", "model", "node", "pod"):
            for key in ("query", "definition"):
                q = v.get(key)
                text = q["query"] if isinstance(q, dict) else q
                if not isinstance(text, str):
                    continue
                new = re.sub(r"label_values\(inferprobe_requests_total(\{[^}]*\})?,",
                             lambda m: "label_values(inferprobe_requests_total{"
                             + ", ".join(f'{l}=~"${l}"' for l in labels) + "},", text)
                if isinstance(q, dict):
                    q["query"] = new
                else:
                    v[key] = new
    doc["templating"]["list"] = kept[:at] + site + kept[at:]
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labels", default="cluster", help="comma-separated site labels (default: cluster)")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", type=pathlib.Path, help="write the rewritten files under this directory")
    where.add_argument("--in-place", action="store_true", help="rewrite the repository's files")
    args = ap.parse_args()
    labels = [l.strip() for l in args.labels.split(",") if l.strip()]
    if not labels or not all(re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", l) for l in labels):
        sys.exit(f"--labels: {args.labels!r} is not a list of label names")
    for rel in RULES + DASHBOARDS:
        src = ROOT / rel
        text = src.read_text()
        if rel.endswith(".json"):
            text = json.dumps(dashboard(json.loads(text), labels), indent=2, ensure_ascii=False) + "\n"
        else:
            text = rules(text, labels)
        dst = src if args.in_place else args.out / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(text)
        print(f"wrote {dst}")


if __name__ == "__main__":
    main()
