"""What the Prometheus proofs run: every query of the Grafana dashboards in dashboards/ (its
template variables substituted as Grafana would) and every rule of a rules file. Shared by
scripts/prometheus-proof.sh, scripts/federation-proof.sh and scripts/backfill-proof.sh."""
import glob
import json
import os
import re
import sys

GRAFANA = {"__rate_interval": "1m", "__interval": "2s", "__range": "5m"}


def substitute(expr, variables):
    def value(m):
        name = m.group(1) or m.group(2)
        if name in GRAFANA:
            return GRAFANA[name]
        if name in variables:
            return variables[name]
        raise KeyError(f"unknown template variable ${name} in {expr!r}")
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", value, expr)


def rule_exprs(path):
    """(name, expr) of every rule: a minimal reader for `- record:` / `expr:` (| blocks)."""
    lines, out, name, i = open(path).read().splitlines(), [], None, 0
    while i < len(lines):
        m = re.match(r"^\s*-?\s*(record|alert):\s*(\S+)", lines[i])
        if m:
            name = m.group(2)
        m = re.match(r"^(\s*)-?\s*expr:\s*(.*?)\s*$", lines[i])
        i += 1
        if not m:
            continue
        indent, value = len(m.group(1)), m.group(2)
        if value[:1] in ("|", ">"):
            block = []
            while i < len(lines) and (not lines[i].strip()
                                      or len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i])
                i += 1
            value = "\n".join(block).strip()
        out.append((name, value.strip("'\"")))
    return out


def panels(items):
    for p in items:
        yield p
        yield from panels(p.get("panels", []))


def grouped_by(expr, label):
    return re.search(r"\bby \([^)]*\b" + label + r"\b", expr) is not None


def per_replica(panel):
    """A panel about a discovered target's replicas: nothing to show for a configured one."""
    return any('pod!=""' in t["expr"] or "inferprobe:replica_" in t["expr"]
               or "inferprobe:target_replica" in t["expr"]
               or "vllm:" in t["expr"] or "sglang:" in t["expr"] for t in panel.get("targets", []))



def dashboard_queries(variables_by_file, default):
    """(file, variables, panel, target, expr) for every panel query of every dashboard, once
    per set of variables given for its file (else `default`), and (file, variables, variable,
    None, expr) for every query variable, as `count by (label) (selector)`."""
    for path in sorted(glob.glob("dashboards/*.json")):
        file = os.path.basename(path)
        dashboard = json.load(open(path))
        for variables in variables_by_file.get(file, [default]):
            for p in panels(dashboard["panels"]):
                for t in p.get("targets", []):
                    yield file, variables, p, t, substitute(t["expr"], variables)
            for v in dashboard["templating"]["list"]:
                if v["type"] != "query":
                    continue
                q = v["query"] if isinstance(v["query"], str) else v["query"]["query"]
                m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q.strip(), re.S)
                if not m:
                    sys.exit(f"FAIL: {file} variable {v['name']}: not label_values(...): {q!r}")
                yield (file, variables, v, None,
                       f"count by ({m.group(2)}) ({substitute(m.group(1), variables)})")
