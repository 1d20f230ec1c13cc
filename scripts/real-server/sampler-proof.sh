#!/usr/bin/env bash
# The sampler check's acceptance measurement on llama-server (issue 57; docs/sampling.md,
# "Measured"). Not part of CI (minutes of CPU; tests/real_server_sampler.rs is the bounded
# CI case); run it and read its report.
#
#   bash scripts/real-server/sampler-proof.sh [TOKENS] [SECONDS] [ALPHA]
#
# One llama-server with the tiny random-weight model (scripts/real-server/setup.sh), four
# slots, on 127.0.0.1. Four sampler targets on it (a target asks one round at a time: four
# keep every slot busy), two through completions and two through chat, asked for
# `post_sampling_probs` (`server = "llama.cpp"`), rotate through the full grid, temperature
# {0.5, 1, 1.5} x top_k {1, 5, 20} x top_p {0.5, 0.9, 1} x min_p {0, 0.1}: 54 settings, 256
# tokens a round, every 20 ms, until TOKENS (default 100,000) sampled tokens are judged or
# SECONDS (default 1200) pass (500,000 took under 4 minutes on 2 cores). ALPHA
# (default 0.01, not the daemon's 1e-4) makes the false-alarm rate measurable: about 1% of
# healthy windows fail. A random model's next token is never sure, so every truncation
# binds somewhere in the grid. Passes when no token is outside the support, no round failed
# and the miscalibrated share of windows is not clearly above ALPHA (sampler_watch.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
TOKENS=${1:-100000}
SECONDS_TO_RUN=${2:-1200}
ALPHA=${3:-0.01}
{ read -r LLAMA_SERVER; read -r TINY_GGUF; read -r _; read -r _; } < <(bash scripts/real-server/setup.sh)
# The release build (INFERPROBE_BIN: a binary already built from this tree instead).
BIN=${INFERPROBE_BIN:-}
if [ -z "$BIN" ]; then
  cargo build -q --release --bin inferprobe
  BIN=${CARGO_TARGET_DIR:-target}/release/inferprobe
fi
WORK=$(mktemp -d "/tmp/inferprobe-sampler-proof.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port); PROBE_PORT=$(free_port)

# 4 slots of 1024 tokens: a round's prompt (~60) and 256 tokens fit.
echo "starting llama-server on 127.0.0.1:$PORT (log: $WORK/llama.log)"
"$LLAMA_SERVER" -m "$TINY_GGUF" --host 127.0.0.1 --port "$PORT" -c 4096 -np 4 -t 2 \
  --alias tiny > "$WORK/llama.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.1; done
"$LLAMA_SERVER" --version 2>&1 | grep -i version || true

SETTINGS=$(python3 -c '
import itertools
print(", ".join(f"{{ temperature = {t}, top_k = {k}, top_p = {p}, min_p = {m} }}"
    for t, k, p, m in itertools.product([0.5, 1.0, 1.5], [1, 5, 20], [0.5, 0.9, 1.0], [0.0, 0.1])))')
{
  echo "listen = \"127.0.0.1:$PROBE_PORT\""
  echo
  # rate: one latency probe in ~17 minutes per target: the sampler's rounds are the load.
  echo '[defaults]'
  echo 'model = "tiny"'
  echo 'rate = 0.001'
  echo "sampler = { interval = \"20ms\", max_tokens = 256, server = \"llama.cpp\", alpha = $ALPHA, settings = [$SETTINGS] }"
  # Both of llama-server's logprob routes: completions (s0, s1) and chat (s2, s3).
  for i in 0 1 2 3; do
    backend=$([ "$i" -lt 2 ] && echo openai || echo openai-chat)
    printf '\n[[targets]]\nname = "s%s"\nurl = "http://127.0.0.1:%s"\nbackend = "%s"\n' "$i" "$PORT" "$backend"
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
