#!/usr/bin/env bash
# Issue 51's acceptance at real time (items 1 and 3): the shipped rollout gates
# (config/rollouts/) judged as Argo Rollouts and Flagger run them, on a real Prometheus
# scraping one daemon every 15 s, with simulator replicas whose 16-token answer takes ~3 s.
# Runs the ignored test in tests/gate_evidence.rs unscaled: 20 new versions diverging on
# ~17% of their comparisons and 20 with the stable weights (each in its own file_sd pool of
# two stable replicas), a good version whose port refuses for 3 s when the daemon first
# connects, and one whose every request fails. About three and a half minutes. Prints the
# report: per run, Argo's phase and when, Flagger's decision and when, the first conclusive
# answer per metric and the comparisons scored; then the figures of docs/canary.md's
# verdict-time table.
#
#   bash scripts/gate-acceptance.sh [REPORT_FILE]
#
# CI runs the same at 5 to 1 (`cargo test`): twenty_corrupting_versions_never_pass_and_…
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/need-prometheus.sh
report=${1:-target/gate-acceptance.txt}
mkdir -p "$(dirname "$report")"
rm -f "$report"
status=0
INFERPROBE_REQUIRE_PROMTOOL=1 INFERPROBE_GATE_REPORT="$report" \
  cargo test --test suite -- --ignored --exact \
  gate_evidence::twenty_corrupting_versions_never_pass_and_twenty_alike_always_do_unscaled \
  || status=$?
if [ -s "$report" ]; then
  echo
  echo "==> $report"
  cat "$report"
else
  echo "no report: the test failed before its analysis (see above)" >&2
fi
exit "$status"
