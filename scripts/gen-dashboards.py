#!/usr/bin/env python3
"""Writes the Grafana dashboards in dashboards/ from their source in scripts/dashboards/.

    python3 scripts/gen-dashboards.py           # rewrite dashboards/*.json
    python3 scripts/gen-dashboards.py --check   # exit 1 if a file differs from its source
    python3 scripts/gen-dashboards.py --site-labels region,cluster --out /tmp/site

`--site-labels` replaces `cluster` as the labels that tell sites apart (Thanos, Mimir,
federation): each a variable, a matcher on every selector, and first in every grouping by a
target-level label (scripts/dashboards/config.py).
"""

import argparse
import importlib
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from dashboards.config import CONFIG  # noqa: E402

NAMES = {"inferprobe-overview.json": "overview", "inferprobe-target.json": "target"}


def number(panels, start=1):
    """Panel ids in reading order, rows' panels after their row."""
    n = start
    for p in panels:
        p["id"] = n
        n += 1
        if p.get("panels"):
            n = number(p["panels"], n)
    return n


def build(module):
    dashboard = dict(module.DASHBOARD)
    panels = json.loads(json.dumps(module.PANELS))
    number(panels)
    out = {}
    for key, value in dashboard.items():
        out[key] = value
        if key == "liveNow":
            out["panels"] = panels
    return json.dumps(out, indent=2, ensure_ascii=False) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "dashboards")
    parser.add_argument("--site-labels", default=",".join(CONFIG["site_labels"]))
    args = parser.parse_args()
    labels = [l.strip() for l in args.site_labels.split(",") if l.strip()]
    if not labels or not all(re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", l) for l in labels):
        sys.exit(f"--site-labels: {args.site_labels!r} is not a list of label names")
    # Before the dashboards are built: every selector and grouping reads it.
    CONFIG["site_labels"] = labels
    args.out.mkdir(parents=True, exist_ok=True)
    stale = []
    for name, module_name in NAMES.items():
        module = importlib.import_module(f"dashboards.{module_name}")
        text = build(module)
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"not what scripts/gen-dashboards.py writes: {', '.join(stale)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
