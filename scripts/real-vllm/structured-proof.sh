#!/usr/bin/env bash
# Structured-output and tool-call checks against real vLLM (issue 26), beside the
# llama-server case in CI. Not part of CI (a 6 GB venv; see setup.sh); run it and read its
# report.
#
#   bash scripts/real-vllm/structured-proof.sh [SECONDS]
#
# Three vLLM servers with the tiny Llama, all with `--enable-auto-tool-choice
# --tool-call-parser hermes`: `auto` (vLLM picks the structured-output backend per
# request), `xgrammar` (the backend set explicitly) and `reasoning` (`--reasoning-parser
# granite`: the one parser whose markers are plain text, so the tiny tokenizer, which has no
# <think> tokens, can serve it). The context is 1024 tokens, room for the hermes tool prompt
# and the structured prompts' own budget (`structured_max_tokens`, 512 by default). inferprobe's canary sends each, every
# 2 s for SECONDS (default 120), a JSON-schema answer, a `json_object` answer, a named tool
# and a `required` tool call, greedy, and the report prints the checks by result, the
# invalid outputs by reason, and one quoted WARN line per reason.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-120}
source scripts/real-vllm/lib.sh
AUTO_PORT=$(free_port); XG_PORT=$(free_port); RS_PORT=$(free_port); PROBE_PORT=$(free_port)
TOOLS=(--enable-auto-tool-choice --tool-call-parser hermes --max-model-len 1024)
start_vllm auto "$AUTO_PORT" "$MODEL" "${TOOLS[@]}"
start_vllm xgrammar "$XG_PORT" "$MODEL" "${TOOLS[@]}" --structured-outputs-config '{"backend": "xgrammar"}'
start_vllm reasoning "$RS_PORT" "$MODEL" "${TOOLS[@]}" --reasoning-parser granite

WEATHER='{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}'
TIME='{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}'
cat > "$WORK/prompts.jsonl" <<JSONL
{"prompt": "what is the capital of france", "response_format": {"type": "json_schema", "json_schema": {"name": "capital", "schema": {"type": "object", "properties": {"country": {"type": "string"}, "capital": {"type": "string"}}, "required": ["country", "capital"]}}}}
{"prompt": "answer in json: the capital of france", "response_format": {"type": "json_object"}}
{"prompt": "what is the weather in paris", "tools": [$WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
{"prompt": "what time is it in tokyo", "tools": [$WEATHER, $TIME], "tool_choice": "required"}
JSONL
CANARY="canary = { interval = \"2s\", max_tokens = 48, prompts = \"$WORK/prompts.jsonl\" }"
cat > "$WORK/inferprobe.toml" <<TOML
listen = "127.0.0.1:$PROBE_PORT"

[defaults]
backend = "openai-chat"
model = "tiny"
rate = 0.01

[[targets]]
name = "auto"
url = "http://127.0.0.1:$AUTO_PORT"
$CANARY

[[targets]]
name = "xgrammar"
url = "http://127.0.0.1:$XG_PORT"
$CANARY

[[targets]]
name = "reasoning"
url = "http://127.0.0.1:$RS_PORT"
$CANARY
TOML
target/debug/inferprobe check --config "$WORK/inferprobe.toml"
target/debug/inferprobe run --config "$WORK/inferprobe.toml" > "$WORK/inferprobe.log" 2>&1 &
pids+=("$!")
sleep "$SECONDS_TO_RUN"
curl -s "http://127.0.0.1:$PROBE_PORT/metrics" > "$WORK/metrics.txt"
echo "== checks by result"
grep -E '^inferprobe_canary_checks_total' "$WORK/metrics.txt" | grep -v ' 0$' | sed 's/{.*target="\([^"]*\)".*result="\([^"]*\)".*} / \1 \2 /'
echo "== invalid outputs by capability and reason"
grep -E '^inferprobe_canary_invalid_outputs_total' "$WORK/metrics.txt" | grep -v ' 0$' | sed 's/{.*target="\([^"]*\)".*capability="\([^"]*\)".*reason="\([^"]*\)".*} / \1 \2 \3 /'
echo "== one WARN line per target and reason"
grep "agent could not use" "$WORK/inferprobe.log" | python3 -c '
import sys, re
seen = set()
for line in sys.stdin:
    key = (re.search(r"target=(\S+)", line), re.search(r"reason=(\S+)", line))
    key = tuple(m.group(1) if m else "" for m in key)
    if key not in seen:
        seen.add(key)
        print(line.strip()[:700])
'
echo "work dir: $WORK"
