#!/usr/bin/env python3
"""The labels that identify a site (a cluster, a region), kept in every aggregation.

Behind Thanos, Mimir or a federating Prometheus, two clusters each with a target named
`vllm` must stay two series: every recording and alerting rule aggregates `by (cluster,
target, ...)` and joins `on (cluster, target, ...)`, and both dashboards filter and group by
a `$cluster` variable. `cluster` is the default, as in the monitoring mixins'
`_config.clusterLabel`; a label the series do not carry is harmless (an empty value groups
and joins like any other).

This script is that one setting. With `--labels region,cluster` it rewrites the shipped
rules (config/prometheus/*.yml) for those labels, and has scripts/gen-dashboards.py write
the dashboards (dashboards/*.json) with them:

    python3 scripts/site_labels.py --labels region,cluster --out /tmp/site
    python3 scripts/site_labels.py --labels cluster --in-place     # the shipped files

Every `by (...)` and `on (...)` list that names a target-level label gets the site labels
first; alert annotations name them; each dashboard gets one variable per site label
(`label_values(inferprobe_requests_total, <label>)`, All = `.*`, which also matches series
without the label), a matcher for it on every selector, and the labels first in every
grouping.
"""
import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
RULES = ["config/prometheus/recording-rules.yml", "config/prometheus/alerting-rules.yml"]
# The labels site labels go in front of (a list without any of them, such as `by (le)` in a
# heatmap or `by (instance)`, is about something else).
KEYS = {"target", "pod", "discovery", "instance", "reason", "category", "namespace", "node"}
# Where an alert names its subject, the site follows: the series' own label, else the
# evaluating Prometheus's external label (a cluster's Prometheus whose series lack it: the
# label is added only on the way out, to Alertmanager, federation or remote write). The
# marker is what the shipped annotations carry for the default label.
SITE_MARKER = ("{{ with $labels.cluster }} in {{ . }}{{ else }}"
               "{{ with $externalLabels.cluster }} in {{ . }}{{ end }}{{ end }}")

GROUPING = re.compile(r"\b(by|on)(\s*)\(([^()]*)\)")


def group(expr, labels, keys=KEYS):
    def fix(m):
        items = [i.strip() for i in m.group(3).split(",") if i.strip()]
        rest = [i for i in items if i not in labels and i != "cluster"]
        if items and not rest:  # the site alone: a per-site aggregation
            return f"{m.group(1)}{m.group(2)}({', '.join(labels)})"
        if not any(i in keys for i in rest):
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}({', '.join(labels + rest)})"
    return GROUPING.sub(fix, expr)


def site_text(labels):
    return "".join("{{ with $labels.%s }} in {{ . }}{{ else }}{{ with $externalLabels.%s }} in "
                   "{{ . }}{{ end }}{{ end }}" % (l, l) for l in labels)


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
    for rel in RULES:
        src = ROOT / rel
        text = rules(src.read_text(), labels)
        dst = src if args.in_place else args.out / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(text)
        print(f"wrote {dst}")
    # The dashboards are generated: the generator takes the site labels (one setting there,
    # scripts/dashboards/config.py).
    out = ROOT / "dashboards" if args.in_place else args.out / "dashboards"
    subprocess.run([sys.executable, str(ROOT / "scripts/gen-dashboards.py"),
                    "--site-labels", ",".join(labels), "--out", str(out)], check=True)
    print(f"wrote {out}/*.json")


if __name__ == "__main__":
    main()
