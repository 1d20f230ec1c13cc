#!/usr/bin/env bash
# The real-server suite: builds (or reuses) llama.cpp's llama-server and the tiny model,
# then runs the tests that probe it (tests/real_server*.rs, ignored by plain `cargo test`).
set -euo pipefail
cd "$(dirname "$0")/../.."
{ read -r LLAMA_SERVER; read -r TINY_GGUF; read -r TINY_MMPROJ; read -r TINY_OTHER; } < <(bash scripts/real-server/setup.sh)
export LLAMA_SERVER TINY_GGUF TINY_MMPROJ TINY_OTHER
# tests/real_server*.rs are modules of the one test binary (tests/suite.rs).
cargo test --test suite real_server -- --ignored --nocapture
