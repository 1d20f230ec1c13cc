"""The 30-day budget on 31 days of backfilled counters (scripts/backfill-proof.sh runs it).

One target probed from two nodes at 0.1 probes/s each, scraped every minute (17 s past it,
as a scrape's phase is not the rule evaluation's), for 31 days ending now: each probe fails
with a chance of 1 in 30 (3.3%) until 10 days ago, none since; the daemon on node n2
restarts 25 days ago (its counters start again at 0). Over the last 30 days about 2.22% of
probes failed (the truth is the exact count): at 99% the budget left is about -1.22.

The recorded 5-minute rates estimate the counts: each window's rate() sees the scrapes inside
it and extrapolates over the one scrape interval between two windows it does not see. For
random failures that is unbiased; the noise on this month is within TOLERANCE. (Failures
landing always in the same phase of the 5-minute grid, as a synthetic failure every 5th
minute on the minute does, are counted 5/4 times: real failures are not that regular.)

  raw     the counters as OpenMetrics, `promtool tsdb create-blocks-from openmetrics`
  A       a Prometheus holding the raw samples for 60 days: what the rules are backfilled from
  rec     `promtool tsdb create-blocks-from rules` of the inferprobe-sli-rate5m group (and the
          objective) from A: the recorded 5-minute rates, 31 days
  G       a global/long-term store, retention 40 days, holding only the recorded series
  C10     a cluster's Prometheus at 10 days (kube-prometheus-stack's default): raw + recorded,
          with the coverage as it would have recorded it yesterday and today

At the end of the 31 days it evaluates, with /api/v1/query?stats=all: the budget as the rules
computed it before (30 days of raw samples) in A and in C10, the shipped budget (the rules it
reads inlined, since the backfilled store holds the rates, not the rules' later outputs) in G
and in C10, the share of the window covered, and InferprobeSLOWindowShort's expression in C10.
"""
import json
import os
import random
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

sys.path.insert(0, "scripts")
from proof_queries import rule_exprs  # noqa: E402

TMP = pathlib.Path(sys.argv[1])
PROMETHEUS = sys.argv[2] if len(sys.argv) > 2 else "/usr/bin/prometheus"
RULES = "config/prometheus/recording-rules.yml"
ALERTS = "config/prometheus/alerting-rules.yml"
DAY, STEP = 86400, 60
END = int(time.time()) // 300 * 300 - 300
START = END - 31 * DAY
FAILING_UNTIL = END - 10 * DAY
RESTART_N2 = END - 25 * DAY
OBJECTIVE = 0.99
TOLERANCE = 0.05  # of the budget left: 5e-4 of the error ratio
LABELS = 'target="vllm",model="m",backend="openai"'
PHASE = 17  # the scrape's offset from the minute
CATEGORIES = ["http_5xx", "connect", "timeout", "http_4xx"]  # the daemon exports all at 0
procs = []


