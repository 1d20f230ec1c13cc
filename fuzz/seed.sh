#!/usr/bin/env bash
# Builds the seed corpora fuzz/corpus/<target>/ and the dictionaries fuzz/dicts/<target>.dict
# from what the repository already has: the SSE transcripts captured from real servers
# (tests/fixtures/), the simulator's transcripts and hand-written error and edge-case
# shapes for the other backends (fuzz/seeds/), and the shipped configs (config/). Neither
# is committed: this script regenerates them (the fuzzer then adds what it finds).
#
# Input layout (tests/fuzz_drivers/mod.rs): one selector byte, then the body.
#   sse_decoder: selector & 3 = event size limit, selector >> 2 = how reads are split.
#   backends:    selector % 14 = backend, (selector / 14) % 2 = checked target,
#                selector / 28 = how reads are split.
#   config:      the file's text, no selector.
set -euo pipefail
fuzz=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$fuzz")
cd "$repo"

mkdir -p "$fuzz/corpus/sse_decoder" "$fuzz/corpus/backends" "$fuzz/corpus/config" "$fuzz/dicts"

# seed FILE TARGET SELECTOR: the selector byte, then the file.
seed() {
  local file=$1 target=$2 selector=$3
  local name
  name=$(basename "$(dirname "$file")")-$(basename "$file")
  {
    printf "\\$(printf '%03o' "$selector")"
    cat "$file"
  } >"$fuzz/corpus/$target/seed-$selector-$name"
}

# Streams: real captures that carry SSE, and the other dialects' transcripts.
streams=()
for f in tests/fixtures/*/*.sse fuzz/seeds/stream/*.sse; do
  head -c 64 "$f" | LC_ALL=C grep -qaE $'^(\xef\xbb\xbf)?(data|event|:)' && streams+=("$f")
done
# Whole bodies: the non-streamed captures and error bodies, and MII/embeddings shapes.
bodies=(fuzz/seeds/body/*.json)
for f in tests/fixtures/*/*.sse; do
  head -c 1 "$f" | grep -q '[{[]' && bodies+=("$f")
done

for f in "${streams[@]}"; do
  # default limit with 1-byte and 64-byte reads; 256-byte limit; 16-byte limit
  for selector in 3 19 21 12; do seed "$f" sse_decoder "$selector"; done
  # every SSE backend (kinds 0 1 2 3 6 7 8 11 12 13), plain with 64-byte reads and
  # checked with 4096-byte reads
  for kind in 0 1 2 3 6 7 8 11 12 13; do
    seed "$f" backends $((kind + 28 * 4))
    seed "$f" backends $((kind + 14 + 28 * 5))
  done
done
# Bedrock's AWS event stream (kinds 9 and 10): the simulator's frames, with 1-byte and
# 64-byte reads.
for f in fuzz/seeds/eventstream/*.bin; do
  for kind in 9 10; do
    seed "$f" backends "$kind"
    seed "$f" backends $((kind + 14 + 28 * 4))
  done
done
for f in "${bodies[@]}"; do
  for kind in 4 5; do
    seed "$f" backends "$kind"
    seed "$f" backends $((kind + 14))
  done
done

# Configs: the shipped ones and fuzz/seeds/config, with real paths and a variable that
# is always set (HOME) so that a seed validates through to the end (tests/fuzz_props.rs
# rewrites them the same way).
for f in config/*.toml config/kubernetes/*.toml fuzz/seeds/config/*.toml; do
  # Environment variable names are the only all-capitals strings in these files.
  sed -E -e "s|@REPO@|$repo|g" -e 's/"(@ENV@|[A-Z][A-Z0-9_]*)"/"HOME"/g' "$f" >"$fuzz/corpus/config/seed-$(basename "$(dirname "$f")")-$(basename "$f")"
done

# Dictionaries: the words each parser compares against, taken from the source so they
# follow it. A libFuzzer dictionary line is a quoted string (\xNN escapes).
{
  printf '%s\n' '"data:"' '"data: "' '"event: "' '"id: "' '"retry: "' '": "' \
    '"\x0a"' '"\x0d"' '"\x0d\x0a"' '"\x0a\x0a"' '"\xef\xbb\xbf"' '"[DONE]"'
} >"$fuzz/dicts/sse_decoder.dict"
{
  cat "$fuzz/dicts/sse_decoder.dict"
  grep -ohE '"[a-z][a-zA-Z_.]*"' src/backend/*.rs | sort -u
  printf '%s\n' '"\"choices\":[{\"text\":\"x\"}]"' '"\"usage\":{\"completion_tokens\":1}"' \
    '"null"' '"true"' '"-1"' '"1e400"' '"18446744073709551615"' '"\"\\ud800\""'
} >"$fuzz/dicts/backends.dict"
{
  printf '%s\n' '"[[targets]]"' '"[defaults]"' '"[labels]"' '" = "' '"\x0a"' \
    '"true"' '"false"' '"0"' '"-1"' '"1e-300"' '"1e308"' '"inf"' '"nan"' \
    '"18446744073709551615"' '"\"0s\""' '"\"1ms\""' '"[]"' '"{}"' '"\"\""'
  sed -n 's/^ *pub \([a-z_]*\): .*/"\1 = "/p' src/config/raw.rs | sort -u
  sed -n '/pub const NAMES/,/];/s/^ *\("[a-z.-]*"\),$/\1/p' src/backend/mod.rs
} >"$fuzz/dicts/config.dict"

for target in sse_decoder backends config; do
  printf '%-12s %4d seeds, dictionary of %d words\n' "$target" \
    "$(find "$fuzz/corpus/$target" -name 'seed-*' | wc -l)" "$(wc -l <"$fuzz/dicts/$target.dict")"
done
