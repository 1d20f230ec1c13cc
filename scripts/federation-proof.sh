#!/usr/bin/env bash
# Proof that two clusters federated into one global Prometheus stay two sites (docs/alerts.md,
# "Routing"; issue "numbers true across clusters and 30 days", item 3). The site is each
# cluster Prometheus's external label, not the daemon's config.
#
# Cluster a and cluster b each run a simulator, a daemon probing it as target "vllm" (the
# same name in both; SLO 99%) and a Prometheus with `external_labels: {cluster: a}` (or b)
# scraping it and running the shipped rules. Cluster b's endpoint fails every probe
# (`--fault http_500=1`). A global Prometheus federates both (`/federate`,
# `match[]={job="inferprobe"}`, `honor_labels: true`) and runs the shipped rules. It fails
# unless:
#   - the global dropped no sample (duplicate timestamps, out of order, out of bounds) and
#     no rule evaluation failed;
#   - every dashboard query (scripts/proof_queries.py: the ones scripts/prometheus-proof.sh
#     runs), with the cluster variable at a and at b, returns only that cluster's series;
#     and with All, every query that shows cluster a shows cluster b too, except the ones
#     about successful probes (b has none);
#   - b's success ratio is 0, its budget left and availability are not 1, a's are healthy;
#     InferprobeErrorBudgetBurnFast fires in the global for b alone;
#   - when b's daemon stops, the global's InferprobeNoData fires for cluster b alone (cluster
#     a still reports, so absent() of everything cannot), and b's own Prometheus fires it
#     naming "b" from $externalLabels.
# Time is scaled: rules every 2 s, and in the copies of the rules every `for:` is 10 s; the
# global and b's Prometheus run with --query.lookback-delta=20s, so a vanished series is gone
# in 20 s, not 5 minutes. The rules themselves are the shipped ones.
#
# Everything listens on 127.0.0.1 only, is bounded in time, and is stopped on exit.
# Usage: bash scripts/federation-proof.sh
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)

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
[ -x /usr/bin/python3 ] && python=/usr/bin/python3
"$prometheus" --version 2>&1 | head -1

tmp=$(mktemp -d)
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cargo build --quiet
bin=${CARGO_TARGET_DIR:-target}/debug/inferprobe