def log(*a):
    print(*a, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def write_openmetrics(path):
    """The counters; returns the true error ratio over (END - 30 d, END]."""
    requests = {"n1": [], "n2": []}
    errors = {"n1": [], "n2": []}
    window_req = window_err = 0
    rng = random.Random(49)
    for node in ("n1", "n2"):
        r = e = 0
        for i, t in enumerate(range(START + PHASE, END, STEP)):
            if node == "n2" and abs(t - RESTART_N2) < STEP / 2:
                r = e = 0  # the daemon restarted: its counters start again
            elif i:
                r += 6  # 0.1 probes/s
                fail = sum(rng.random() < 1 / 30 for _ in range(6)) if t <= FAILING_UNTIL else 0
                e += fail
                if t > END - 30 * DAY:
                    window_req += 6
                    window_err += fail
            requests[node].append((t, r))
            errors[node].append((t, e))
    with open(path, "w") as f:
        f.write("# TYPE inferprobe_requests counter\n")
        for node, points in requests.items():
            for t, v in points:
                f.write(f'inferprobe_requests_total{{{LABELS},node="{node}"}} {v} {t}\n')
        f.write("# TYPE inferprobe_request_errors counter\n")
        for node, points in errors.items():
            for category in CATEGORIES:
                for t, v in points:
                    v = v if category == "http_5xx" else 0
                    f.write(f'inferprobe_request_errors_total{{{LABELS},node="{node}",'
                            f'category="{category}"}} {v} {t}\n')
        f.write("# TYPE inferprobe_slo_objective gauge\n")
        for node in ("n1", "n2"):
            for t in range(START + PHASE, END, STEP):
                f.write(f'inferprobe_slo_objective{{{LABELS},node="{node}"}} {OBJECTIVE} {t}\n')
        f.write("# EOF\n")
    return window_err / window_req


def run(*args):
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"FAIL: {' '.join(map(str, args))}\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return out.stdout


def group_text(path, name):
    text = open(path).read()
    start = text.index(f"  - name: {name}\n")
    rest = text.find("\n  - name: ", start + 1)
    return text[start:] if rest < 0 else text[start:rest + 1]


class Prometheus:
    def __init__(self, name, data, retention):
        self.name, self.data, self.retention = name, data, retention
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = TMP / f"{name}.yml"
        config.write_text("global: {}\n")
        self.log = open(TMP / f"{name}.log", "w")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={data}",
             f"--storage.tsdb.retention.time={retention}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        procs.append(self.proc)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(self.base + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"FAIL: Prometheus {name} not ready: {(TMP / f'{name}.log').read_text()[-2000:]}")
            time.sleep(0.3)

    def query(self, expr, at=END):
        data = urllib.parse.urlencode({"query": expr, "time": at, "stats": "all"}).encode()
        try:
            with urllib.request.urlopen(self.base + "/api/v1/query", data=data, timeout=60) as r:
                answer = json.load(r)
        except urllib.error.HTTPError as e:
            answer = json.load(e)
        if answer.get("status") != "success":
            sys.exit(f"FAIL: {self.name}: {expr}\n{json.dumps(answer)[:2000]}")
        result = answer["data"]["result"]
        samples = answer["data"]["stats"]["samples"]["totalQueryableSamples"]
        return result, samples

    def value(self, expr, at=END):
        result, samples = self.query(expr, at)
        if len(result) != 1:
            sys.exit(f"FAIL: {self.name}: {expr}: {len(result)} series, want 1: {result}")
        return float(result[0]["value"][1]), samples

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def blocks(src, dst, keep=lambda meta: True):
    dst.mkdir(parents=True, exist_ok=True)
    n = 0
    for b in sorted(src.iterdir()):
        meta = b / "meta.json"
        if meta.exists() and keep(json.loads(meta.read_text())):
            shutil.copytree(b, dst / b.name)
            n += 1
    return n


def inline(name, rules, stored):
    """Rule `name`'s expression with every rule it reads that the store does not hold
    replaced by that rule's own expression (a backfilled store holds the backfilled rates,
    not what later rules made of them)."""
    expr = rules[name]

    def sub(m):
        n = m.group(0)
        return f"({inline(n, rules, stored)})" if n in rules and n not in stored else n
    return re.sub(r"inferprobe:[a-z0-9_]+:[a-z0-9_]+", sub, expr)


def main():
    began = time.monotonic()
    rules = dict(rule_exprs(RULES))
    alerts = dict(rule_exprs(ALERTS))
    truth_ratio = write_openmetrics(TMP / "raw.om")
    truth = 1 - truth_ratio / (1 - OBJECTIVE)
    log(f"31 days of counters, one sample a minute, ending {time.strftime('%Y-%m-%d %H:%M', time.gmtime(END))} UTC: "
        f"true 30-day error ratio {truth_ratio:.6f}, budget left {truth:.4f}")
    # Day-long blocks, as a Prometheus keeping 10 days compacts them (a tenth of its retention).
    run("promtool", "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h",
        TMP / "raw.om", TMP / "raw")

    blocks(TMP / "raw", TMP / "A")  # each Prometheus reads a copy (it compacts its blocks)
    a = Prometheus("A", TMP / "A", "60d")

    # Pass 1: the recorded rates (and the objective) from the raw samples, as the shipped
    # group records them: its own text, interval 5m.
    (TMP / "rates.yml").write_text(
        "groups:\n" + group_text(RULES, "inferprobe-sli-rate5m")
        + "  - name: objective\n    interval: 5m\n    rules:\n"
        + f"      - record: inferprobe:slo_objective\n        expr: {rules['inferprobe:slo_objective']}\n")
    t0 = time.monotonic()
    run("promtool", "tsdb", "create-blocks-from", "rules", f"--start={START}", f"--end={END}",
        f"--url={a.base}", f"--output-dir={TMP / 'rec'}", TMP / "rates.yml")
    log(f"backfilled the recorded 5-minute rates over 31 days in {time.monotonic() - t0:.0f} s")
    stored = {"inferprobe:sli_requests:rate5m", "inferprobe:sli_errors:rate5m",
              "inferprobe:sli_observations:rate5m", "inferprobe:sli_slow_observations:rate5m",
              "inferprobe:slo_objective"}

    old = ("1 - (sum by (cluster, target) (rate(inferprobe_request_errors_total[30d]))\n"
           "/ sum by (cluster, target) (rate(inferprobe_requests_total[30d])))\n"
           "/ on (cluster, target) (1 - max by (cluster, target) (inferprobe_slo_objective))")
    budget = inline("inferprobe:error_budget_remaining:ratio", rules, stored)
    ratio30d = inline("inferprobe:sli_errors:ratio_rate30d", rules, stored)
    coverage = inline("inferprobe:sli_window_coverage:ratio30d", rules, stored)
    old_a, old_a_samples = a.value(old)
    raw_ratio_samples = a.query("sum by (cluster, target) (rate(inferprobe_request_errors_total[30d]))"
                                " / sum by (cluster, target) (rate(inferprobe_requests_total[30d]))")[1]

    # G: the recorded series alone, kept 40 days.
    blocks(TMP / "rec", TMP / "G")
    g = Prometheus("G", TMP / "G", "40d")
    new_g, new_g_samples = g.value(budget)
    _, ratio_g_samples = g.query(ratio30d)
    cov_g, _ = g.value(coverage)

    # C10: raw and recorded at 10 days' retention. Y: the same a day ago, to record the
    # coverage C10 recorded then (pass 2: a backfill over the data a Prometheus holds now
    # would count what it holds today, not what it held then).
    blocks(TMP / "raw", TMP / "C10")
    blocks(TMP / "rec", TMP / "C10")
    c10 = Prometheus("C10", TMP / "C10", "10d")
    blocks(TMP / "rec", TMP / "Y", lambda m: m["maxTime"] <= (END - DAY) * 1000)
    y = Prometheus("Y", TMP / "Y", "10d")
    (TMP / "coverage.yml").write_text(
        "groups:\n  - name: coverage\n    interval: 5m\n    rules:\n"
        f"      - record: inferprobe:sli_window_coverage:ratio30d\n"
        f"        expr: {rules['inferprobe:sli_window_coverage:ratio30d']}\n")
    for prom, end, out in [(y, END - DAY, "cov-y"), (c10, END, "cov-c")]:
        run("promtool", "tsdb", "create-blocks-from", "rules", f"--start={end - 900}",
            f"--end={end}", f"--url={prom.base}", f"--output-dir={TMP / out}", TMP / "coverage.yml")
    y.stop()
    c10.stop()
    blocks(TMP / "cov-y", TMP / "C10")
    blocks(TMP / "cov-c", TMP / "C10")
    c10 = Prometheus("C10", TMP / "C10", "10d")
    old_c, old_c_samples = c10.value(old)
    new_c, new_c_samples = c10.value(budget)
    cov_c, _ = c10.value(coverage)
    # The alert asks for a target with a budget now (inferprobe:error_budget:ratio, which
    # neither store records here: from the objective they do).
    window_short = alerts["InferprobeSLOWindowShort"].replace(
        "inferprobe:error_budget:ratio", f"({rules['inferprobe:error_budget:ratio']})")
    fired, _ = c10.query(window_short)
    quiet_g, _ = g.query(window_short.replace(
        "inferprobe:sli_window_coverage:ratio30d < 0.9", f"({coverage}) < 0.9", 1))
    for p in (a, g, c10):
        p.stop()

    failures = []
    log(f"budget left at the end of the 31 days (truth {truth:.4f}):")
    log(f"  old rule, 30 d of raw samples, raw kept 60 d (A):         {old_a:.4f}  "
        f"({old_a_samples} samples read)")
    log(f"  old rule, 30 d of raw samples, raw kept 10 d (C10):       {old_c:.4f}  "
        f"({old_c_samples} samples read): what a 10-day Prometheus showed")
    log(f"  shipped rule, recorded rates, global store 40 d (G):      {new_g:.4f}  "
        f"({new_g_samples} samples read; window covered {cov_g:.3f})")
    log(f"  shipped rule, recorded rates, cluster at 10 d (C10):      {new_c:.4f}  "
        f"({new_c_samples} samples read; window covered {cov_c:.3f})")
    log(f"samples read by the 30-day error ratio per evaluation: {raw_ratio_samples} from raw "
        f"(2 nodes x 5 series, one sample a minute) -> {ratio_g_samples} from the recorded rates "
        f"({raw_ratio_samples / ratio_g_samples:.0f}x fewer; at a 30 s scrape twice the raw)")
    log(f"InferprobeSLOWindowShort in C10: {[s['metric'] for s in fired]}; in G: {[s['metric'] for s in quiet_g]}")
    if abs(old_a - truth) > TOLERANCE:
        failures.append(f"the generator: the old rule on all raw samples reads {old_a}, truth {truth}")
    if abs(new_g - truth) > TOLERANCE:
        failures.append(f"G's budget {new_g} is not the truth {truth} (within {TOLERANCE})")
    if abs(old_c - truth) < 1:
        failures.append(f"C10's old budget {old_c} is near the truth: the retention did not cut")
    if not 0.3 <= cov_c <= 0.37:
        failures.append(f"C10 covers {cov_c} of the window, want about a third")
    if cov_g < 0.999:
        failures.append(f"G covers {cov_g} of the window, want 1")
    if [s["metric"].get("target") for s in fired] != ["vllm"]:
        failures.append(f"InferprobeSLOWindowShort's expression in C10 returns {fired}, want vllm")
    if quiet_g:
        failures.append(f"InferprobeSLOWindowShort's expression in G returns {quiet_g}, want none")
    if new_g_samples >= old_a_samples:
        failures.append(f"the recorded budget reads {new_g_samples} samples, raw {old_a_samples}")
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    if failures:
        sys.exit(1)
    log(f"backfill-proof: passed in {time.monotonic() - began:.0f} s")


try:
    main()
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
