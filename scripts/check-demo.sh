#!/usr/bin/env bash
# Acceptance check of `inferprobe demo`: within 30 s its /metrics must show observations in
# all four latency histograms and at least one non-zero error category, its pool behind the
# prefix-routing gateway must hit its prefix-cache checks (and never miss) while the one
# behind the round-robin gateway misses, and promtool must find nothing to report in the
# exposition.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet
port=${DEMO_PORT:-19464}
log=$(mktemp)
target/debug/inferprobe demo --listen "127.0.0.1:$port" >"$log" 2>&1 &
demo=$!
trap 'kill "$demo" 2>/dev/null || true; wait "$demo" 2>/dev/null || true; rm -f "$log" "$log.metrics"' EXIT

count() { # sum of a metric's samples in the exposition
  awk -v m="$1" '$1 ~ "^"m"({|$)" { s += $NF } END { print s + 0 }' "$log.metrics"
}
start=$(date +%s)
while :; do
  sleep 1
  elapsed=$(( $(date +%s) - start ))
  if curl -sf "http://127.0.0.1:$port/metrics" -o "$log.metrics"; then
    ok=1
    for h in time_to_first_token time_per_output_token inter_token_latency e2e_request_latency; do
      [ "$(count "inferprobe_${h}_seconds_count")" != 0 ] || ok=0
    done
    errors=$(count inferprobe_request_errors_total)
    [ "$errors" != 0 ] || ok=0
    if [ "$ok" = 1 ]; then
      categories=$(awk '/^inferprobe_request_errors_total/ && $NF > 0 { match($0, /category="[a-z_0-9]+"/); print substr($0, RSTART + 10, RLENGTH - 11) }' "$log.metrics" | sort -u | tr '\n' ' ')
      echo "after ${elapsed}s: all four latency histograms populated; $errors errors in: $categories"
      break
    fi
  fi
  if [ "$elapsed" -ge 30 ]; then
    echo "FAIL: demo did not show all histograms and an error within 30 s" >&2
    cat "$log" >&2
    exit 1
  fi
done
report=$(promtool check metrics <"$log.metrics" 2>&1) || { echo "$report" >&2; exit 1; }
if [ -n "$report" ]; then echo "promtool: $report" >&2; exit 1; fi
echo "promtool check metrics: clean"

# The two pools' prefix-cache checks (a pair every 5 s each), within the same 30 s.
checks() { # checks TARGET RESULT
  awk -v t="target=\"$1\"" -v r="result=\"$2\"" \
    '/^inferprobe_prefix_cache_checks_total/ && index($0, t) && index($0, r) { s += $NF } END { print s + 0 }' "$log.metrics"
}
while :; do
  curl -sf "http://127.0.0.1:$port/metrics" -o "$log.metrics" || true
  affinity_hits=$(checks sim-pool-prefix-affinity hit)
  affinity_misses=$(checks sim-pool-prefix-affinity miss)
  rr_misses=$(checks sim-pool-round-robin miss)
  if [ "$affinity_misses" != 0 ]; then
    echo "FAIL: the prefix-routing pool missed $affinity_misses prefix-cache checks" >&2
    exit 1
  fi
  if [ "$affinity_hits" != 0 ] && [ "$rr_misses" != 0 ]; then
    echo "prefix-cache checks: by prefix $affinity_hits hit, by turn $rr_misses missed"
    break
  fi
  if [ $(( $(date +%s) - start )) -ge 30 ]; then
    echo "FAIL: no prefix-cache hit by prefix ($affinity_hits) or miss by turn ($rr_misses) within 30 s" >&2
    exit 1
  fi
  sleep 1
done

# The sessions (one every 20 s on the chat target and each pool, about 10 s long): within a
# minute, turns answered on the chat target and later turns served from the cache through
# the prefix-routing pool.
sessions() { # sessions METRIC TARGET RESULT
  awk -v m="^$1" -v t="target=\"$2\"" -v r="result=\"$3\"" \
    '$0 ~ m && index($0, t) && index($0, r) { s += $NF } END { print s + 0 }' "$log.metrics"
}
while :; do
  curl -sf "http://127.0.0.1:$port/metrics" -o "$log.metrics" || true
  chat_ok=$(sessions inferprobe_session_turns_total sim-chat ok)
  pool_hits=$(sessions inferprobe_session_turn_cache_total sim-pool-prefix-affinity hit)
  if [ "$chat_ok" != 0 ] && [ "$pool_hits" != 0 ]; then
    echo "sessions: $chat_ok turns ok on the chat target, $pool_hits later turns cached through the prefix pool"
    break
  fi
  if [ $(( $(date +%s) - start )) -ge 90 ]; then
    echo "FAIL: no session turn ok ($chat_ok) or cached through the pool ($pool_hits) within 90 s" >&2
    exit 1
  fi
  sleep 1
done
