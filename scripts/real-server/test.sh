#!/usr/bin/env bash
# The real-server suite: builds (or reuses) llama.cpp's llama-server and the tiny model,
# then runs the tests that probe it (tests/real_server*.rs, ignored by plain `cargo test`).
set -euo pipefail
cd "$(dirname "$0")/../.."
{ read -r LLAMA_SERVER; read -r TINY_GGUF; read -r TINY_MMPROJ; read -r TINY_OTHER; } < <(bash scripts/real-server/setup.sh)
export LLAMA_SERVER TINY_GGUF TINY_MMPROJ TINY_OTHER
# tests/real_server*.rs are modules of the one test binary (tests/suite.rs).
# The adapter test runs alone: its three llama-servers (two threads each) beside the canary
# test's three on a 2-core machine starved some replicas of CPU until their checks timed
# out (a CI run saw 8 checks on one replica in 120 s against 9 s alone).
cargo test --test suite real_server -- --ignored --nocapture --skip real_server_adapters
cargo test --test suite real_server_adapters -- --ignored --nocapture
