#!/usr/bin/env bash
# Issue 20, item 3: against a real vLLM, the server's `llm_request` span is a child of the
# probe's span. Not part of CI (a 6 GB venv; see setup.sh); run it and read its report.
#
#   bash scripts/real-vllm/trace-proof.sh [SECONDS] [grpc|http/protobuf] [vLLM flags...]
#   bash scripts/real-vllm/trace-proof.sh 60 grpc --stream-interval 4   # 4 tokens per event
#
# Starts an OTLP receiver (gRPC + HTTP, official protos), vLLM on the tiny model exporting
# its spans there (`--otlp-traces-endpoint`, gRPC, vLLM's default), and inferprobe probing it
# with `openai` and `openai-chat` targets and exporting its own spans to the same receiver
# over PROTOCOL (default grpc). Then pairs the spans by trace id and prints the report
# (scripts/real-vllm/analyze_traces.py); exits non-zero when any check fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-60}
PROTOCOL=${2:-grpc}
shift $(( $# < 2 ? $# : 2 ))
VLLM_FLAGS=("$@")
source scripts/real-vllm/lib.sh
VLLM_PORT=$(free_port); GRPC_PORT=$(free_port); HTTP_PORT=$(free_port); PROBE_PORT=$(free_port)

"$PY" scripts/real-vllm/otlp_receiver.py "$WORK/spans.jsonl" --grpc-port "$GRPC_PORT" --http-port "$HTTP_PORT" \
  > "$WORK/receiver.log" 2>&1 &
pids+=($!)
start_vllm vllm "$VLLM_PORT" "$MODEL" --otlp-traces-endpoint "127.0.0.1:$GRPC_PORT" "${VLLM_FLAGS[@]}"
VLLM_VERSION=$("$PY" -c 'import vllm; print(vllm.__version__)')
echo "vLLM $VLLM_VERSION up on 127.0.0.1:$VLLM_PORT"

if [ "$PROTOCOL" = grpc ]; then ENDPOINT="http://127.0.0.1:$GRPC_PORT"; else ENDPOINT="http://127.0.0.1:$HTTP_PORT"; fi
cat > "$WORK/inferprobe.toml" <<EOF
listen = "127.0.0.1:$PROBE_PORT"

[tracing]
otlp_endpoint = "$ENDPOINT"
protocol = "$PROTOCOL"

[[targets]]
name = "vllm-completions"
backend = "openai"
url = "http://127.0.0.1:$VLLM_PORT"
model = "tiny"
rate = 1.0
input_tokens = 64
output_tokens = 32
tokenizer = "$MODEL/tokenizer.json"

[[targets]]
name = "vllm-chat"
backend = "openai-chat"
url = "http://127.0.0.1:$VLLM_PORT"
model = "tiny"
rate = 1.0
input_tokens = 64
output_tokens = 32
tokenizer = "$MODEL/tokenizer.json"
EOF
echo "probing for ${SECONDS_TO_RUN}s, spans over $PROTOCOL (log: $WORK/inferprobe.log)"
target/debug/inferprobe run --config "$WORK/inferprobe.toml" > "$WORK/inferprobe.log" 2>&1 &
PROBE_PID=$!
pids+=($PROBE_PID)
sleep "$SECONDS_TO_RUN"
curl -sf "http://127.0.0.1:$PROBE_PORT/metrics" > "$WORK/inferprobe-metrics.txt"
kill -TERM "$PROBE_PID"; wait "$PROBE_PID" || true
# vLLM's BatchSpanProcessor exports every 5 s: give it two rounds before stopping it.
sleep 12
curl -sf "http://127.0.0.1:$VLLM_PORT/metrics" > "$WORK/vllm-metrics.txt" || true
"$PY" scripts/real-vllm/analyze_traces.py "$WORK/spans.jsonl" --inferprobe-metrics "$WORK/inferprobe-metrics.txt" \
  --vllm-metrics "$WORK/vllm-metrics.txt" --vllm-version "$VLLM_VERSION" --protocol "$PROTOCOL" \
  --vllm-flags "${VLLM_FLAGS[*]}"
echo "files: $WORK"
