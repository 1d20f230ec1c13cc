#!/usr/bin/env bash
# The correctness canary against real vLLM servers (issue 19 on vLLM, beside the llama-server
# suite in CI). Not part of CI (a 6 GB venv; see setup.sh); run it and read its report.
#
#   bash scripts/real-vllm/canary-proof.sh [SECONDS] [MARGIN] [MODEL_A MODEL_B PROMPTS]
# The trained model (write it first, ~10 CPU minutes):
#   target/real-vllm/venv/bin/python scripts/real-vllm/train_tiny_hf.py target/real-vllm/tiny-llama-trained \
#     --base target/real-vllm/tiny-llama --minutes 10
#   CANARY_BACKEND=openai bash scripts/real-vllm/canary-proof.sh 120 1.0 target/real-vllm/tiny-llama-trained \
#     target/real-vllm/tiny-llama target/real-vllm/tiny-llama-trained/canary-prompts.jsonl
#
# Two vLLM servers: `a` with the tiny Llama, `b` with the same architecture and other random
# weights (a replica loaded with the wrong weights). A golden file is recorded from `a` with
# `inferprobe canary record`; then inferprobe checks, every second, `a` twice (one of them
# while a latency target keeps 8+ requests in flight on `a`, so canary requests are batched
# with others) and `b`, all against that golden file, for SECONDS (default 120). A random
# model is never sure (its margins are printed), so MARGIN defaults to 0.05 nats, as in the
# llama-server suite. Passes when `a` never diverges and `b` diverges on most checks.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-120}
MARGIN=${2:-0.05}
source scripts/real-vllm/lib.sh
MODEL_A=${3:-$MODEL}
MODEL_B=${4:-$OTHER_MODEL}
PROMPTS=${5:-}
BACKEND=${CANARY_BACKEND:-openai-chat}   # or openai (completions: no chat template)
A_PORT=$(free_port); B_PORT=$(free_port); PROBE_PORT=$(free_port)
start_vllm a "$A_PORT" "$MODEL_A"
start_vllm b "$B_PORT" "$MODEL_B"

# Words the tiny tokenizer knows: the built-in prompts (prime numbers, French capitals) get
# answers of bytes only from a random model, no text at all, which `record` refuses.
for p in "the quick brown fox" "where people make bread" "probe token stream latency" \
  "what is the capital of france" "you are a helpful assistant" "answer each question with care" \
  "the old town near the river" "keep your reply short and clear" "people work on farms every day" \
  "the lazy dog runs back home"; do
  printf '{"prompt": "%s"}\n' "$p"
done > "$WORK/prompts.jsonl"
[ -z "$PROMPTS" ] || cp "$PROMPTS" "$WORK/prompts.jsonl"
target/debug/inferprobe canary record --backend "$BACKEND" --url "http://127.0.0.1:$A_PORT" \
  --model tiny --prompts "$WORK/prompts.jsonl" --max-tokens 16 --top-logprobs 5 --out "$WORK/golden.json"
CANARY="canary = { interval = \"1s\", margin = $MARGIN, golden = \"$WORK/golden.json\" }"
cat > "$WORK/inferprobe.toml" <<TOML
listen = "127.0.0.1:$PROBE_PORT"

[defaults]
backend = "$BACKEND"
model = "tiny"
rate = 0.01

[[targets]]
name = "a"
url = "http://127.0.0.1:$A_PORT"
$CANARY

[[targets]]
name = "a-batched"
url = "http://127.0.0.1:$A_PORT"
$CANARY

[[targets]]
name = "b-other-weights"
url = "http://127.0.0.1:$B_PORT"
$CANARY

# No canary: the load that batches a-batched's checks with other requests on the same server.
[[targets]]
name = "load"
url = "http://127.0.0.1:$A_PORT"
rate = 12
max_concurrency = 16
output_tokens = 96
TOML
target/debug/inferprobe check --config "$WORK/inferprobe.toml"
echo "checking for ${SECONDS_TO_RUN}s (log: $WORK/inferprobe.log)"
target/debug/inferprobe run --config "$WORK/inferprobe.toml" > "$WORK/inferprobe.log" 2>&1 &
PROBE_PID=$!
pids+=("$PROBE_PID")
sleep "$SECONDS_TO_RUN"
curl -sf "http://127.0.0.1:$PROBE_PORT/metrics" > "$WORK/metrics.txt"
curl -sf "http://127.0.0.1:$A_PORT/metrics" > "$WORK/vllm-a-metrics.txt"
kill -TERM "$PROBE_PID"; wait "$PROBE_PID" || true
"$PY" - "$WORK" "$MARGIN" <<'PY'
import json, re, statistics, sys
work, margin = sys.argv[1], float(sys.argv[2])
golden = json.load(open(f"{work}/golden.json"))
margins = []
for answer in golden["answers"]:
    for p in answer.get("positions", []):
        top = sorted((lp for _, lp in p.get("top", [])), reverse=True)
        if len(top) >= 2:
            margins.append(top[0] - top[1])
margins.sort()
q = lambda f: margins[min(len(margins) - 1, int(f * len(margins)))]
print(f"golden: {len(golden['answers'])} prompts from {golden.get('server')}; reference margins "
      f"p10 {q(0.1):.3f}, p50 {q(0.5):.3f}, p90 {q(0.9):.3f} nats over {len(margins)} positions; "
      f"at least the margin ({margin}) at {sum(m >= margin for m in margins) / len(margins):.0%} of them")
text = open(f"{work}/metrics.txt").read()
checks = {}
for target, result, value in re.findall(
        r'^inferprobe_canary_checks_total\{[^}]*target="([^"]+)"[^}]*result="([^"]+)"[^}]*\} (\S+)$', text, re.M):
    checks.setdefault(target, {})[result] = float(value)
for target, results in sorted(checks.items()):
    print(f"{target}: " + ", ".join(f"{r} {v:.0f}" for r, v in sorted(results.items())))
drift = re.findall(r'^inferprobe_canary_logprob_drift_(sum|count)\{[^}]*target="a-batched"[^}]*\} (\S+)$', text, re.M)
print("a-batched drift (sum, count): " + ", ".join(f"{k} {v}" for k, v in drift))
running = open(f"{work}/vllm-a-metrics.txt").read()
batch = re.findall(r'^vllm:num_requests_running\{[^}]*\} (\S+)$', running, re.M)
print(f"vLLM a requests running at the scrape: {batch}")
log = open(f"{work}/inferprobe.log").read()
sample = [l for l in log.splitlines() if "diverged" in l][:1]
if sample:
    print("a divergence as logged: " + sample[0][:400])
a = checks.get("a", {}); ab = checks.get("a-batched", {}); b = checks.get("b-other-weights", {})
scored = lambda r: r.get("match", 0) + r.get("diverged", 0)
ok = (a.get("diverged", 0) == 0 and ab.get("diverged", 0) == 0 and scored(a) >= 10 and scored(ab) >= 10
      and b.get("diverged", 0) >= 0.5 * scored(b) and scored(b) >= 10)
print("PASS" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
echo "files: $WORK"
