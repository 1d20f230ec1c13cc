#!/usr/bin/env bash
# The prefix-cache check (issue 35) against real vLLM servers, and through a real
# round-robin proxy. Not part of CI (a 6 GB venv; see setup.sh); run it and read its report.
#
#   bash scripts/real-vllm/prefix-proof.sh [SECONDS]
#
# Three vLLM servers with the tiny Llama, each with --enable-prompt-tokens-details (usage
# says how many prompt tokens came from the cache):
#   a: prefix caching on (vLLM's default)          -> target "cached": every check a hit
#   b: --no-enable-prefix-caching                  -> target "uncached": every check a miss
#   a and c behind Debian's nginx, round-robin     -> target "pool": a hit when an odd number
#      of the workload's own probes (10/s through the same proxy) came between a pair's two:
#      (1 - e^(-2λ)) / 2 with λ ~ 0.6 of them in a ~60 ms cold request, about 0.35 (1/2 under
#      heavy traffic); on a quiet pool strict round-robin would send every second request
#      to the other replica (never a hit).
#   d: a KV cache of 24 blocks of 128 tokens (--num-gpu-blocks-override 24) under 3
#      requests/s of ~400-token prompts (target "load"), checked two ways (issue 43, item 5):
#      "small-now" sends the warm request at once (reuse_gap 0s: it finds the blocks the
#      cold one just wrote), "small-later" 3 s later, as a conversation's next turn (the
#      load has evicted them).
# Every target counts the prefix exactly with the model's own tokenizer (`tokenizer`).
# Checks run every 2 s (d's every 4 s) for SECONDS (default 150). Passes when cached hits
# every judged check, uncached misses every one, the pool's hit ratio is between 0.15 and
# 0.75, small-now hits at least 70% and small-later at most 30%.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-150}
source scripts/real-vllm/lib.sh
if ! command -v nginx >/dev/null; then
  echo "installing nginx (Debian's nginx-light)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq </dev/null && apt-get install -y -qq nginx-light </dev/null >/dev/null
fi
A_PORT=$(free_port); B_PORT=$(free_port); C_PORT=$(free_port); D_PORT=$(free_port)
PROXY_PORT=$(free_port); PROBE_PORT=$(free_port)
DETAILS=--enable-prompt-tokens-details
start_vllm a "$A_PORT" "$MODEL" "$DETAILS"
start_vllm b "$B_PORT" "$MODEL" "$DETAILS" --no-enable-prefix-caching
start_vllm c "$C_PORT" "$MODEL" "$DETAILS"
start_vllm d "$D_PORT" "$MODEL" "$DETAILS" --num-gpu-blocks-override 24

