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
#     runs), with the cluster variable at a and at b, returns only that cluster's series, and
#     data unless for a named reason (a feature the daemons do not use: discovery, canary,
#     prefix cache, a TPOT threshold, per-replica panels; for b alone, latencies and token
#     counts, b having no successful probe); the availability panels (success and error
#     ratio, budget left, 1-hour SLI, burn rates, good-probe ratio, time since the last
#     success) read b's outage (0, -99, 1, 100, never) and a's health; with All, every query
#     that shows cluster a shows cluster b too, except the ones about successful probes;
#   - b's success ratio is 0, its budget left and availability are not 1, a's are healthy;
#     InferprobeErrorBudgetBurnFast fires in the global for b alone;
#   - when b's daemon stops, the global's InferprobeNoData fires for cluster b alone (cluster
#     a still reports, so absent() of everything cannot), and b's own Prometheus fires it
#     naming "b" from $externalLabels;
#   - a negative control, run alongside with its own daemons and Prometheus (x): the old
#     setup, both daemons' configs carrying `[labels] cluster = "a"` as a config copied
#     between clusters would, the external labels still a and b. `inferprobe check` warns
#     ("a site label") about that config, and the control's global must show the defect.
#     What Prometheus 2.42 does here: a series' own label wins over the external label (in
#     b's Prometheus and at `honor_labels: true` federation), so b's series arrive as
#     cluster a. Their instance and node labels differ from a's, so nothing collides and no
#     sample is dropped (the counters are printed); the two clusters merge: two series of
#     cluster a, none of b, a's error SLI about 0.5 and budget below 0, the burn alert
#     paging for a, and b's availability panels empty.
# Time is scaled: rules every 2 s, and in the copies of the rules every `for:` is 10 s; the
# global and b's Prometheus run with --query.lookback-delta=20s, so a vanished series is gone
# in 20 s, not 5 minutes. The rules themselves are the shipped ones.
#
# Everything listens on 127.0.0.1 only, is bounded in time, and is stopped on exit.
# Usage: bash scripts/federation-proof.sh
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)

source scripts/need-prometheus.sh  # Debian's prometheus and promtool; sets prometheus, python

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

