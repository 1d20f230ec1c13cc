#!/usr/bin/env bash
# A model rollout on real vLLM servers (issue 25, beside the llama-server rollout case in
# CI). Not part of CI (a 6 GB venv; see setup.sh); run it and read its report.
#
#   bash scripts/real-vllm/rollout-proof.sh [SECONDS] [MARGIN] [MODEL_V1 MODEL_V2]
#
# Three vLLM servers in one file_sd pool labelled by version: `r0` serves MODEL_V1 as v1,
# `r1` and `r2` serve MODEL_V2 (the same architecture, other weights) as v2. inferprobe runs
# the canary with `group_by = ["version"]` and `baseline = "v1"` every second for SECONDS
# (default 120). Passes when no check diverges (each version is judged by its own
# replicas: a rollout pages nowhere) and the v2 replicas' comparisons with the baseline
# (inferprobe_canary_baseline_checks_total, the rollout gate) diverge on most checks.
#
# Then the shipped rollout templates (config/rollouts/), as Argo Rollouts and Flagger
# evaluate them (issue 31): a fourth server `r3` serves MODEL_V1 again (an upgrade with the
# same weights), and tests/rollouts.rs's `the_gates_on_servers_named_by_the_environment`
# runs the proof of tests/common/rollout.rs on r0 (stable), r3 (same weights) and r1 (other
# weights) with a real Prometheus (Debian's, installed if missing): the same weights pass
# Argo and Flagger, other weights fail both. Its report is printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-120}
MARGIN=${2:-0.05}
source scripts/real-vllm/lib.sh
MODEL_V1=${3:-$MODEL}
MODEL_V2=${4:-$OTHER_MODEL}
P0=$(free_port); P1=$(free_port); P2=$(free_port); PROBE_PORT=$(free_port)
start_vllm r0 "$P0" "$MODEL_V1"
start_vllm r1 "$P1" "$MODEL_V2"
start_vllm r2 "$P2" "$MODEL_V2"
for p in "the quick brown fox" "where people make bread" "probe token stream latency" \
  "what is the capital of france" "you are a helpful assistant" "the lazy dog runs back home"; do
  printf '{"prompt": "%s"}\n' "$p"
done > "$WORK/prompts.jsonl"
cat > "$WORK/pool.json" <<JSON
[{"targets": ["127.0.0.1:$P0"], "labels": {"pod": "r0", "version": "v1"}},
 {"targets": ["127.0.0.1:$P1"], "labels": {"pod": "r1", "version": "v2"}},
 {"targets": ["127.0.0.1:$P2"], "labels": {"pod": "r2", "version": "v2"}}]
JSON
cat > "$WORK/inferprobe.toml" <<TOML
listen = "127.0.0.1:$PROBE_PORT"

[[discovery]]
name = "pool"
source = "file"
path = "$WORK/pool.json"

[discovery.template]
backend = "openai-chat"
model = "tiny"
rate = 0.01
canary = { interval = "1s", max_tokens = 16, margin = $MARGIN, prompts = "$WORK/prompts.jsonl", group_by = ["version"], baseline = "v1" }
TOML
target/debug/inferprobe check --config "$WORK/inferprobe.toml"
echo "checking for ${SECONDS_TO_RUN}s (log: $WORK/inferprobe.log)"
target/debug/inferprobe run --config "$WORK/inferprobe.toml" > "$WORK/inferprobe.log" 2>&1 &
PROBE_PID=$!
pids+=("$PROBE_PID")
sleep "$SECONDS_TO_RUN"
curl -sf "http://127.0.0.1:$PROBE_PORT/metrics" > "$WORK/metrics.txt"
kill -TERM "$PROBE_PID"; wait "$PROBE_PID" || true
"$PY" - "$WORK" <<'PY'
import re, sys
text = open(f"{sys.argv[1]}/metrics.txt").read()
def table(name):
    out = {}
    for labels, value in re.findall(rf'^{name}\{{([^}}]*)\}} (\S+)$', text, re.M):
        l = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        out.setdefault(l["pod"], {})[l["result"]] = float(value)
    return out
checks, gate = table("inferprobe_canary_checks_total"), table("inferprobe_canary_baseline_checks_total")
for pod in sorted(checks):
    print(f"{pod}: checks " + ", ".join(f"{r} {v:.0f}" for r, v in sorted(checks[pod].items()))
          + "; against v1 " + ", ".join(f"{r} {v:.0f}" for r, v in sorted(gate.get(pod, {}).items())))
diverged = sum(r.get("diverged", 0) for r in checks.values())
g = [gate.get(p, {}) for p in ("r1", "r2")]
gd = sum(r.get("diverged", 0) for r in g); gs = gd + sum(r.get("match", 0) for r in g)
ok = diverged == 0 and gs >= 20 and gd >= 0.5 * gs and not gate.get("r0")
print("PASS" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY

# --- the rollout templates, evaluated as their controllers evaluate them ---------------
command -v /usr/bin/prometheus >/dev/null || {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus >/dev/null
}
P3=$(free_port)
start_vllm r3 "$P3" "$MODEL_V1"
INFERPROBE_GATE_STABLE="127.0.0.1:$P0" INFERPROBE_GATE_ALIKE="127.0.0.1:$P3" \
  INFERPROBE_GATE_OTHER="127.0.0.1:$P1" INFERPROBE_GATE_MODEL=tiny INFERPROBE_GATE_MARGIN="$MARGIN" \
  INFERPROBE_GATE_PROMPTS="$WORK/prompts.jsonl" \
  INFERPROBE_REQUIRE_PROMTOOL=1 \
  cargo test -q --test suite rollouts::the_gates_on_servers_named_by_the_environment -- --ignored --nocapture \
  2>&1 | tee "$WORK/gate.txt" | grep -E "^(same|other) weights|^  |test result"
echo "files: $WORK"
