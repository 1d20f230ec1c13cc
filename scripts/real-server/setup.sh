#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` from the llama.cpp source vendored in the PyPI sdist of
# llama-cpp-python (pinned; cmake and ninja from PyPI; no git, no model hub) and writes a
# tiny random-weight GGUF model and a tiny vision projector for it (`--mmproj`) with PyPI `gguf`.
# Everything is cached under target/real-server/, so only the first run pays the ~8 minute
# build on 2 cores. Prints the paths of the server binary, the model, the mmproj and the
# other-weights model, one per line.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$(pwd)/target/real-server
VER=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
mkdir -p "$OUT"
log() { echo "real-server: $*" >&2; }

if [ ! -x "$OUT/venv/bin/python" ]; then
  python3 -m venv "$OUT/venv"
fi
if ! "$OUT/venv/bin/python" -c 'import gguf, cmake, ninja' 2>/dev/null; then
  log "installing gguf, cmake and ninja into $OUT/venv"
  "$OUT/venv/bin/pip" install -q "gguf==0.17.1" cmake ninja >&2
fi

if [ ! -x "$OUT/bin/llama-server" ]; then
  log "building llama-server from llama-cpp-python $VER (a few minutes the first time)"
  rm -rf "$OUT/sdist" "$OUT/build"
  "$OUT/venv/bin/pip" download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$VER" -d "$OUT/sdist" >&2
  tar xzf "$OUT/sdist/llama_cpp_python-$VER.tar.gz" -C "$OUT/sdist"
  SRC="$OUT/sdist/llama_cpp_python-$VER/vendor/llama.cpp"
  export PATH="$OUT/venv/bin:$PATH"
  cmake -S "$SRC" -B "$OUT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DGGML_NATIVE=OFF >&2
  cmake --build "$OUT/build" --target llama-server -j "$(nproc)" >&2
  mkdir -p "$OUT/bin"
  cp "$OUT/build/bin/llama-server" "$OUT/bin/"
fi

if [ ! -f "$OUT/tiny.gguf" ]; then
  log "writing the tiny random-weight model"
  "$OUT/venv/bin/python" scripts/real-server/make_tiny_gguf.py "$OUT/tiny.gguf" >&2
fi
if [ ! -f "$OUT/tiny-other.gguf" ]; then
  log "writing the same tiny model with other random weights (the canary's wrong replica)"
  "$OUT/venv/bin/python" scripts/real-server/make_tiny_gguf.py "$OUT/tiny-other.gguf" --seed 1 >&2
fi
if [ ! -f "$OUT/tiny-mmproj.gguf" ]; then
  log "writing the tiny random-weight vision projector"
  "$OUT/venv/bin/python" scripts/real-server/make_tiny_mmproj.py "$OUT/tiny-mmproj.gguf" >&2
fi
if [ ! -f "$OUT/noop/tiny-lora-b.gguf" ]; then
  log "writing two random LoRA adapters of the tiny model, and one that changes nothing (the adapter check's)"
  "$OUT/venv/bin/python" scripts/real-server/make_tiny_lora.py "$OUT/tiny.gguf" "$OUT/tiny-lora-a.gguf" --seed 1 --rank 4 >&2
  "$OUT/venv/bin/python" scripts/real-server/make_tiny_lora.py "$OUT/tiny.gguf" "$OUT/tiny-lora-b.gguf" --seed 2 --rank 8 >&2
  # Same file names in noop/: a replica started there lists its adapters at the same paths.
  mkdir -p "$OUT/noop"
  "$OUT/venv/bin/python" scripts/real-server/make_tiny_lora.py "$OUT/tiny.gguf" "$OUT/noop/tiny-lora-a.gguf" --seed 1 --rank 4 --no-effect >&2
  cp "$OUT/tiny-lora-b.gguf" "$OUT/noop/tiny-lora-b.gguf"
fi
echo "$OUT/bin/llama-server"
echo "$OUT/tiny.gguf"
echo "$OUT/tiny-mmproj.gguf"
echo "$OUT/tiny-other.gguf"
