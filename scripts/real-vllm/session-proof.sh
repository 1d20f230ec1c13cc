#!/usr/bin/env bash
# The session check (issue 50) against real vLLM servers. Not part of CI (a 6 GB venv; see
# setup.sh); run it and read its report.
#
#   bash scripts/real-vllm/session-proof.sh [SECONDS]
#
# Three vLLM servers with the tiny random-weight Llama, each with
# `--enable-auto-tool-choice --tool-call-parser hermes --enable-prompt-tokens-details`:
#   good:   a chat template that renders tool calls and results (templates/tools.jinja):
#           every session's history accepted, turn after turn, and later turns find the
#           previous turn's prompt cached; its depth turn pads to the window /v1/models
#           advertises (less 10%) and is accepted.
#   broken: a template that cannot render a tool call in the history (templates/broken.jinja
#           raises, as a Mistral-style template does on tool roles): the first turn is
#           accepted, the second refused with HTTP 400 -> `history_rejected`, while the
#           target's single-turn probes all succeed.
#   small:  the good template, a depth turn of 2,400 tokens (the window is 2,048) every
#           session -> `context_length`.
# A random-weight model quotes no tracking code, so `tool_result_ignored` is expected on
# every grounded turn (docs/sessions.md says why that never pages); `tool_choice =
# "required"` makes the server's grammar write the calls.
# The tiny model's forced calls carry junk arguments that run to the length limit
# (`truncated` on the first and parallel turns): the call still goes back, as `{}`, so the
# history is tested all the same. Sessions run every 20 s (1 s human gaps, 128 output
# tokens a turn: the tiny tokenizer spends about a token a character; block_tokens 128,
# vLLM's on CPU) for SECONDS
# (default 150). Passes when good has complete sessions and no history_rejected, every
# later turn of broken's sessions is history_rejected while its single-turn probes all
# succeed, small's depth turns are all context_length, and good's later turns hit the
# cache.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-150}
source scripts/real-vllm/lib.sh
GOOD_PORT=$(free_port); BROKEN_PORT=$(free_port); SMALL_PORT=$(free_port); PROBE_PORT=$(free_port)
T=scripts/real-vllm/templates
COMMON=(--enable-auto-tool-choice --tool-call-parser hermes --enable-prompt-tokens-details)
start_vllm good "$GOOD_PORT" "$MODEL" "${COMMON[@]}" --chat-template "$T/tools.jinja" --max-model-len 2048
start_vllm broken "$BROKEN_PORT" "$MODEL" "${COMMON[@]}" --chat-template "$T/broken.jinja" --max-model-len 2048
start_vllm small "$SMALL_PORT" "$MODEL" "${COMMON[@]}" --chat-template "$T/tools.jinja" --max-model-len 2048

SESSION='interval = "20s", human_gap = "1s", tool_gap = "500ms", tool_choice = "required", max_tokens = 128, block_tokens = 128'
cat > "$WORK/inferprobe.toml" <<TOML
listen = "127.0.0.1:$PROBE_PORT"

[defaults]
backend = "openai-chat"
model = "tiny"
rate = 0.5
input_tokens = 32
output_tokens = 8
tokenizer = "$MODEL/tokenizer.json"

[[targets]]
name = "good"
url = "http://127.0.0.1:$GOOD_PORT"
session = { $SESSION, depth_tokens = "served", depth_every = 2 }

[[targets]]
name = "broken"
url = "http://127.0.0.1:$BROKEN_PORT"
session = { $SESSION }

[[targets]]
name = "small"
url = "http://127.0.0.1:$SMALL_PORT"
session = { $SESSION, depth_tokens = 2400, depth_every = 1 }
TOML
probe_for "$SECONDS_TO_RUN"
M="$WORK/metrics.txt"
"$PY" - "$M" "$WORK/inferprobe.log" <<'PY'
import re, sys
from collections import defaultdict

