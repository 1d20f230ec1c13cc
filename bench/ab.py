"""The per-chunk CPU of two builds, A and B, in one run: bench/run.py's chunk-cost workload
(`inferprobe bench`, 128-token completions at 1 ms per token, 10 streams at once) run with
each build in turn,
alternating A B A B ... so drift on a shared machine falls on both alike. Prints each
round and the medians; a change to a path the chunks take shows here as a B/A ratio away
from 1.

    python3 bench/ab.py OLD_BINARY NEW_BINARY [--rounds 6] [--requests 1000]

Both builds stream from the same simulator (B's), one at a time.
"""
import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from harness import Proc, free_port, wait_until_up


def run(binary, url, requests, log, extra):
    probe = Proc(
        [binary, "bench", "--url", url, "--model", "sim", "--output-tokens", "128",
         "--num-prompts", str(requests), "--max-concurrency", "10", "--request-rate", "inf",
         "--quiet", *extra],
        log,
    )
    if probe.wait(timeout=900) != 0:
        sys.exit(Path(log).read_text())
    return probe.cpu_total() / (requests * 128)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--requests", type=int, default=1000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="inferprobe-ab-"))
    port = free_port()
    sim = Proc([args.b, "simulate", "--listen", f"127.0.0.1:{port}", "--ttft", "1ms", "--itl", "1ms"],
               work / "sim.log")
    wait_until_up(port, "/health", sim, "the simulator")
    url = f"http://127.0.0.1:{port}"
    per_chunk = {"A": [], "B": []}
    try:
        for i in range(args.rounds):
            for name, binary in (("A", args.a), ("B", args.b)) if i % 2 == 0 else (("B", args.b), ("A", args.a)):
                cost = run(binary, url, args.requests, work / f"{name}-{i}.log", [])
                per_chunk[name].append(cost)
                print(f"round {i + 1} {name}: {cost * 1e6:.2f} µs per chunk", flush=True)
    finally:
        sim.stop()
    a, b = (statistics.median(per_chunk[k]) for k in "AB")
    spread = lambda k: f"{min(per_chunk[k]) * 1e6:.2f}–{max(per_chunk[k]) * 1e6:.2f}"
    print(f"A: median {a * 1e6:.2f} µs per chunk (range {spread('A')})")
    print(f"B: median {b * 1e6:.2f} µs per chunk (range {spread('B')})")
    print(f"B/A: {b / a:.3f}")


if __name__ == "__main__":
    main()