read -r sim_a sim_b port_a port_b prom_a prom_b prom_g port_xa port_xb prom_xa prom_xb prom_xg \
  < <("$python" - <<'EOF'
import socket
socks = [socket.socket() for _ in range(12)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)
[ -n "$prom_xg" ] || { echo "could not pick free ports" >&2; exit 1; }

"$bin" simulate --listen "127.0.0.1:$sim_a" --ttft 20ms --itl 2ms --jitter 0.3 \
  >"$tmp/sim-a.log" 2>&1 &
pids+=($!)
"$bin" simulate --listen "127.0.0.1:$sim_b" --ttft 20ms --itl 2ms --fault http_500=1 \
  >"$tmp/sim-b.log" 2>&1 &
pids+=($!)
daemon_config() { # daemon_config SIMULATOR_PORT [EXTRA TOML before the target]
  cat <<EOF
shutdown_grace = "1s"
labels_from_env = { node = "NODE_NAME" }
${2:-}
[[targets]]
name = "vllm"
backend = "openai-chat"
url = "http://127.0.0.1:$1"
model = "sim-chat"
rate = 5
input_tokens = 16
output_tokens = 8
request_timeout = "5s"
max_concurrency = 16
slo = { ttft = "200ms", e2el = "2s", objective = 0.99 }
EOF
}
# No `cluster` here: the site is the cluster Prometheus's external label.
daemon_config "$sim_a" >"$tmp/inferprobe-a.toml"
daemon_config "$sim_b" >"$tmp/inferprobe-b.toml"
# The negative control (x): the old setup, one config copied to both clusters with the site
# in it, `[labels] cluster = "a"`, under the same external labels a and b.
for c in a b; do
  sim=$sim_a
  [ "$c" = b ] && sim=$sim_b
  daemon_config "$sim" $'[labels]\ncluster = "a"\n' >"$tmp/inferprobe-x$c.toml"
done
for c in a b; do
  NODE_NAME=node-$c "$bin" check --config "$tmp/inferprobe-$c.toml" >/dev/null 2>"$tmp/check-$c.err"
  if grep -q "a site label" "$tmp/check-$c.err"; then
    echo "FAIL: inferprobe check warns about a site label in $c's config, which has none" >&2
    exit 1
  fi
  # The control's config: check must warn (src/check.rs, site_labels).
  NODE_NAME=node-$c "$bin" check --config "$tmp/inferprobe-x$c.toml" >/dev/null 2>"$tmp/check-x$c.err" || {
    cat "$tmp/check-x$c.err" >&2
    echo "FAIL: inferprobe check rejects the control's config" >&2
    exit 1
  }
  grep -q "a site label" "$tmp/check-x$c.err" || {
    cat "$tmp/check-x$c.err" >&2
    echo "FAIL: inferprobe check does not warn about [labels] cluster in the control's config" >&2
    exit 1
  }
done
echo "inferprobe check on the control's config: $(grep -o 'label cluster = "a": a site label[^;]*' "$tmp/check-xa.err" | head -1)"
NODE_NAME=node-a "$bin" run --config "$tmp/inferprobe-a.toml" --listen "127.0.0.1:$port_a" \
  >"$tmp/daemon-a.log" 2>&1 &
pids+=($!)
NODE_NAME=node-b "$bin" run --config "$tmp/inferprobe-b.toml" --listen "127.0.0.1:$port_b" \
  >"$tmp/daemon-b.log" 2>&1 &
daemon_b=$!
pids+=($daemon_b)
for c in a b; do
  port=$port_xa
  [ "$c" = b ] && port=$port_xb
  NODE_NAME=node-$c "$bin" run --config "$tmp/inferprobe-x$c.toml" --listen "127.0.0.1:$port" \
    >"$tmp/daemon-x$c.log" 2>&1 &
  pids+=($!)
done

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
cluster_config a "$port_xa" >"$tmp/prometheus-xa.yml"
cluster_config b "$port_xb" >"$tmp/prometheus-xb.yml"
global_config() { # global_config CLUSTER_PROMETHEUS_PORT...
  cat <<EOF
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
      - targets: ["127.0.0.1:$1", "127.0.0.1:$2"]
EOF
}
global_config "$prom_a" "$prom_b" >"$tmp/prometheus-g.yml"
global_config "$prom_xa" "$prom_xb" >"$tmp/prometheus-xg.yml"
for c in a b g xa xb xg; do promtool check config "$tmp/prometheus-$c.yml" >/dev/null; done
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
start_prometheus xa "$prom_xa"
start_prometheus xb "$prom_xb"
start_prometheus xg "$prom_xg" --query.lookback-delta=20s

status=0
"$python" - "$prom_a" "$prom_b" "$prom_g" "$daemon_b" "$tmp" "$prom_xg" <<'EOF' || status=$?
import json, os, re, sys, time, urllib.error, urllib.parse, urllib.request
sys.path.insert(0, "scripts")
from proof_queries import dashboard_queries, per_replica  # noqa: E402

prom_a, prom_b, prom_g, daemon_b, tmp, prom_xg = sys.argv[1:]
G, B = f"http://127.0.0.1:{prom_g}", f"http://127.0.0.1:{prom_b}"
X = f"http://127.0.0.1:{prom_xg}"  # the negative control's global
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


def clusters(expr, base=G):
    return {s["metric"].get("cluster") for s in result(base, expr)}


def value(base, expr):
    r = result(base, expr)
    return float(r[0]["value"][1]) if r else None


def shown(answer):
    """The numbers a panel would draw: NaN (a quantile of no observation, 0/0) draws nothing;
    a native histogram sample counts by its count."""
    out = []
    for s in answer:
        v = float(s["value"][1] if "value" in s else s["histogram"][1]["count"])
        if v == v:
            out.append(v)
    return out


def drop_counters(base):
    with urllib.request.urlopen(base + "/metrics", timeout=15) as r:
        metrics = r.read().decode()
    dropped = {}
    for name in ["prometheus_target_scrapes_sample_duplicate_timestamp_total",
                 "prometheus_target_scrapes_sample_out_of_order_total",
                 "prometheus_target_scrapes_sample_out_of_bounds_total",
                 "prometheus_target_scrapes_exceeded_sample_limit_total",
                 "prometheus_rule_evaluation_failures_total"]:
        values = [float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", metrics, re.M)]
        if not values:
            failures.append(f"{base} exports no {name}")
        dropped[name] = sum(values)
    return dropped


def counters_text(dropped):
    return ", ".join(f"{k.replace('prometheus_target_scrapes_', '').replace('prometheus_', '')} {v:.0f}"
                     for k, v in dropped.items())


# Data from both clusters in the global, and every recorded SLI evaluated for both.
took = wait("both clusters' series and SLIs in the global", lambda: all(
    clusters(e) == {"a", "b"} for e in [
        "inferprobe_requests_total", "inferprobe:sli_errors:ratio_rate1h",
        "inferprobe:error_budget_remaining:ratio", 'inferprobe:sli_window_coverage:ratio30d',
        'rate(inferprobe_requests_total[1m]) > 0']), 90)
print(f"both clusters federated and evaluated in the global after {took:.0f} s")
time.sleep(10)  # a few more federation scrapes for the drop counters to see

# Nothing dropped in the global: its own counters, from its /metrics.
dropped = drop_counters(G)
print("global Prometheus: " + counters_text(dropped))
if any(dropped.values()):
    failures.append(f"samples dropped or rules failing in the global: {dropped}")

# Every dashboard query, per cluster: no other cluster's series, and data wherever the
# panel has something to show for that cluster; the availability panels show b's outage.
ALL = {"cluster": ".*", "target": ".*", "model": ".*", "node": ".*", "pod": ".*"}
# A query may show nothing only for a reason named here: a feature the proof's daemons do
# not use (for both clusters; as in scripts/prometheus-proof.sh, per-replica panels have
# data only for a discovered target's replicas, proof_queries.per_replica) ...
UNUSED = [
    (r"inferprobe_discovery_", "no discovery: the targets are configured"),
    (r"canary_", "no canary configured"),
    (r"prefix_cache", "no prefix-cache check configured"),
    (r"inferprobe_session_|inferprobe:session_", "no session check configured"),
    (r'sli_tpot_slow|slo="tpot"', "no TPOT threshold: the SLO sets ttft and e2el"),
]
# ... or, for b alone, no successful probe: b's endpoint answers HTTP 500 before any token,
# so no latency or token count was observed there (a must show them).
NO_SUCCESS = [
    (r"time_to_first_token|time_per_output_token|inter_token_latency|e2e_request_latency"
     r"|sli_ttft_slow", "b: no latency observed, no token came"),
    (r"request_(output|prompt)_tokens\b|prompt_cached_tokens", "b: no tokens counted"),
]
# The panels about availability, by expression: b's outage as they must read it, beside a
# healthy a. Every value the query returns is judged.
OUTAGE = [
    (r"^1 - \(\s*sum by \(cluster, (target|node)\) \(rate\(inferprobe_request_errors_total",
     "success ratio", lambda v: v == 0, lambda v: v > 0.9),
    (r"^inferprobe:error_budget_remaining:ratio", "budget left", lambda v: v < 0, lambda v: v > 0.9),
    (r"^1 - inferprobe:sli_errors:ratio_rate1h", "availability (1h)", lambda v: v == 0,
     lambda v: v > 0.9),
    (r"^inferprobe:sli_errors:ratio_rate1h\{[^}]*\}$", "error SLI (1h)", lambda v: v == 1,
     lambda v: v < 0.1),
    (r"^inferprobe:sli_errors:ratio_rate\w+\{[^}]*\}\s*/ on \(cluster, target\)\s*inferprobe:error_budget:",
     "availability burn rate", lambda v: v > 14.4, lambda v: v < 1),
    (r"^sum by \(cluster, target\) \(rate\(inferprobe_request_errors_total[^\n]*\)\s*/\s*sum by",
     "error ratio", lambda v: v == 1, lambda v: v < 0.1),
    (r"^sum by \(cluster, target\) \(rate\(inferprobe_good_requests_total[^\n]*\)\s*/\s*sum by",
     "good-probe ratio", lambda v: v == 0, lambda v: v > 0.9),
    (r"^time\(\) - max by \(cluster, target\) \(inferprobe_last_success_timestamp_seconds",
     "seconds since the last success", lambda v: v > 1e9, lambda v: v < 60),
]
DUMP = os.environ.get("PROOF_VERBOSE") == "1"
checked = leaks = 0
with_data = {"a": 0, "b": 0}
excused = {}  # reason -> panels that showed nothing for it
outage_seen = {}  # what -> b's values
for c in ("a", "b"):
    for file, variables, item, t, expr in dashboard_queries({}, dict(ALL, cluster=c)):
        name = item.get("title", item.get("name"))
        if t is None and item["name"] == "cluster":
            continue  # the cluster variable lists every cluster, as it should
        checked += 1
        if t is not None and "$cluster" not in t["expr"]:
            # Unfiltered, a query aggregates every cluster into series without the label,
            # which the check below cannot tell from one cluster's (a review's sabotage:
            # `sum by (target)` merged a's 100% and b's 0% and passed).
            leaks += 1
            failures.append(f"{file} {name!r} [{t['refId']}] does not filter by $cluster: {t['expr']}")
        answer = result(G, expr)
        seen = {s["metric"]["cluster"] for s in answer if "cluster" in s["metric"]}
        if seen - {c}:
            leaks += 1
            failures.append(f"{file} {name!r} with cluster {c} shows {seen}: {expr}")
        numbers = shown(answer)
        template = expr if t is None else t["expr"].strip()
        if DUMP:
            print(f"  [{c}] {file} {name!r} {(t or {}).get('refId')}: {numbers[:6]}")
        if not numbers:
            reason = next((r for p, r in UNUSED if re.search(p, template)), None)
            if reason is None and t is not None and per_replica(item):
                reason = "per-replica panels: the proof's targets are configured, not discovered"
            if reason is None and c == "b":
                reason = next((r for p, r in NO_SUCCESS if re.search(p, template)), None)
            if reason is None:
                failures.append(f"{file} {name!r} with cluster {c} shows nothing: {expr}")
            else:
                excused.setdefault(reason, set()).add(f"{file[11:-5]}: {name}")
            continue
        with_data[c] += 1
        for pattern, what, bad, good in OUTAGE:
            if t is not None and re.search(pattern, template):
                if c == "b":
                    outage_seen.setdefault(what, []).extend(numbers)
                if not all((bad if c == "b" else good)(v) for v in numbers):
                    failures.append(f"{file} {name!r} [{t['refId']}] ({what}) with cluster {c} reads {numbers}")
        if re.search(r"^sum by \(cluster, category\) \(rate\(inferprobe_request_errors_total", template) \
                and (sum(numbers) > 0) != (c == "b"):
            failures.append(f"{file} {name!r} with cluster {c}: errors by category {numbers}")
for pattern, what, _, _ in OUTAGE:
    if what not in outage_seen:
        failures.append(f"no dashboard query reads {what} ({pattern}): the list is stale")
for pattern, why in UNUSED + NO_SUCCESS:
    if why not in excused:  # an entry no empty panel needs any more
        failures.append(f"no dashboard query matches {pattern} ({why}): the list is stale")
print(f"{checked} dashboard queries with one cluster selected: {leaks} show the other; "
      f"{with_data['a']} show data for a, {with_data['b']} for b; the others nothing, for a reason:")
for why, titles in excused.items():
    print(f"  {why}: {', '.join(sorted(titles))}")
print("b's outage in its panels: " + "; ".join(
    f"{what} {sorted(set(round(v, 2) for v in vs))}" for what, vs in outage_seen.items()))
# With All: every query that shows cluster a shows b too, but for successful probes'.
only_a = set()
for file, variables, item, t, expr in dashboard_queries({}, ALL):
    seen = {s["metric"].get("cluster") for s in result(G, expr)}
    if "a" in seen and "b" not in seen:
        if any(re.search(p, expr) for p, _ in NO_SUCCESS):
            only_a.add(item.get("title", item.get("name")))
        else:
            failures.append(f"{file} {item.get('title')!r} with All shows cluster a, not the failing b: {expr}")
print(f"with All, {len(only_a)} panels about successful probes show a alone (b has none)")

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
# While the series of b's daemon go stale, the negative control is read.
os.kill(int(daemon_b), 15)
t0 = time.monotonic()

# The negative control: the same two clusters, both daemons' configs carrying
# `[labels] cluster = "a"`. Federation and the scrape keep a series' own label over the
# external label, so b's series reach the global as cluster a. The daemons' instance and
# node labels differ, so nothing collides or is dropped here: the two clusters merge into
# one. a healthy "a" reads half down and is paged for, and b, selected, shows nothing.
wait("the control's global evaluating its rules", lambda: value(
    X, 'count(inferprobe:error_budget_remaining:ratio)') is not None, 30)
x_dropped = drop_counters(X)
x_series = {(s["metric"].get("cluster"), s["metric"].get("node")): int(s["value"][1])
            for s in result(X, "count by (cluster, node) (inferprobe_requests_total)")}
x_error = value(X, 'round(inferprobe:sli_errors:ratio_rate1h{cluster="a"}, 0.001)')
x_budget = value(X, 'round(inferprobe:error_budget_remaining:ratio{cluster="a"}, 0.01)')
x_b = sum(bool(shown(result(X, expr))) for file, variables, item, t, expr
          in dashboard_queries({}, dict(ALL, cluster="b")) if t is not None
          and any(re.search(p, t["expr"].strip()) for p, *_ in OUTAGE))
deadline = time.monotonic() + 20  # the rules' `for:` is 10 s; the control ran as long as the proof
while True:
    x_alerts = clusters('ALERTS{alertname="InferprobeErrorBudgetBurnFast", alertstate="firing"}', X)
    if x_alerts == {"a"} or time.monotonic() > deadline:
        break
    time.sleep(1)
print(f"negative control ([labels] cluster = \"a\" in both daemons' configs): "
      f"{counters_text(x_dropped)}; inferprobe_requests_total series by cluster/node: "
      f"{', '.join(f'{c}/{n} {k}' for (c, n), k in sorted(x_series.items()))}; "
      f"cluster a's error SLI (1h) {x_error}, budget left {x_budget}; "
      f"availability panels with data for cluster b: {x_b}; "
      f"InferprobeErrorBudgetBurnFast fires for {sorted(map(str, x_alerts))}")
merged = x_series == {("a", "node-a"): 1, ("a", "node-b"): 1}
hidden = x_b == 0 and x_alerts == {"a"} and x_error is not None and 0.2 < x_error < 0.8 and x_budget is not None and x_budget < 0
if not (merged and hidden):
    failures.append("the negative control does not show the defect (the two clusters merged into "
                    f"a, b's outage in a's numbers): merged {merged}, hidden {hidden}")
if any(x_dropped.values()):
    print("  (and the control's global dropped samples)")
took = time.monotonic() - t0
took += wait("InferprobeNoData firing in the global for cluster b", lambda: clusters(
    'ALERTS{alertname="InferprobeNoData", alertstate="firing"}') == {"b"}, 90 - took)
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
