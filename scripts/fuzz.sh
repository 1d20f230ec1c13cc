#!/usr/bin/env bash
# Coverage-guided fuzzing (issue 7) of everything a server or a user can feed inferprobe:
# the SSE decoder, every backend's parser with the measurement and validation behind it,
# and the config loader. The drivers are tests/fuzz_drivers/ (also run as property tests
# by `cargo test`); the cargo-fuzz targets are fuzz/fuzz_targets/. Each target runs for
# SECONDS from the seeds fuzz/seed.sh builds out of tests/fixtures/, fuzz/seeds/ and
# config/. A panic, a failed property, a leak, a slow input or unbounded allocation fails
# the run, naming the saved input and the command that replays it.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET (default 45)] [TARGET...]
#
# Toolchain: `cargo +nightly fuzz` when a nightly toolchain is installed; otherwise the one
# stable toolchain with RUSTC_BOOTSTRAP=1, which lets it take cargo-fuzz's -Z flags
# (AddressSanitizer works there too). FUZZ_TOOLCHAIN=stable forces the stable path;
# FUZZ_SANITIZER=none builds without ASan. FUZZ_TARGET_DIR (default fuzz/target) may name a
# directory that outlives the checkout: the cold build is most of the time on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

seconds=${1:-45}
if [ $# -gt 0 ]; then shift; fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(sse_decoder backends config)

cargo_fuzz_version=0.13.1
if ! cargo fuzz --version 2>/dev/null | grep -qF "$cargo_fuzz_version"; then
  cargo install --locked "cargo-fuzz@$cargo_fuzz_version"
fi

replay_env="CARGO_PROFILE_RELEASE_OPT_LEVEL=${FUZZ_OPT_LEVEL:-1} "
if [ "${FUZZ_TOOLCHAIN:-}" != stable ] && rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
  toolchain=$(rustc +nightly --version)
else
  # The default toolchain (on CI the machine's only one), or stable when forced.
  if [ "${FUZZ_TOOLCHAIN:-}" = stable ]; then
    export RUSTUP_TOOLCHAIN=stable
    replay_env+="RUSTUP_TOOLCHAIN=stable "
  fi
  export RUSTC_BOOTSTRAP=1
  replay_env+="RUSTC_BOOTSTRAP=1 "
  fuzz=(cargo fuzz)
  toolchain="$(rustc --version) with RUSTC_BOOTSTRAP=1"
fi
sanitizer=${FUZZ_SANITIZER:-address}
target_dir=${FUZZ_TARGET_DIR:-$repo/fuzz/target}
# A bounded run is mostly the cold build (the whole daemon with ASan and coverage
# instrumentation), so build for speed: 16 codegen units instead of cargo-fuzz's 1, and
# opt-level 1 (measured on 2 cores: ~4 instead of ~5.5 minutes, ~6000 instead of ~8800
# backend inputs per second). FUZZ_OPT_LEVEL=3 for long runs.
export CARGO_PROFILE_RELEASE_OPT_LEVEL=${FUZZ_OPT_LEVEL:-1}
build=(--sanitizer "$sanitizer" --codegen-units 16 --target-dir "$target_dir")

# Limits: inputs up to 64 KiB (the drivers' event limits go down to 16 bytes, so every
# size path is reachable); one allocation over 384 MiB, or live heap over the fuzz crate's
# MAX_LIVE_BYTES (384 MiB, counted by its allocator, which also bounds each input's peak
# heap by a multiple of its length), is a crash; RSS counts ASan's quarantine and shadow
# memory, hence the higher ceiling with it.
rss_limit=512
[ "$sanitizer" = address ] && rss_limit=1024
flags=(-max_total_time="$seconds" -max_len=65536 -rss_limit_mb="$rss_limit"
  -malloc_limit_mb=384 -timeout=20 -print_final_stats=1)

echo "fuzz: $toolchain, sanitizer $sanitizer, ${seconds}s per target: ${targets[*]}"
bash fuzz/seed.sh
start=$SECONDS
(cd fuzz && "${fuzz[@]}" build "${build[@]}")
echo "fuzz: built in $((SECONDS - start))s"

# The targets run side by side (they are single-threaded; the machine has 2 cores), each
# for SECONDS of wall time.
declare -A before pids
for target in "${targets[@]}"; do
  mkdir -p "$repo/fuzz/artifacts/$target"
  before[$target]=$(ls "$repo/fuzz/artifacts/$target")
  (cd fuzz && "${fuzz[@]}" run "${build[@]}" "$target" -- \
    "${flags[@]}" -dict="$repo/fuzz/dicts/$target.dict") >"$target_dir/fuzz-$target.log" 2>&1 &
  pids[$target]=$!
done

failed=()
for target in "${targets[@]}"; do
  log=$target_dir/fuzz-$target.log
  artifacts=$repo/fuzz/artifacts/$target
  status=0
  wait "${pids[$target]}" || status=$?
  stat_of() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  corpus=$(find "fuzz/corpus/$target" -type f | wc -l)
  printf 'fuzz: %-12s exit %d, %s runs, %s exec/s, corpus %d files, peak RSS %s MB\n' \
    "$target" "$status" "$(stat_of number_of_executed_units)" \
    "$(stat_of average_exec_per_sec)" "$corpus" "$(stat_of peak_rss_mb)"
  new=$(comm -13 <(echo "${before[$target]}") <(ls "$artifacts"))
  if [ "$status" -ne 0 ] || [ -n "$new" ]; then
    failed+=("$target")
    echo "fuzz: $target FAILED; from its log ($log):"
    grep -E -A3 'panicked at|ERROR|==inferprobe-fuzz==|SUMMARY' "$log" | grep -v -E '^#[0-9]+' | head -40
    for file in $new; do
      echo "fuzz: input saved as $artifacts/$file"
      echo "      replay: (cd fuzz && $replay_env${fuzz[*]} run ${build[*]} $target $artifacts/$file)"
    done
  fi
done

echo "fuzz: done in $((SECONDS - start))s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
