#!/usr/bin/env bash
# Measures the daemon's memory and CPU in a DaemonSet-like steady state, the figures behind
# the resource requests and limits in config/kubernetes/daemonset.yaml.
#
#   bash scripts/measure-footprint.sh [SECONDS]     # default 180
#   RATE_SCALE=10 bash scripts/measure-footprint.sh 60   # every rate × 10: a load test
#   VISION=1024x1024 VISION_RATE=2 bash scripts/measure-footprint.sh 600   # + an image target
#
# The release binary probes its own simulator (both on 127.0.0.1 only) with 10 targets
# (vLLM chat and completions, TGI, Anthropic, Responses; 0.2 to 1 probe/s each, 5.4/s in
# all; 64 to 256 output tokens at 15 ms per token; 2% faults), while /metrics is scraped
# every 15 s and the status page every 30 s. Every 5 s it reads VmRSS and VmHWM from
# /proc/PID/status and utime+stime from /proc/PID/stat. The first 30 s (warm-up) are left
# out of the steady-state figures. Only the daemon is measured, not the simulator.
# VISION=WxH adds an eleventh target that sends a new generated WxH JPEG of random pixels
# (the largest upload) with each of its VISION_RATE (default 2) probes per second.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-180}
scale=${RATE_SCALE:-1}
vision=${VISION:-}
vision_rate=${VISION_RATE:-2}
warmup=30
bin=target/release/inferprobe
if [ ! -x "$bin" ]; then
  cargo build --release --quiet
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sim_port=$(free_port)
port=$(free_port)
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

sim="http://127.0.0.1:$sim_port"
r() { awk -v a="$1" -v s="$scale" 'BEGIN { print a * s }'; }
cat >"$work/config.toml" <<EOF
listen = "127.0.0.1:$port"
labels_from_env = { node = "NODE_NAME", pod = "POD_NAME" }
[labels]
cluster = "measure"
[defaults]
url = "$sim"
model = "meta-llama/Llama-3.1-8B-Instruct"
input_tokens = 128
output_tokens = 64
slo = { ttft = "500ms", tpot = "50ms" }
[[targets]]
name = "chat-1"
backend = "openai-chat"
rate = $(r 1.0)
continuous_usage_stats = true
[[targets]]
name = "chat-2"
backend = "openai-chat"
rate = $(r 0.5)
output_tokens = 256
[[targets]]
name = "chat-3"
backend = "openai-chat"
rate = $(r 0.5)
connection = "fresh"
[[targets]]
name = "chat-4"
backend = "openai-chat"
rate = $(r 0.2)
[[targets]]
name = "completions-1"
backend = "openai"
rate = $(r 1.0)
[[targets]]
name = "completions-2"
backend = "openai"
rate = $(r 0.5)
range_ratio = 0.5
[[targets]]
name = "completions-3"
backend = "openai"
rate = $(r 0.2)
[[targets]]
name = "tgi"
backend = "tgi"
rate = $(r 0.5)
[[targets]]
name = "anthropic"
backend = "anthropic"
rate = $(r 0.5)
ignore_eos = false
[[targets]]
name = "responses"
backend = "openai-responses"
rate = $(r 0.5)
ignore_eos = false
EOF

if [ -n "$vision" ]; then
  cat >>"$work/config.toml" <<EOF
[[targets]]
name = "vision"
backend = "openai-chat"
rate = $vision_rate
images = { width = ${vision%x*}, height = ${vision#*x} }
EOF
fi

"$bin" simulate --listen "127.0.0.1:$sim_port" --ttft 150ms --itl 15ms --jitter 0.2 \
  --fault reset=0.01 --fault http_500=0.01 >"$work/sim.log" 2>&1 &
pids+=($!)
NODE_NAME=node-a POD_NAME=inferprobe-abcde "$bin" run --config "$work/config.toml" \
  >"$work/daemon.log" 2>&1 &
daemon=$!
pids+=("$daemon")

for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$work/daemon.log" >&2; exit 1; }

hz=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$daemon/stat"; }
kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$daemon/status"; }

echo "t_s rss_kib hwm_kib cpu_ticks" >"$work/samples"
start=$(date +%s)
while :; do
  now=$(date +%s)
  t=$((now - start))
  [ "$t" -le "$duration" ] || break
  echo "$t $(kib VmRSS) $(kib VmHWM) $(ticks)" >>"$work/samples"
  if [ $((t % 15)) -lt 5 ]; then
    curl -sf -H 'Accept: application/openmetrics-text;version=1.0.0' \
      "http://127.0.0.1:$port/metrics" -o "$work/metrics" || true
  fi
  if [ $((t % 30)) -lt 5 ]; then
    curl -sf "http://127.0.0.1:$port/" -o /dev/null || true
  fi
  sleep 5
done
curl -sf "http://127.0.0.1:$port/metrics" -o "$work/metrics"

requests=$(awk '/^inferprobe_requests_total/ { s += $NF } END { print s + 0 }' "$work/metrics")
errors=$(awk '/^inferprobe_request_errors_total/ { s += $NF } END { print s + 0 }' "$work/metrics")
series=$(grep -vc '^#' "$work/metrics")
python3 - "$work/samples" "$hz" "$warmup" "$requests" "$errors" "$series" "$scale" "${vision:-none}" <<'PY'
import statistics, sys
path, hz, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
requests, errors, series, scale, vision = sys.argv[4:9]
rows = [tuple(map(int, l.split())) for l in open(path).read().splitlines()[1:]]
steady = [r for r in rows if r[0] >= warmup]
rss = [r[1] / 1024 for r in steady]
hwm = max(r[2] for r in rows) / 1024
span = steady[-1][0] - steady[0][0]
avg_m = (steady[-1][3] - steady[0][3]) / hz / span * 1000
windows = [
    (b[3] - a[3]) / hz / (b[0] - a[0]) * 1000
    for a, b in zip(steady, steady[1:]) if b[0] > a[0]
]
print(f"rate scale {scale}; images {vision}; duration {rows[-1][0]} s ({span} s after a {warmup} s warm-up), "
      f"{requests} probes ({errors} failed), {series} samples on /metrics")
print(f"RSS steady: median {statistics.median(rss):.1f} MiB, max {max(rss):.1f} MiB; "
      f"VmHWM (peak) {hwm:.1f} MiB")
print(f"CPU steady: mean {avg_m:.1f} millicores; busiest 5 s window {max(windows):.1f} millicores")
PY
