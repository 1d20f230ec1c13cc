#!/usr/bin/env bash
# Proof against a real Prometheus that every query of the Grafana dashboards in dashboards/
# and every recording rule in config/prometheus/recording-rules.yml works on the series the
# daemon really exports.
#
# It starts the simulator (with jitter and faults), two daemons probing it as two DaemonSet
# pods would (NODE_NAME=proof-node-a / proof-node-b, three targets at 5 probes/s, one with an
# SLO), and Debian's Prometheus scraping both every 2 s and evaluating the recording rules
# every 2 s. Once data is there it runs every panel query of both dashboards (template
# variables substituted as Grafana would), every template-variable query, every recording
# rule expression and every recorded series through /api/v1/query. It fails, printing the
# expression and Prometheus's answer, if one errors or returns no series, or if a per-node
# query does not show both nodes.
#
# Everything listens on 127.0.0.1 only, is bounded in time, and is stopped on exit.
# Usage (from anywhere, as root on a bare Debian machine to install Prometheus):
#   bash scripts/prometheus-proof.sh          PROOF_VERBOSE=1 prints every check
set -euo pipefail
cd "$(dirname "$0")/.."

wait_seconds=${PROOF_WAIT_SECONDS:-90}

# --- (a) Debian's prometheus (prometheus + promtool) and python3, if missing ------------
missing=()
{ [ -x /usr/bin/prometheus ] && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq </dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
fi
prometheus=/usr/bin/prometheus
python=python3
[ -x /usr/bin/python3 ] && python=/usr/bin/python3 # the system's, not a virtualenv's
"$prometheus" --version 2>&1 | head -1

# --- processes, temporary files, cleanup ----------------------------------------------
tmp=$(mktemp -d)
pids=()
cleanup() {
  local pid i
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for i in $(seq 50); do # up to 5 s to exit gracefully, then SIGKILL
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

show_logs() {
  local log
  for log in "$tmp"/*.log; do
    echo "--- $(basename "$log") (without the expected probe failures)" >&2
    { grep -v 'probe failed' "$log" || true; } | tail -n 15 >&2
  done
}

# --- (b) the simulator and two daemons (two "nodes") -----------------------------------
cargo build --quiet
bin=target/debug/inferprobe

# Four free ports on 127.0.0.1 (the OS picks them; nothing else binds them meanwhile).
read -r sim_port port_a port_b prom_port < <("$python" - <<'EOF'
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)
[ -n "$prom_port" ] || { echo "could not pick free ports" >&2; exit 1; }

"$bin" simulate --listen "127.0.0.1:$sim_port" --ttft 50ms --itl 5ms --jitter 0.3 \
  --fault http_429=0.05 --fault reset=0.05 --fault error_event=0.03 >"$tmp/simulator.log" 2>&1 &
pids+=($!)

cat >"$tmp/inferprobe.toml" <<EOF
shutdown_grace = "1s"
# Each DaemonSet pod labels its series with its node (the downward API sets NODE_NAME).
labels_from_env = { node = "NODE_NAME" }

[defaults]
url = "http://127.0.0.1:$sim_port"
rate = 5
input_tokens = 32
output_tokens = 16
request_timeout = "10s"

[[targets]]
name = "chat"
backend = "openai-chat"
model = "sim-chat"
slo = { ttft = "80ms", tpot = "10ms", objective = 0.95 }

[[targets]]
name = "completions"
backend = "openai"
model = "sim-base"

[[targets]]
name = "messages"
backend = "anthropic"
model = "sim-claude"
EOF
NODE_NAME=proof-node-a "$bin" check --config "$tmp/inferprobe.toml" >/dev/null
NODE_NAME=proof-node-a "$bin" run --config "$tmp/inferprobe.toml" --listen "127.0.0.1:$port_a" \
  >"$tmp/daemon-a.log" 2>&1 &
pids+=($!)
NODE_NAME=proof-node-b "$bin" run --config "$tmp/inferprobe.toml" --listen "127.0.0.1:$port_b" \
  >"$tmp/daemon-b.log" 2>&1 &
pids+=($!)

# --- (c) Prometheus: scrape every 2 s, the recording rules evaluated every 2 s ---------
# The rules file's group interval (30s) is shortened in a copy, so the proof needs no
# minutes of waiting; the rules themselves are used unchanged.
sed -E 's/^([[:space:]]*)interval:.*/\1interval: 2s/' config/prometheus/recording-rules.yml \
  >"$tmp/recording-rules.yml"
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
rule_files:
  - $tmp/recording-rules.yml
scrape_configs:
  - job_name: inferprobe
    static_configs:
      - targets: ["127.0.0.1:$port_a", "127.0.0.1:$port_b"]
EOF
promtool check rules config/prometheus/recording-rules.yml >/dev/null
promtool check config "$tmp/prometheus.yml" >/dev/null
"$prometheus" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --storage.tsdb.retention.time=1d --web.listen-address="127.0.0.1:$prom_port" \
  --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)

# --- (d) + (e) wait for data, then run every expression --------------------------------
cat >"$tmp/check.py" <<'EOF'
"""Runs every dashboard query, variable query and recording rule through /api/v1/query."""
import glob
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

base, wait_seconds, rules_file = sys.argv[1], float(sys.argv[2]), sys.argv[3]
verbose = os.environ.get("PROOF_VERBOSE") == "1"
NODES = ["proof-node-a", "proof-node-b"]
# Template variables as Grafana substitutes them (multi-value regex: "(a|b)"); the overview
# selects All, the target dashboard the target with the SLO and both nodes explicitly.
ALL = {"target": ".*", "model": ".*", "node": ".*"}
VARIABLES = {
    "inferprobe-overview.json": ALL,
    "inferprobe-target.json": {"target": "chat", "model": "(sim-chat)",
                               "node": "(" + "|".join(NODES) + ")"},
}
GRAFANA = {"__rate_interval": "1m", "__interval": "2s", "__range": "5m"}


def query(expr):
    data = urllib.parse.urlencode({"query": expr}).encode()
    try:
        with urllib.request.urlopen(base + "/api/v1/query", data=data, timeout=15) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:  # 400/422: Prometheus explains in the body
        return json.load(e)


def get(path):
    with urllib.request.urlopen(base + path, timeout=15) as r:
        return json.load(r)


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


checks = []  # (what, expr, needs both nodes)
for path in sorted(glob.glob("dashboards/*.json")):
    file = os.path.basename(path)
    dashboard = json.load(open(path))
    variables = VARIABLES.get(file, ALL)
    for p in panels(dashboard["panels"]):
        for t in p.get("targets", []):
            expr = substitute(t["expr"], variables)
            by_node = re.search(r"\bby \([^)]*\bnode\b", t["expr"]) is not None
            checks.append((f"{file} panel {p['id']} {p['title']!r} [{t['refId']}]", expr, by_node))
    for v in dashboard["templating"]["list"]:
        if v["type"] != "query":
            continue
        q = v["query"] if isinstance(v["query"], str) else v["query"]["query"]
        m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q.strip(), re.S)
        if not m:
            sys.exit(f"FAIL: {file} variable {v['name']}: not label_values(...): {q!r}")
        expr = f"count by ({m.group(2)}) ({substitute(m.group(1), variables)})"
        checks.append((f"{file} variable {v['name']}", expr, v["name"] == "node"))
rules = rule_exprs(rules_file)
if not rules:
    sys.exit(f"FAIL: no rules read from {rules_file}")
for name, expr in rules:
    checks.append((f"rule {name} (expression)", expr, False))
    checks.append((f"rule {name} (recorded series)", name, False))


def problem(answer, by_node):
    """None when the answer is good, else why not."""
    if answer.get("status") != "success":
        return "error"
    result = answer["data"]["result"]
    if answer["data"]["resultType"] == "vector" and not result:
        return "no series"
    values = [s["value"][1] for s in result] if answer["data"]["resultType"] == "vector" else []
    if values and all(v == "NaN" for v in values):
        return "only NaN"
    if by_node:
        nodes = {s["metric"].get("node") for s in result}
        if not set(NODES) <= nodes:
            return f"not every node: {sorted(map(str, nodes))}"
    return None


# (d) Wait until both daemons are scraped with rates over both nodes and every recording
# rule has produced its series, bounded.
ready = [
    ('count(up{job="inferprobe"} == 1)', 2),
    ("count(count by (node) (rate(inferprobe_time_to_first_token_seconds_count[1m]) > 0))", 2),
    ("count(count by (target) (rate(inferprobe_request_errors_total[1m]) > 0))", 3),
] + [(f"count({name})", 1) for name, _ in rules]
start = time.monotonic()
while True:
    pending = []
    for expr, want in ready:
        try:
            result = query(expr).get("data", {}).get("result", [])
        except (OSError, ValueError) as e:  # Prometheus still starting
            result, expr = [], f"{expr} ({e})"
        if not result or float(result[0]["value"][1]) < want:
            pending.append(expr)
    if not pending:
        break
    if time.monotonic() - start > wait_seconds:
        print(f"FAIL: no data after {wait_seconds:.0f}s; still waiting for:", file=sys.stderr)
        for expr in pending:
            print("  " + expr, file=sys.stderr)
        sys.exit(2)
    time.sleep(2)
print(f"data after {time.monotonic() - start:.0f}s: both nodes scraped, every recording rule evaluated")

# Every rule of the rules file evaluates without error in Prometheus itself.
groups = get("/api/v1/rules")["data"]["groups"]
for g in groups:
    for r in g["rules"]:
        if r.get("health") != "ok":
            sys.exit(f"FAIL: rule {r['name']}: health {r.get('health')}: {r.get('lastError')}")

# (e) Every expression.
failures = 0
for what, expr, by_node in checks:
    answer = query(expr)
    why = problem(answer, by_node)
    if why is None:
        if verbose:
            result = answer["data"]["result"]
            values = ", ".join(s["value"][1][:8] for s in result[:3])
            print(f"ok  {len(result):3d} series  {what}: {values}")
        continue
    failures += 1
    print(f"FAIL ({why}): {what}\n  expr: {expr}\n  response: {json.dumps(answer)[:2000]}",
          file=sys.stderr)

panel_queries = sum(1 for what, _, _ in checks if " panel " in what)
variable_queries = sum(1 for what, _, _ in checks if " variable " in what)
if failures:
    print(f"prometheus-proof: FAILED: {failures} of {len(checks)} expressions", file=sys.stderr)
    sys.exit(1)
print(f"prometheus-proof: {len(checks)} expressions checked against Prometheus, all returned "
      f"data: {panel_queries} dashboard panel queries, {variable_queries} variable queries, "
      f"{len(rules)} recording rule expressions and their {len(rules)} recorded series")
EOF
status=0
"$python" "$tmp/check.py" "http://127.0.0.1:$prom_port" "$wait_seconds" \
  config/prometheus/recording-rules.yml || status=$?
if [ "$status" = 2 ]; then show_logs; fi # no data: the logs say why
exit "$status"