read -r sim_a sim_b port_a port_b prom_a prom_b prom_g < <("$python" - <<'EOF'
import socket
socks = [socket.socket() for _ in range(7)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)
[ -n "$prom_g" ] || { echo "could not pick free ports" >&2; exit 1; }

"$bin" simulate --listen "127.0.0.1:$sim_a" --ttft 20ms --itl 2ms --jitter 0.3 \
  >"$tmp/sim-a.log" 2>&1 &
pids+=($!)
"$bin" simulate --listen "127.0.0.1:$sim_b" --ttft 20ms --itl 2ms --fault http_500=1 \
  >"$tmp/sim-b.log" 2>&1 &
pids+=($!)
for c in a b; do
  sim=$sim_a
  [ "$c" = b ] && sim=$sim_b
  # No `cluster` here: the site is the cluster Prometheus's external label.
  cat >"$tmp/inferprobe-$c.toml" <<EOF
shutdown_grace = "1s"
labels_from_env = { node = "NODE_NAME" }

[[targets]]
name = "vllm"
backend = "openai-chat"
url = "http://127.0.0.1:$sim"
model = "sim-chat"
rate = 5
input_tokens = 16
output_tokens = 8
request_timeout = "5s"
max_concurrency = 16
slo = { ttft = "200ms", e2el = "2s", objective = 0.99 }
EOF
  NODE_NAME=node-$c "$bin" check --config "$tmp/inferprobe-$c.toml" >/dev/null
done
NODE_NAME=node-a "$bin" run --config "$tmp/inferprobe-a.toml" --listen "127.0.0.1:$port_a" \
  >"$tmp/daemon-a.log" 2>&1 &
pids+=($!)
NODE_NAME=node-b "$bin" run --config "$tmp/inferprobe-b.toml" --listen "127.0.0.1:$port_b" \
  >"$tmp/daemon-b.log" 2>&1 &
daemon_b=$!
pids+=($daemon_b)

# The shipped rules, every group evaluated every 2 s and every `for:` 10 s.
for rules in recording-rules alerting-rules; do
  sed -E -e 's/^([[:space:]]*)interval:.*/\1interval: 2s/' -e 's/^([[:space:]]*)for:.*/\1for: 10s/' \
    "config/prometheus/$rules.yml" >"$tmp/$rules.yml"
done
cluster_config() { # cluster_config NAME DAEMON_PORT
  cat <<EOF
global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
  external_labels: {cluster: $1}
rule_files: [$tmp/recording-rules.yml, $tmp/alerting-rules.yml]
scrape_configs:
  - job_name: inferprobe
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:$2"]
EOF
}
cluster_config a "$port_a" >"$tmp/prometheus-a.yml"
cluster_config b "$port_b" >"$tmp/prometheus-b.yml"
cat >"$tmp/prometheus-g.yml" <<EOF
global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
rule_files: [$tmp/recording-rules.yml, $tmp/alerting-rules.yml]
scrape_configs:
  - job_name: federate
    honor_labels: true
    metrics_path: /federate
    params:
      'match[]': ['{job="inferprobe"}']
    static_configs:
      - targets: ["127.0.0.1:$prom_a", "127.0.0.1:$prom_b"]
EOF
for c in a b g; do promtool check config "$tmp/prometheus-$c.yml" >/dev/null; done
start_prometheus() { # NAME PORT [FLAGS...]
  local name=$1 port=$2
  shift 2
  "$prometheus" --config.file="$tmp/prometheus-$name.yml" --storage.tsdb.path="$tmp/data-$name" \
    --storage.tsdb.retention.time=1d --web.listen-address="127.0.0.1:$port" --log.level=warn \
    "$@" >"$tmp/prometheus-$name.log" 2>&1 &
  pids+=($!)
}
start_prometheus a "$prom_a"
start_prometheus b "$prom_b" --query.lookback-delta=20s
start_prometheus g "$prom_g" --query.lookback-delta=20s

status=0
"$python" - "$prom_a" "$prom_b" "$prom_g" "$daemon_b" "$tmp" <<'EOF' || status=$?
import json, os, re, sys, time, urllib.error, urllib.parse, urllib.request
sys.path.insert(0, "scripts")
from proof_queries import dashboard_queries  # noqa: E402

prom_a, prom_b, prom_g, daemon_b, tmp = sys.argv[1:]
G, B = f"http://127.0.0.1:{prom_g}", f"http://127.0.0.1:{prom_b}"
failures = []


def query(base, expr):
    data = urllib.parse.urlencode({"query": expr}).encode()
    try:
        with urllib.request.urlopen(base + "/api/v1/query", data=data, timeout=15) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        return json.load(e)


def result(base, expr):
    answer = query(base, expr)
    if answer.get("status") != "success":
        failures.append(f"{expr}: {json.dumps(answer)[:500]}")
        return []
    return answer["data"]["result"]


def wait(what, check, seconds):
    start = time.monotonic()
    while True:
        try:
            if check():
                return time.monotonic() - start
        except (OSError, ValueError, KeyError, IndexError):
            pass
        if time.monotonic() - start > seconds:
            sys.exit(f"FAIL: {what} after {seconds} s")
        time.sleep(1)


def clusters(expr):
    return {s["metric"].get("cluster") for s in result(G, expr)}


def value(base, expr):
    r = result(base, expr)
    return float(r[0]["value"][1]) if r else None


# Data from both clusters in the global, and every recorded SLI evaluated for both.
took = wait("both clusters' series and SLIs in the global", lambda: all(
    clusters(e) == {"a", "b"} for e in [
        "inferprobe_requests_total", "inferprobe:sli_errors:ratio_rate1h",
        "inferprobe:error_budget_remaining:ratio", 'inferprobe:sli_window_coverage:ratio30d',
        'rate(inferprobe_requests_total[1m]) > 0']), 90)
print(f"both clusters federated and evaluated in the global after {took:.0f} s")
time.sleep(10)  # a few more federation scrapes for the drop counters to see

# Nothing dropped in the global: its own counters, from its /metrics.
with urllib.request.urlopen(G + "/metrics", timeout=15) as r:
    metrics = r.read().decode()
dropped = {}
for name in ["prometheus_target_scrapes_sample_duplicate_timestamp_total",
             "prometheus_target_scrapes_sample_out_of_order_total",
             "prometheus_target_scrapes_sample_out_of_bounds_total",
             "prometheus_target_scrapes_exceeded_sample_limit_total",
             "prometheus_rule_evaluation_failures_total"]:
    values = [float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", metrics, re.M)]
    if not values:
        failures.append(f"the global exports no {name}")
    dropped[name] = sum(values)
print("global Prometheus: " + ", ".join(f"{k.replace('prometheus_', '')} {v:.0f}" for k, v in dropped.items()))
if any(dropped.values()):
    failures.append(f"samples dropped or rules failing in the global: {dropped}")

# Every dashboard query, per cluster: no other cluster's series; with All, both where a shows.
ALL = {"cluster": ".*", "target": ".*", "model": ".*", "node": ".*", "pod": ".*"}
SUCCESS_ONLY = re.compile(r"seconds|tokens|good_requests|cached|sli_(ttft|tpot|itl|e2el)|last_success|prefix_cache|canary|replica|vllm:|sglang:|pod!=")
checked = leaks = 0
only_a = []
for c in ("a", "b"):
    for file, variables, item, t, expr in dashboard_queries({}, dict(ALL, cluster=c)):
        if t is None and item["name"] == "cluster":
            continue  # the cluster variable lists every cluster, as it should
        checked += 1
        seen = {s["metric"]["cluster"] for s in result(G, expr) if "cluster" in s["metric"]}
        if seen - {c}:
            leaks += 1
            failures.append(f"{file} {item.get('title', item.get('name'))!r} with cluster {c} shows {seen}: {expr}")
for file, variables, item, t, expr in dashboard_queries({}, ALL):
    seen = {s["metric"].get("cluster") for s in result(G, expr)}
    if "a" in seen and "b" not in seen:
        if SUCCESS_ONLY.search(expr):
            only_a.append(item.get("title", item.get("name")))
        else:
            failures.append(f"{file} {item.get('title')!r} with All shows cluster a, not the failing b: {expr}")
print(f"{checked} dashboard queries with one cluster selected: {leaks} show the other; with All, "
      f"{len(set(only_a))} panels about successful probes show a alone (b has none)")

# The outage, in numbers, in the global.
ratio = {c: value(G, f'1 - sum(rate(inferprobe_request_errors_total{{cluster="{c}"}}[1m])) / sum(rate(inferprobe_requests_total{{cluster="{c}"}}[1m]))') for c in "ab"}
budget = {c: value(G, f'inferprobe:error_budget_remaining:ratio{{cluster="{c}"}}') for c in "ab"}
availability = {c: value(G, f'1 - inferprobe:sli_errors:ratio_rate1h{{cluster="{c}"}}') for c in "ab"}
print(f"success ratio a {ratio['a']:.3f} b {ratio['b']:.3f}; budget left a {budget['a']:.2f} "
      f"b {budget['b']:.2f}; availability (1h) a {availability['a']:.3f} b {availability['b']:.3f}")
if not (ratio["b"] == 0 and budget["b"] < 0 and availability["b"] == 0):
    failures.append(f"cluster b's outage does not show: {ratio}, {budget}, {availability}")
if not (ratio["a"] > 0.9 and availability["a"] > 0.9 and budget["a"] > 0.9):
    failures.append(f"cluster a is not healthy: {ratio}, {availability}")
took = wait("InferprobeErrorBudgetBurnFast firing for b", lambda: clusters(
    'ALERTS{alertname="InferprobeErrorBudgetBurnFast", alertstate="firing"}') == {"b"}, 60)
print(f"InferprobeErrorBudgetBurnFast fires in the global for cluster b alone")

# b's daemon stops: the global's no-data alert for b alone; b's own Prometheus names b.
os.kill(int(daemon_b), 15)
t0 = time.monotonic()
took = wait("InferprobeNoData firing in the global for cluster b", lambda: clusters(
    'ALERTS{alertname="InferprobeNoData", alertstate="firing"}') == {"b"}, 90)
print(f"b's daemon stopped: InferprobeNoData fires in the global for cluster b alone after {took:.0f} s")


def local_alert():
    with urllib.request.urlopen(B + "/api/v1/alerts", timeout=15) as r:
        alerts = json.load(r)["data"]["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == "InferprobeNoData" and a["state"] == "firing"]


wait("InferprobeNoData firing in b's Prometheus", lambda: local_alert(), 60)
summaries = {a["annotations"]["summary"] for a in local_alert()}
print(f"b's own Prometheus: {sorted(summaries)}")
if summaries != {"inferprobe is not probing in b."}:
    failures.append(f"b's no-data alert does not name b from $externalLabels: {summaries}")
for f in failures:
    print("FAIL: " + f, file=sys.stderr)
sys.exit(1 if failures else 0)
EOF
if [ "$status" != 0 ]; then
  for log in "$tmp"/prometheus-*.log; do echo "--- $log" >&2; tail -n 5 "$log" >&2; done
  exit "$status"
fi
echo "federation-proof: passed in $(($(date +%s) - started)) s"
