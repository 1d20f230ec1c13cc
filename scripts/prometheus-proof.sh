#!/usr/bin/env bash
# Proof against a real Prometheus that every query of the Grafana dashboards in dashboards/
# and every recording rule in config/prometheus/recording-rules.yml works on the series the
# daemon really exports.
#
# It starts the simulator (with jitter and faults), two daemons probing it as two DaemonSet
# pods would (NODE_NAME=proof-node-a / proof-node-b, POD_NAME=proof-probe-a / -b, three
# targets at 5 probes/s, one with an SLO), four more simulators as the replicas of a
# discovered target (each daemon finds the two "on its node" through a file discovery
# block whose file_sd entries carry `pod` and `namespace`, as node_local pods discovery
# would; replica-3 is slow), a discovery block whose file is missing on one daemon, and
# Debian's Prometheus scraping both every 2 s the way the PodMonitor does (honor_labels;
# `node` and `probe_pod` as target labels, no `pod` or `namespace`) and evaluating the
# recording and alerting rules every 2 s. Once data is there it runs every panel query of
# both dashboards (template variables substituted as Grafana would; the target dashboard
# once for a configured target and once for the discovered one), every template-variable
# query, every recording rule expression and every recorded series through
# /api/v1/query. It fails, printing the expression and Prometheus's answer, if one errors
# or returns no series, if a per-node query does not show both nodes or a per-replica one
# every replica, if a rule is unhealthy, or if an alert's expression does not pick exactly
# what it should: InferprobeReplicaOutlier the slow replica, InferprobeDiscoveryDown the
# failing block, InferprobePrefixCacheMisses the replica whose cache is off (their `for` is
# not waited for).
#
# PROOF_HISTOGRAMS=native (or classic, both) sets the daemons' `[metrics] histograms` and
# runs Prometheus with `--enable-feature=native-histograms,exemplar-storage`, so it scrapes
# the protobuf exposition: in native mode it then stores the latency histograms as native
# histograms only, and every query and rule must work on those (issue 34). Unset, the
# daemons run with the default and Prometheus scrapes text, as a Prometheus without the
# feature does.
#
# Everything listens on 127.0.0.1 only, is bounded in time, and is stopped on exit.
# Usage (from anywhere, as root on a bare Debian machine to install Prometheus):
#   bash scripts/prometheus-proof.sh          PROOF_VERBOSE=1 prints every check
#   PROOF_HISTOGRAMS=native bash scripts/prometheus-proof.sh
set -euo pipefail
cd "$(dirname "$0")/.."

wait_seconds=${PROOF_WAIT_SECONDS:-90}
histograms=${PROOF_HISTOGRAMS:-}
case "$histograms" in
  "" | classic | native | both | mixed) ;;
  *) echo "PROOF_HISTOGRAMS=$histograms: classic, native, both or mixed" >&2; exit 64 ;;
esac

# --- (a) Debian's prometheus (prometheus + promtool) and python3, if missing ------------
source scripts/need-prometheus.sh  # Debian's prometheus and promtool; sets prometheus, python

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

# --- (b) the simulators and two daemons (two "nodes") ----------------------------------
cargo build --quiet
bin=${CARGO_TARGET_DIR:-target}/debug/inferprobe