metrics = open(sys.argv[1]).read()
def series(name):
    out = []
    for line in metrics.splitlines():
        if line.startswith(name + "{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
            out.append((labels, float(line.rsplit(" ", 1)[1])))
    return out

turns = defaultdict(float)
for l, v in series("inferprobe_session_turns_total"):
    turns[(l["target"], l["turn"], l["result"])] += v
print("== session turns by target, turn and result (non-zero)")
for (t, turn, result), v in sorted(turns.items()):
    if v:
        print(f"  {t:7} {turn:16} {result:22} {v:.0f}")
sessions = defaultdict(float)
for l, v in series("inferprobe_sessions_total"):
    sessions[(l["target"], l["result"])] += v
print("== sessions:", dict((f"{t}/{r}", int(v)) for (t, r), v in sorted(sessions.items())))
prompt = defaultdict(float); cached = defaultdict(float); count = defaultdict(float)
for l, v in series("inferprobe_session_prompt_tokens_total"):
    prompt[(l["target"], l["turn"])] += v
for l, v in series("inferprobe_session_cached_tokens_total"):
    cached[(l["target"], l["turn"])] += v
for (t, turn, result), v in turns.items():
    if result not in ("history_rejected", "context_length") and v:
        count[(t, turn)] += v
print("== good: mean prompt and cached tokens per turn (turn order)")
order = ["first", "tool_result", "follow_up", "parallel", "parallel_result", "depth"]
for turn in order:
    n = count[("good", turn)]
    if n:
        print(f"  {turn:16} prompt {prompt[('good', turn)] / n:7.0f}  cached {cached[('good', turn)] / n:7.0f}")
cache = defaultdict(float)
for l, v in series("inferprobe_session_turn_cache_total"):
    cache[(l["target"], l["result"])] += v
print("== later turns' cache verdicts:", dict((f"{t}/{r}", int(v)) for (t, r), v in sorted(cache.items()) if v))
for l, v in series("inferprobe_session_served_window_tokens"):
    print(f"== {l['target']}: served window {v:.0f}")
for l, v in series("inferprobe_session_depth_tokens"):
    print(f"== {l['target']}: depth turn padded to {v:.0f}")
probes = defaultdict(float); errors = defaultdict(float)
for l, v in series("inferprobe_requests_total"):
    probes[l["target"]] += v
for l, v in series("inferprobe_request_errors_total"):
    errors[l["target"]] += v
print("== single-turn probes (finished, failed):", {t: (int(probes[t]), int(errors[t])) for t in sorted(probes)})
print("== one refusal each, as the log says it")
seen = set()
for line in open(sys.argv[2]):
    m = re.search(r"target=(\S+).*result=\"?(history_rejected|context_length)", line)
    if m and m.groups() not in seen:
        seen.add(m.groups())
        print("  " + line.strip()[:600])

fails = []
good_hist = sum(v for (t, _, r), v in turns.items() if t == "good" and r == "history_rejected")
if sessions[("good", "complete")] < 1 or good_hist:
    fails.append(f"good: {sessions[('good', 'complete')]:.0f} complete sessions, {good_hist:.0f} history_rejected")
# Every turn broken's sessions sent after the first was refused, as history_rejected.
broken_later = sum(v for (t, turn, _), v in turns.items() if t == "broken" and turn != "first")
broken_rej = sum(v for (t, _, r), v in turns.items() if t == "broken" and r == "history_rejected")
if broken_later < 1 or broken_rej < broken_later:
    fails.append(f"broken: {broken_rej:.0f} of {broken_later:.0f} later turns history_rejected")
if probes["broken"] < 10 or errors["broken"]:
    fails.append(f"broken: {errors['broken']:.0f} of {probes['broken']:.0f} single-turn probes failed")
depth_small = turns[("small", "depth", "context_length")]
if depth_small < 1 or turns[("small", "depth", "ok")]:
    fails.append(f"small: {depth_small:.0f} depth turns refused, {turns[('small', 'depth', 'ok')]:.0f} accepted")
if cache[("good", "hit")] < 1 or cache[("good", "miss")] > cache[("good", "hit")] / 10:
    fails.append(f"good: {cache[('good', 'hit')]:.0f} hits, {cache[('good', 'miss')]:.0f} misses")
print("FAILED: " + "; ".join(fails) if fails else "PASSED")
sys.exit(1 if fails else 0)
PY
echo "work dir: $WORK"
