#!/usr/bin/env python3
"""What `[metrics] histograms` costs and saves (issue 34): for each mode (classic, native,
both), the daemon probing 100 simulated targets (as bench/run.py's scrape figure: 1 probe/s
each, an SLO on TTFT and TPOT, 5 % faults so every series moves), then

  * the series one replica costs in Prometheus: Debian's Prometheus 2.42 with
    `--enable-feature=native-histograms` scrapes the daemon (protobuf) for 30 s and counts
    the series of one target, and (classic only) a Prometheus without the feature, which
    scrapes text;
  * `/metrics` bytes and time per format (OpenMetrics, text 0.0.4, protobuf in this mode):
    N back-to-back scrapes over one keep-alive connection, p50 and p99.

Prints a Markdown table (docs/performance.md has the figures of a run). Release build:

    cargo build --release && python3 bench/histograms.py [--scrapes 200]
"""

import argparse
import json
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from harness import daemon, free_port, machine, pct, scrape_repeatedly, simulator

ACCEPT = {
    "OpenMetrics": "application/openmetrics-text;version=1.0.0",
    "text 0.0.4": "text/plain;version=0.0.4",
    "protobuf": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited",
}


def config(port, sim_port, n, mode):
    lines = [
        f'listen = "127.0.0.1:{port}"',
        "[metrics]",
        f'histograms = "{mode}"',
        "[defaults]",
        f'url = "http://127.0.0.1:{sim_port}"',
        'model = "meta-llama/Llama-3.1-8B-Instruct"',
        "rate = 1.0",
        "input_tokens = 128",
        "output_tokens = 16",
        'slo = { ttft = "500ms", tpot = "50ms" }',
    ]
    for i in range(n):
        lines += ["[[targets]]", f'name = "target-{i:03}"', 'backend = "openai-chat"']
    return "\n".join(lines) + "\n"


def scrape_times(port, accept, n):
    times, body = scrape_repeatedly(port, accept, n)
    return {"p50": pct(times, 50), "p99": pct(times, 99), "bytes": len(body)}


def series_per_target(work, port, native, seconds):
    """Series of target-000 in a Prometheus that scraped the daemon for `seconds`."""
    prom_port = free_port()
    data = Path(tempfile.mkdtemp(dir=work))
    (data / "prometheus.yml").write_text(
        "global: {scrape_interval: 2s}\nscrape_configs:\n  - job_name: inferprobe\n"
        f"    honor_labels: true\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n")
    flags = ["--enable-feature=native-histograms"] if native else []
    proc = subprocess.Popen(
        ["/usr/bin/prometheus", f"--config.file={data / 'prometheus.yml'}",
         f"--storage.tsdb.path={data / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}",
         "--log.level=warn", *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(seconds)

        def query_all(expr):
            url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.load(r)["data"]["result"]

        def query(expr):
            result = query_all(expr)
            return int(float(result[0]["value"][1])) if result else 0

        latency = ('__name__=~"inferprobe_(time_to_first_token|time_per_output_token|'
                   'inter_token_latency|e2e_request_latency)_seconds.*"')
        by_name = query_all('count by (__name__) ({__name__=~"inferprobe_.+", target="target-000"})')
        return {"all": query('count({__name__=~"inferprobe_.+", target="target-000"})'),
                "by_name": {r["metric"]["__name__"]: int(r["value"][1]) for r in by_name},
                "latency": query(f'count({{{latency}, target="target-000"}})')}
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", type=int, default=100)
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--modes", default="classic,native,both", help="comma-separated")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="inferprobe-histograms-"))
    rows = []
    for mode in args.modes.split(","):
        sim, sim_port = simulator(work, f"sim-{mode}", "--ttft", "50ms", "--itl", "10ms",
                                  "--jitter", "0.5", "--fault", "http_500=0.05")
        port = free_port()
        d, _ = daemon(work, f"daemon-{mode}", config(port, sim_port, args.targets, mode))
        time.sleep(args.warmup)
        row = {"mode": mode, "formats": {}}
        formats = ["OpenMetrics", "text 0.0.4", "protobuf"] if mode == "classic" else ["protobuf"]
        for fmt in formats:
            row["formats"][fmt] = scrape_times(port, ACCEPT[fmt], args.scrapes)
        row["series"] = series_per_target(work, port, True, 30)
        if mode == "classic":
            row["series_text"] = series_per_target(work, port, False, 30)
        d.stop()
        sim.stop()
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(f"{machine()}; {args.targets} targets, {args.scrapes} scrapes per format")
    print()
    print("| mode | format | bytes | p50 | p99 | series per replica (latency histograms) |")
    print("|---|---|---:|---:|---:|---:|")
    for row in rows:
        for fmt, s in row["formats"].items():
            series = row["series"] if fmt == "protobuf" else row.get("series_text", row["series"])
            print(f"| {row['mode']} | {fmt} | {s['bytes']:,} | {s['p50'] * 1000:.1f} ms | "
                  f"{s['p99'] * 1000:.1f} ms | {series['all']} ({series['latency']}) |")


if __name__ == "__main__":
    main()