# nginx as a plain round-robin load balancer (its default), streaming unbuffered.
mkdir -p "$WORK/nginx"
cat > "$WORK/nginx/nginx.conf" <<NGINX
daemon off;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 256; }
http {
  access_log $WORK/nginx/access.log;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  upstream replicas {
    server 127.0.0.1:$A_PORT;
    server 127.0.0.1:$C_PORT;
  }
  server {
    listen 127.0.0.1:$PROXY_PORT;
    location / {
      proxy_pass http://replicas;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
NGINX
nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" &
pids+=($!)
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PROXY_PORT/health" >/dev/null && break; sleep 0.1; done

CHECK='prefix_cache = { interval = "2s", prefix_tokens = 256 }'
cat > "$WORK/inferprobe.toml" <<TOML
listen = "127.0.0.1:$PROBE_PORT"

[defaults]
backend = "openai-chat"
model = "tiny"
rate = 0.01
tokenizer = "$MODEL/tokenizer.json"
input_tokens = 16
output_tokens = 4

[[targets]]
name = "cached"
url = "http://127.0.0.1:$A_PORT"
$CHECK

[[targets]]
name = "uncached"
url = "http://127.0.0.1:$B_PORT"
$CHECK

# The pool behind the proxy: its own workload puts other requests between a pair's two.
[[targets]]
name = "pool"
url = "http://127.0.0.1:$PROXY_PORT"
rate = 10
$CHECK

# A KV cache too small for its load: 24 blocks of 128 tokens, 3 requests/s of ~400 tokens.
[[targets]]
name = "load"
url = "http://127.0.0.1:$D_PORT"
rate = 3
input_tokens = 400

[[targets]]
name = "small-now"
url = "http://127.0.0.1:$D_PORT"
prefix_cache = { interval = "4s", prefix_tokens = 256, block_tokens = 128, reuse_gap = "0s" }

[[targets]]
name = "small-later"
url = "http://127.0.0.1:$D_PORT"
prefix_cache = { interval = "4s", prefix_tokens = 256, block_tokens = 128, reuse_gap = "3s" }
TOML
probe_for "$SECONDS_TO_RUN"
for s in a b c d; do
  port_var=${s^^}_PORT
  curl -sf "http://127.0.0.1:${!port_var}/metrics" > "$WORK/vllm-$s-metrics.txt"
done
A_PORT=$A_PORT B_PORT=$B_PORT "$PY" - "$WORK" <<'PY'
import re, sys
work = sys.argv[1]
text = open(f"{work}/metrics.txt").read()

def value(name, target, extra=""):
    total = 0.0
    for labels, v in re.findall(rf'^{name}\{{([^}}]*)\}} (\S+)$', text, re.M):
        if f'target="{target}"' in labels and extra in labels:
            total += float(v)
    return total

ok = True
ratios = {}
for target in ("cached", "uncached", "pool", "small-now", "small-later"):
    results = {r: value("inferprobe_prefix_cache_checks_total", target, f'result="{r}"')
               for r in ("hit", "miss", "unreported", "failed")}
    judged = results["hit"] + results["miss"]
    ratio = results["hit"] / judged if judged else float("nan")
    ratios[target] = ratio
    cold = value("inferprobe_prefix_cache_cold_ttft_seconds_sum", target) / max(
        1, value("inferprobe_prefix_cache_cold_ttft_seconds_count", target))
    warm = value("inferprobe_prefix_cache_warm_ttft_seconds_sum", target) / max(
        1, value("inferprobe_prefix_cache_warm_ttft_seconds_count", target))
    print(f"{target}: " + ", ".join(f"{r} {v:.0f}" for r, v in results.items())
          + f"; hit ratio {ratio:.2f}; mean TTFT cold {cold * 1e3:.1f} ms, warm {warm * 1e3:.1f} ms"
          + (f" (x{cold / warm:.2f})" if warm else ""))
    if judged < (10 if not target.startswith("small") else 5):
        print(f"  FAILED: only {judged:.0f} checks judged")
        ok = False
cached = value("inferprobe_prompt_cached_tokens_total", "pool")
prompt = value("inferprobe_prompt_tokens_total", "pool")
print(f"pool workload probes: {cached:.0f} of {prompt:.0f} prompt tokens reported cached")
for s in "abcd":
    server = open(f"{work}/vllm-{s}-metrics.txt").read()
    get = lambda n: sum(float(v) for v in re.findall(rf'^vllm:{n}_total\{{[^}}]*\}} (\S+)$', server, re.M))
    print(f"vLLM {s}: prefix_cache_queries {get('prefix_cache_queries'):.0f}, "
          f"prefix_cache_hits {get('prefix_cache_hits'):.0f} tokens")
# What vLLM itself reports for a pair like the check's (whole 16-token blocks are cached).
import json, os, random, urllib.request
words = " ".join(["the quick brown fox jumps over a lazy dog"] * 25)
for s in "ab":
    url = f"http://127.0.0.1:{os.environ[s.upper() + '_PORT']}/v1/chat/completions"
    nonce = "%016x" % random.getrandbits(64)
    seen = []
    for q in ("Question one: say yes.", "Question two: say no."):
        body = {"model": "tiny", "max_tokens": 1, "messages": [{"role": "user", "content": f"{nonce} {words} {q}"}]}
        req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        usage = json.load(urllib.request.urlopen(req, timeout=30))["usage"]
        seen.append((usage["prompt_tokens"], (usage.get("prompt_tokens_details") or {}).get("cached_tokens")))
    print(f"vLLM {s}, a pair sent by hand: (prompt tokens, cached tokens) {seen}")
ok = ok and ratios["cached"] == 1.0 and ratios["uncached"] == 0.0 and 0.15 <= ratios["pool"] <= 0.75
ok = ok and ratios["small-now"] >= 0.7 and ratios["small-later"] <= 0.3
print("PASS" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
echo "files: $WORK"