# Eight free ports on 127.0.0.1 (the OS picks them; nothing else binds them meanwhile).
read -r sim_port port_a port_b prom_port rep0 rep1 rep2 rep3 < <("$python" - <<'EOF'
import socket
socks = [socket.socket() for _ in range(8)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)
[ -n "$rep3" ] || { echo "could not pick free ports" >&2; exit 1; }

# Its responses report a hosted API's quota, never reached (the rate-limit panels' series).
# It serves HTTPS with a certificate made here that ends in 10 days (the tls phase and the
# certificate panel; self-signed, so the targets do not verify it), and its answers start
# with 4 tokens of streamed reasoning (the reasoning panels), as the replicas' do.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 10 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
  -keyout "$tmp/tls-key.pem" -out "$tmp/tls-cert.pem" 2>/dev/null
"$bin" simulate --listen "127.0.0.1:$sim_port" --ttft 50ms --itl 5ms --jitter 0.3 --reasoning 4 \
  --tls-cert "$tmp/tls-cert.pem" --tls-key "$tmp/tls-key.pem" \
  --rate-limit 1000000000 --rate-limit-window 1h \
  --max-model-len 8192 --fault http_429=0.05 --fault reset=0.05 --fault error_event=0.03 >"$tmp/simulator.log" 2>&1 &
pids+=($!)
# The replicas of a discovered target: replica-3 is six times slower to first token,
# replica-1 answers wrong now and then (its canary checks diverge), and replica-2's prefix
# cache is off (its prefix-cache checks miss).
replica_ports=("$rep0" "$rep1" "$rep2" "$rep3")
for i in 0 1 2 3; do
  ttft=50ms corrupt=0
  [ "$i" = 3 ] && ttft=300ms
  [ "$i" = 1 ] && corrupt=0.3
  cache=()
  [ "$i" = 2 ] && cache=(--fault cache_disabled=0.9) # faults exclude each other: 0.98 in all
  # Each serves LoRA adapters a and b of its model (the adapter check's series), and
  # reports a quota it never reaches.
  "$bin" simulate --listen "127.0.0.1:${replica_ports[$i]}" --ttft "$ttft" --itl 5ms --jitter 0.3 --reasoning 4 \
    --served-model-name sim-replica --lora a --lora b --rate-limit 1000000000 --rate-limit-window 1h \
    --corrupt-rate "$corrupt" --max-model-len 8192 --fault http_500=0.05 --fault reset=0.03 "${cache[@]}" \
    >"$tmp/replica-$i.log" 2>&1 &
  pids+=($!)
done
# What node_local pods discovery finds on each node, as file_sd: replica-0 and -1 on node a,
# replica-2 and -3 on node b, each labelled with its pod and namespace (node is the probe's,
# from labels_from_env, as with node_local).
for node in a b; do
  first=0
  [ "$node" = b ] && first=2
  "$python" - "$tmp/replicas-$node.json" "$first" "${replica_ports[@]}" <<'EOF'
import json, sys
out, first, ports = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
groups = [{"targets": [f"127.0.0.1:{ports[i]}"],
           "labels": {"pod": f"replica-{i}", "namespace": "proof", "app": "sim"}}
          for i in (first, first + 1)]
json.dump(groups, open(out, "w"))
EOF
done

config() { # config NODE: the daemon's configuration on proof-node-NODE
  cat <<EOF
shutdown_grace = "1s"
# Each DaemonSet pod labels its series with its node and its own pod (the downward API sets
# NODE_NAME and POD_NAME); pod and namespace are left to discovered replicas.
labels_from_env = { node = "NODE_NAME", probe_pod = "POD_NAME" }

# (No url here: a discovery template inherits [defaults], and its url comes from discovery.)
[defaults]
rate = 5
input_tokens = 32
output_tokens = 16
request_timeout = "10s"

[[targets]]
name = "chat"
backend = "openai-chat"
url = "https://127.0.0.1:$sim_port"
insecure_skip_verify = true
model = "sim-chat"
slo = { ttft = "80ms", tpot = "10ms", itl = "20ms", e2el = "2s", objective = 0.95 }
canary = { interval = "1s", max_tokens = 8, structured = true }
# The simulator as a pool (one replica): its checks hit.
prefix_cache = { interval = "1s", prefix_tokens = 64, block_tokens = 16, objective = 0.5 }
# An agent's session every 5 s, its depth turn to the simulator's advertised window.
session = { interval = "5s", tool_gap = "0s", human_gap = "1s", long_gap = "2s", depth_tokens = "served", depth_every = 1, affinity_headers = ["x-session-id"], max_tokens = 16 }
# The simulator's sampler every 2 s: a calibration window (256 tokens) every 8 s.
sampler = { interval = "2s" }

[[targets]]
name = "completions"
backend = "openai"
url = "https://127.0.0.1:$sim_port"
insecure_skip_verify = true
model = "sim-base"

[[targets]]
name = "messages"
backend = "anthropic"
url = "https://127.0.0.1:$sim_port"
insecure_skip_verify = true
model = "sim-claude"

# The replicas on this node, one target each, all labelled target="replicas".
[[discovery]]
name = "replicas"
source = "file"
path = "$tmp/replicas-$1.json"
refresh = "2s"
[discovery.template]
backend = "openai-chat"
model = "sim-replica"
rate = 3
slo = { ttft = "80ms", tpot = "10ms", itl = "20ms", e2el = "2s", objective = 0.95 }
# Every replica is checked for correct answers too (the simulators' toy model answers),
# and for usable JSON answers and tool calls (the built-in structured prompts).
canary = { interval = "1s", max_tokens = 16, structured = true }
prefix_cache = { interval = "1s", prefix_tokens = 64, block_tokens = 16, objective = 0.9 }
session = { interval = "5s", tool_gap = "0s", human_gap = "1s", long_gap = "2s", depth_tokens = "served", depth_every = 1, affinity_headers = ["x-session-id"], max_tokens = 16 }
sampler = { interval = "2s" }
adapters = { interval = "1s" }
EOF
  # On node b, a block whose file does not exist: discovery_up 0, InferprobeDiscoveryDown.
  if [ "$1" = b ]; then
    cat <<EOF

[[discovery]]
name = "missing"
source = "file"
path = "$tmp/no-such-file.json"
refresh = "2s"
[discovery.template]
backend = "openai-chat"
EOF
  fi
}
for node in a b; do
  config "$node" >"$tmp/inferprobe-$node.toml"
  mode=$histograms
  # A mixed fleet: node a's daemon classic, node b's native (as mid-upgrade from a text-only
  # version, or a mode switch half rolled out).
  if [ "$histograms" = mixed ]; then
    if [ "$node" = a ]; then mode=classic; else mode=native; fi
  fi
  if [ -n "$mode" ]; then
    printf '\n[metrics]\nhistograms = "%s"\n' "$mode" >>"$tmp/inferprobe-$node.toml"
  fi
  NODE_NAME=proof-node-$node POD_NAME=proof-probe-$node "$bin" check \
    --config "$tmp/inferprobe-$node.toml" >/dev/null
done
NODE_NAME=proof-node-a POD_NAME=proof-probe-a "$bin" run --config "$tmp/inferprobe-a.toml" \
  --listen "127.0.0.1:$port_a" >"$tmp/daemon-a.log" 2>&1 &
pids+=($!)
NODE_NAME=proof-node-b POD_NAME=proof-probe-b "$bin" run --config "$tmp/inferprobe-b.toml" \
  --listen "127.0.0.1:$port_b" >"$tmp/daemon-b.log" 2>&1 &
pids+=($!)

# --- (c) Prometheus: scrape every 2 s, the rules evaluated every 2 s -------------------
# The rules files' group intervals (30s) are shortened in copies, so the proof needs no
# minutes of waiting; the rules themselves are used unchanged.
for rules in recording-rules alerting-rules; do
  sed -E 's/^([[:space:]]*)interval:.*/\1interval: 2s/' "config/prometheus/$rules.yml" \
    >"$tmp/$rules.yml"
done
# As the PodMonitor scrapes a DaemonSet pod: the daemon's own labels win (honorLabels), the
# target adds the probe's node and pod as `node` and `probe_pod`, and no `pod` or
# `namespace` (the PodMonitor drops Prometheus's, which would name the probe).
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
rule_files:
  - $tmp/recording-rules.yml
  - $tmp/alerting-rules.yml
scrape_configs:
  - job_name: inferprobe
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:$port_a"]
        labels: {node: proof-node-a, probe_pod: proof-probe-a}
      - targets: ["127.0.0.1:$port_b"]
        labels: {node: proof-node-b, probe_pod: proof-probe-b}
  # The replicas' own metrics (vLLM's names; the simulator exports what it did), labelled
  # as a pod scrape labels a server's series: the probe-vs-server panels join on them.
  - job_name: vllm
    static_configs:
      - targets: ["127.0.0.1:$rep0"]
        labels: {pod: replica-0, namespace: proof}
      - targets: ["127.0.0.1:$rep1"]
        labels: {pod: replica-1, namespace: proof}
      - targets: ["127.0.0.1:$rep2"]
        labels: {pod: replica-2, namespace: proof}
      - targets: ["127.0.0.1:$rep3"]
        labels: {pod: replica-3, namespace: proof}
EOF
promtool check rules config/prometheus/recording-rules.yml config/prometheus/alerting-rules.yml >/dev/null
promtool check config "$tmp/prometheus.yml" >/dev/null
features=()
[ -n "$histograms" ] && features=(--enable-feature=native-histograms,exemplar-storage)
"$prometheus" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --storage.tsdb.retention.time=1d --web.listen-address="127.0.0.1:$prom_port" \
  "${features[@]}" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
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

sys.path.insert(0, "scripts")  # run from the repository's root
from proof_queries import (dashboard_queries, grouped_by, panels, per_replica,  # noqa: E402
                           rule_exprs, substitute)

base, wait_seconds = sys.argv[1], float(sys.argv[2])
rules_file, alerts_file = sys.argv[3], sys.argv[4]
verbose = os.environ.get("PROOF_VERBOSE") == "1"
NODES = ["proof-node-a", "proof-node-b"]
REPLICAS = ["replica-0", "replica-1", "replica-2", "replica-3"]
SLOW_REPLICA = "replica-3"
# Template variables as Grafana substitutes them (multi-value regex: "(a|b)"); the overview
# selects All; the target dashboard runs twice, for the configured target with the SLO and
# for the discovered one (its replicas), with both nodes and every pod picked explicitly.
ALL = {"cluster": ".*", "target": ".*", "model": ".*", "node": ".*", "pod": ".*"}
BOTH_NODES = "(" + "|".join(NODES) + ")"
VARIABLES = {
    "inferprobe-overview.json": [ALL],
    "inferprobe-target.json": [
        {"cluster": ".*", "target": "chat", "model": "(sim-chat)", "node": BOTH_NODES, "pod": ".*"},
        {"cluster": ".*", "target": "replicas", "model": "(sim-replica)", "node": BOTH_NODES,
         "pod": "(" + "|".join(REPLICAS) + ")"},
    ],
}


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


checks = []  # (what, expr, needs every node, needs every replica)
for file, variables, item, t, expr in dashboard_queries(VARIABLES, ALL):
    replicas = variables["target"] != "chat"  # the replicas' target is selected
    run = f"{file} [target {variables['target']}]"
    if t is None:  # a template variable
        checks.append((f"{run} variable {item['name']}", expr, item["name"] == "node",
                       replicas and item["name"] == "pod"))
    elif 'turn="long_gap"' in t["expr"]:
        # No long_gap turn is judged on these simulators (UNJUDGED below says why).
        continue
    elif replicas and "tls_earliest_cert_expiry" in t["expr"]:
        # The replicas serve plain HTTP (Prometheus scrapes their own /metrics): no
        # certificate. The configured targets' simulator serves HTTPS and shows one.
        continue
    elif not per_replica(item) or replicas:
        checks.append((f"{run} panel {item['id']} {item['title']!r} [{t['refId']}]", expr,
                       grouped_by(t["expr"], "node"), replicas and grouped_by(t["expr"], "pod")))
rules = rule_exprs(rules_file)
if not rules:
    sys.exit(f"FAIL: no rules read from {rules_file}")
# Rules that record a fault only, with nothing to record in a healthy store: each must
# evaluate and record nothing here.
QUIET = {
    # The budget window short for good (issue 56): a fresh store has no coverage a day ago
    # and its coverage grows.
    "inferprobe:sli_window_short:ratio",
    # A session refusal that holds (issue 61: kept only while the probe pod's
    # inferprobe_session_refusal_open is 1): none on these servers, whose faults are 5xx,
    # 429 and resets, never a refused history, tools or window.
    "inferprobe:session_history_rejected:max_increase1h",
    "inferprobe:session_tools_rejected:max_increase1h",
    "inferprobe:session_window_exceeded:max_increase1h",
    "inferprobe:session_depth_rejected:max_increase3h",
}
# Rules that may have no series here, asked for nothing: a long_gap turn is judged only
# where the turn before it (two tool results) added a whole 16-word block beyond what
# earlier turns could leave cached (issue 61), and the simulator counts a compact JSON result
# as one word. config/prometheus/tests/session.test.yml holds them to their numbers.
UNJUDGED = {
    "inferprobe:session_long_gap_cache_judged:increase6h",
    "inferprobe:session_long_gap_cache_hit:ratio_rate6h",
}
quiet = []
for name, expr in rules:
    if name in UNJUDGED:
        continue
    if name in QUIET:
        quiet += [(f"rule {name} (expression)", expr), (f"rule {name} (recorded series)", name)]
        continue
    # The per-replica rules must see every replica.
    replica_rule = name.startswith("inferprobe:replica_")
    checks.append((f"rule {name} (expression)", expr, False, replica_rule))
    checks.append((f"rule {name} (recorded series)", name, False, replica_rule))
alerts = dict(rule_exprs(alerts_file))
if not alerts:
    sys.exit(f"FAIL: no alerts read from {alerts_file}")


def problem(answer, by_node, by_pod=False):
    """None when the answer is good, else why not."""
    if answer.get("status") != "success":
        return "error"
    result = answer["data"]["result"]
    if answer["data"]["resultType"] == "vector" and not result:
        return "no series"
    # A native histogram sample (a heatmap's sum of rates) is judged by its count.
    values = [s["value"][1] if "value" in s else s["histogram"][1]["count"] for s in result] \
        if answer["data"]["resultType"] == "vector" else []
    if values and all(v == "NaN" for v in values):
        return "only NaN"
    if by_node:
        nodes = {s["metric"].get("node") for s in result}
        if not set(NODES) <= nodes:
            return f"not every node: {sorted(map(str, nodes))}"
    if by_pod:
        pods = {s["metric"].get("pod") for s in result}
        if not set(REPLICAS) <= pods:
            return f"not every replica: {sorted(map(str, pods))}"
    return None


# (d) Wait until both daemons are scraped with rates over both nodes and every recording
# rule has produced its series, bounded.
ready = [
    ('count(up{job="inferprobe"} == 1)', 2),
    ("count(count by (node) ((histogram_count(rate(inferprobe_time_to_first_token_seconds[1m]))"
     " or rate(inferprobe_time_to_first_token_seconds_count[1m])) > 0))", 2),
    ("count(count by (target) (rate(inferprobe_request_errors_total[1m]) > 0))", 4),
    # Every target has successful probes in the window its panels read (a target whose
    # first successes come late on a busy machine is waited for, not reported as NaN).
    ("count(count by (target) ((histogram_count(rate(inferprobe_time_to_first_token_seconds[1m]))"
     " or rate(inferprobe_time_to_first_token_seconds_count[1m])) > 0))", 4),
    ('count(count by (pod) (rate(inferprobe_request_errors_total{target="replicas"}[1m]) > 0))',
     len(REPLICAS)),
    ('count(inferprobe:replica_ttft_probes:increase15m{target="replicas"} >= 10)', len(REPLICAS)),
    # Enough prefix-cache checks on every replica for InferprobePrefixCacheMisses to judge.
    ('count(inferprobe:prefix_cache_judged:increase1h{target="replicas"} >= 10)', len(REPLICAS)),
] + [(f"count({name})", 1) for name, _ in rules if name not in QUIET | UNJUDGED]
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
print(f"data after {time.monotonic() - start:.0f}s: both nodes and every replica scraped, "
      "every recording rule evaluated")

# What Prometheus stored of the per-target histograms: in native mode the native histogram
# alone, on every node, so every query and rule below ran on native series.
HISTOGRAMS = ["inferprobe_time_to_first_token_seconds", "inferprobe_time_per_output_token_seconds",
              "inferprobe_inter_token_latency_seconds", "inferprobe_e2e_request_latency_seconds",
              "inferprobe_request_output_tokens", "inferprobe_request_prompt_tokens",
              "inferprobe_schedule_lag_seconds", "inferprobe_prefix_cache_cold_ttft_seconds",
              "inferprobe_prefix_cache_warm_ttft_seconds"]
mode = os.environ.get("PROOF_HISTOGRAMS", "")
for name in HISTOGRAMS:
    native = query(f"count by (node) (histogram_count({name}))")["data"]["result"]
    classic = query(f"count by (node) ({name}_bucket)")["data"]["result"]
    stored = {"native": len(native), "classic": len(classic)}
    want = {"native": 2, "classic": 0} if mode == "native" else None
    if mode in ("", "classic"):
        want = {"native": 0, "classic": 2}
    if mode == "mixed":
        want = {"native": 1, "classic": 1}
    if want is not None and stored != want:
        sys.exit(f"FAIL: {name}: nodes with native / classic series {stored}, want {want}")
print(f"per-target histograms stored as {'native' if stored['native'] else 'classic'} series "
      f"([metrics] histograms = {mode or 'default'}, {'protobuf' if mode else 'text'} scrape)"
      if mode != "mixed" else "per-target histograms stored as classic series on node a and "
      "native series on node b (a mixed fleet)")

# Every rule of both rules files evaluates without error in Prometheus itself.
groups = get("/api/v1/rules")["data"]["groups"]
healthy = 0
for g in groups:
    for r in g["rules"]:
        if r.get("health") != "ok":
            sys.exit(f"FAIL: rule {r['name']}: health {r.get('health')}: {r.get('lastError')}")
        healthy += 1
if healthy != len(rules) + len(alerts):
    sys.exit(f"FAIL: Prometheus runs {healthy} rules, the files have {len(rules) + len(alerts)}")

# The new alerts' expressions pick exactly what they should (their `for` is not waited for).
failures = 0
EXPECTED_ALERTS = {
    # The slow replica, on its node, and no other.
    "InferprobeReplicaOutlier": [{"target": "replicas", "namespace": "proof", "pod": SLOW_REPLICA,
                                  "node": "proof-node-b"}],
    # The block whose file is missing, failing on one probe pod.
    "InferprobeDiscoveryDown": [{"discovery": "missing"}],
    # The replica whose prefix cache is off, and neither its peers nor the pool.
    "InferprobePrefixCacheMisses": [{"target": "replicas", "namespace": "proof", "pod": "replica-2"}],
}
for name, want in EXPECTED_ALERTS.items():
    answer = query(alerts[name])
    got = [{k: v for k, v in s["metric"].items() if k != "__name__"}
           for s in answer.get("data", {}).get("result", [])]
    if answer.get("status") != "success" or got != want:
        failures += 1
        print(f"FAIL: alert {name}: its expression returns {got}, want {want}\n"
              f"  expr: {alerts[name]}\n  response: {json.dumps(answer)[:2000]}", file=sys.stderr)
    elif verbose:
        print(f"ok  alert {name} picks {got}: {answer['data']['result'][0]['value'][1]}")

# A mixed fleet: every histogram panel shows each member, once. At one instant, a quantile
# panel's line per kind equals the same query over that kind's node alone, and a heatmap's
# counts per bound are node a's plus node b's.
def at(expr, t):
    data = urllib.parse.urlencode({"query": expr, "time": f"{t:.3f}"}).encode()
    with urllib.request.urlopen(base + "/api/v1/query", data=data, timeout=15) as r:
        return json.load(r)["data"]["result"]


def keyed(result, drop=()):
    return {tuple(sorted((k, v) for k, v in s["metric"].items() if k not in drop)):
            float(s["value"][1]) for s in result}


def close(a, b):
    # NaN is no value: a blanked cell or line fails.
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


mixed_checked = 0
if mode == "mixed":
    t = time.time() - 10  # a settled instant, the same for every query
    overview = json.load(open("dashboards/inferprobe-overview.json"))
    target = json.load(open("dashboards/inferprobe-target.json"))
    alone = {"classic": "proof-node-a", "native": "proof-node-b"}
    dashboards = [(overview, ALL), (target, VARIABLES["inferprobe-target.json"][0])]
    lines = [(p, q, variables) for dashboard, variables in dashboards
             for p in panels(dashboard["panels"]) for q in p.get("targets", [])
             if '"histograms", "native"' in q["expr"] and 'pod!=""' not in q["expr"]]
    for p, q, variables in lines:
        fleet = at(substitute(q["expr"], variables), t)
        kinds = {s["metric"].get("histograms") for s in fleet}
        if kinds != {"classic", "native"}:
            failures += 1
            print(f"FAIL: mixed fleet: {p['title']!r} [{q['refId']}] shows kinds {kinds}",
                  file=sys.stderr)
            continue
        for kind, node in alone.items():
            one = keyed(at(substitute(q["expr"], dict(variables, node=node)), t))
            mine = keyed([s for s in fleet if s["metric"]["histograms"] == kind])
            if mine.keys() != one.keys() or not all(close(mine[k], one[k]) for k in one):
                failures += 1
                print(f"FAIL: mixed fleet: {p['title']!r} [{q['refId']}] {kind}: {mine} "
                      f"but {node} alone: {one}", file=sys.stderr)
        mixed_checked += 1
    for p in panels(target["panels"]):
        if p["type"] != "heatmap" or "histogram_fraction" not in p["targets"][0]["expr"]:
            continue
        variables = VARIABLES["inferprobe-target.json"][0]
        expr = p["targets"][0]["expr"]
        fleet = keyed(at(substitute(expr, variables), t))
        a = keyed(at(substitute(expr, dict(variables, node="proof-node-a")), t))
        b = keyed(at(substitute(expr, dict(variables, node="proof-node-b")), t))
        summed = {k: a.get(k, 0.0) + b.get(k, 0.0) for k in a.keys() | b.keys()}
        inf = (("le", "+Inf"),)
        if not fleet.get(inf) or fleet.keys() != summed.keys() or \
                not all(close(fleet[k], summed[k]) for k in fleet):
            failures += 1
            print(f"FAIL: mixed fleet: heatmap {p['title']!r}: {fleet} is not node a's {a} plus "
                  f"node b's {b}", file=sys.stderr)
        mixed_checked += 1
    # Every latency quantile of the overview (4 latencies x 3, and the schedule lag), the
    # target dashboard's quantile lines for a configured target, and the four heatmaps.
    if mixed_checked < 40:
        failures += 1
        print(f"FAIL: mixed fleet: only {mixed_checked} histogram queries checked, want 40",
              file=sys.stderr)
    print(f"mixed fleet: {mixed_checked} histogram queries show every member once")

# (e) Every expression. A failed answer is asked again after two scrapes, up to twice: one
# scrape that times out on a loaded machine (the 2 s scrape_timeout) writes staleness markers
# for all of that daemon's series, so every query for a moment lacks its node (CI saw the last
# 7 queries of a run miss node b that way, and the same run pass alone). A query that is
# wrong fails all three; the ones asked again are named below.
asked_again = []
for what, expr in quiet:
    answer = query(expr)
    if answer.get("status") != "success" or answer["data"]["result"]:
        failures += 1
        print(f"FAIL (a fault recorded in a healthy store): {what}\n  expr: {expr}\n"
              f"  response: {json.dumps(answer)[:2000]}", file=sys.stderr)
    elif verbose:
        print(f"ok    0 series  {what} (records a fault only)")
for what, expr, by_node, by_pod in checks:
    answer = query(expr)
    why = problem(answer, by_node, by_pod)
    for _ in range(2):
        if why is None:
            break
        was = why
        time.sleep(4)
        answer = query(expr)
        why = problem(answer, by_node, by_pod)
        if why is None:
            up = query('up == 0')["data"]["result"]
            asked_again.append(f"{what} ({was}; scrapes down now: "
                               f"{[s['metric'].get('instance') for s in up]})")
    if why is None:
        if verbose:
            result = answer["data"]["result"]
            values = ", ".join((s["value"][1] if "value" in s else "histogram")[:9] for s in result[:3])
            print(f"ok  {len(result):3d} series  {what}: {values}")
        continue
    failures += 1
    print(f"FAIL ({why}): {what}\n  expr: {expr}\n  response: {json.dumps(answer)[:2000]}",
          file=sys.stderr)

panel_queries = sum(1 for what, *_ in checks if " panel " in what)
variable_queries = sum(1 for what, *_ in checks if " variable " in what)
if failures:
    print(f"prometheus-proof: FAILED: {failures} of {len(checks) + len(EXPECTED_ALERTS)} checks",
          file=sys.stderr)
    sys.exit(1)
for line in asked_again:
    print(f"asked again after a scrape: {line}")
print(f"prometheus-proof: {len(checks)} expressions checked against Prometheus, all returned "
      f"data: {panel_queries} dashboard panel queries, {variable_queries} variable queries, "
      f"{len(rules) - len(QUIET)} recording rule expressions and their {len(rules) - len(QUIET)} "
      f"recorded series; {len(QUIET)} rule(s) of a fault only ({', '.join(sorted(QUIET))}) "
      f"evaluated, recording nothing; {healthy} rules healthy; {' and '.join(EXPECTED_ALERTS)} pick exactly what they should")
EOF
status=0
"$python" "$tmp/check.py" "http://127.0.0.1:$prom_port" "$wait_seconds" \
  config/prometheus/recording-rules.yml config/prometheus/alerting-rules.yml || status=$?
if [ "$status" = 2 ]; then show_logs; fi # no data: the logs say why
exit "$status"
