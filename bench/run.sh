#!/usr/bin/env bash
# One command for the fidelity and cost benchmark (issue 6): builds the release binary and
# the criterion micro-benchmarks, then runs bench/run.py, which writes bench/RESULTS.md.
#
#   bash bench/run.sh            # the full run, ≈ 15 min on 2 cores; run it on an idle machine
#   bash bench/run.sh --quick    # a smoke test of the harness (target/bench-quick/RESULTS.md)
#
# Needs python3 (standard library only). Everything listens on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
if [[ " $* " == *" --quick "* ]]; then
  python3 bench/run.py --skip-micro "$@"
else
  cargo bench --locked --bench event_path
  python3 bench/run.py "$@"
fi
