"""The budget window on 31 days of backfilled counters (scripts/backfill-proof.sh runs it).

One target probed from two nodes at 0.1 probes/s each, scraped every minute (17 s past it,
as a scrape's phase is not the rule evaluation's), for 31 days ending now: each probe fails
with a chance of 1 in 30 (3.3%) until 10 days ago, 1 in 200 (0.5%) since; the daemon on
node n2 restarts 25 days ago (its counters start again at 0). The truth is the exact count:
over the last 30 days about 2.4% of probes failed (at 99% the budget left is about -1.4),
over the last 7 about 0.5% (about 0.5 left).

The recorded 5-minute rates estimate the counts: each window's rate() sees the scrapes inside
it and extrapolates over the one scrape interval between two windows it does not see. For
random failures that is unbiased; the noise on this month is within TOLERANCE. (Failures
landing always in the same phase of the 5-minute grid, as a synthetic failure every 5th
minute on the minute does, are counted 5/4 times: real failures are not that regular.)

  raw     the counters as OpenMetrics, `promtool tsdb create-blocks-from openmetrics`
  A       a Prometheus holding the raw samples for 60 days: what the rules are backfilled from
  rec     `promtool tsdb create-blocks-from rules` of the inferprobe-sli-rate5m group (and the
          objective) from A: the recorded 5-minute rates, 31 days
  G       a global/long-term store, retention 40 days, holding only the recorded series, with
          the rules at the 30-day window (scripts/gen-slo-rules.py --window 30d)
  C10     a cluster's Prometheus at 10 days (kube-prometheus-stack's default): raw + recorded,
          with the shipped rules (the 7-day window) and the 30-day ones beside them

The rules that look back a day (the coverage a day ago, the short window in the day before)
read what the Prometheus recorded then: each store's coverage at the end and a day and two
days before is backfilled from the blocks it held at that time (a Prometheus at that time's
retention), then its short window (pass 3), as its rules would have recorded them.

At the end of the 31 days it evaluates, with /api/v1/query?stats=all: the budget as the rules
computed it before (30 days of raw samples) in A and in C10, the shipped budget (the rules it
reads inlined, since the backfilled store holds the rates, not the rules' later outputs) at
each window in G and in C10, the share of the window covered, and InferprobeSLOWindowShort
(the standing alert it was, and the one it is) in C10 and G.
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
DEFAULT = "7d"  # the shipped rules' window (scripts/gen-slo-rules.py DEFAULT_WINDOW)
DAY, STEP = 86400, 60
END = int(time.time()) // 300 * 300 - 300
START = END - 31 * DAY
FAILING_UNTIL = END - 10 * DAY
RESTART_N2 = END - 25 * DAY
OBJECTIVE = 0.99
TOLERANCE = 0.05  # of the budget left: 5e-4 of the error ratio
FAIL_BEFORE, FAIL_AFTER = 1 / 30, 1 / 200
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
    """The counters; returns the true error ratio over (END - 30 d, END] and (END - 7 d, END]."""
    requests = {"n1": [], "n2": []}
    errors = {"n1": [], "n2": []}
    window_req = window_err = week_req = week_err = 0
    rng = random.Random(49)
    for node in ("n1", "n2"):
        r = e = 0
        for i, t in enumerate(range(START + PHASE, END, STEP)):
            if node == "n2" and abs(t - RESTART_N2) < STEP / 2:
                r = e = 0  # the daemon restarted: its counters start again
            elif i:
                r += 6  # 0.1 probes/s
                chance = FAIL_BEFORE if t <= FAILING_UNTIL else FAIL_AFTER
                fail = sum(rng.random() < chance for _ in range(6))
                e += fail
                if t > END - 30 * DAY:
                    window_req += 6
                    window_err += fail
                if t > END - 7 * DAY:
                    week_req += 6
                    week_err += fail
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
    return window_err / window_req, week_err / week_req


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


def backfill(prom, rules_text, name, at):
    """Backfills the rules of `rules_text` (one group, every 5 minutes) over the quarter hour
    before each time of `at` from `prom`, into blocks under TMP/name-<i>."""
    (TMP / f"{name}.yml").write_text(rules_text)
    outs = []
    for i, t in enumerate(at):
        out = TMP / f"{name}-{i}"
        run("promtool", "tsdb", "create-blocks-from", "rules", f"--start={t - 900}",
            f"--end={t}", f"--url={prom.base}", f"--output-dir={out}", TMP / f"{name}.yml")
        outs.append(out)
    return outs


def group(name, rules, names):
    """A rules file of one group, every 5 minutes: the rules `names` of `rules`, each with
    its slo_window label (from its name's window)."""
    out = [f"groups:\n  - name: {name}\n    interval: 5m\n    rules:\n"]
    for rule, window in names:
        expr = rules[window][rule].replace("\n", "\n          ")
        out.append(f"      - record: {rule}\n        expr: |\n          {expr}\n"
                   f"        labels:\n          slo_window: {window}\n")
    return "".join(out)


def main():
    began = time.monotonic()
    rules = {DEFAULT: dict(rule_exprs(RULES))}
    alerts = {DEFAULT: dict(rule_exprs(ALERTS))}
    # The 30-day window, as the global store (or a Prometheus keeping 31 days) runs it.
    run(sys.executable, "scripts/gen-slo-rules.py", "--window", "30d", "--out", TMP / "w30")
    rules["30d"] = dict(rule_exprs(TMP / "w30/recording-rules.yml"))
    alerts["30d"] = dict(rule_exprs(TMP / "w30/alerting-rules.yml"))
    windows = [DEFAULT, "30d"]
    truth_ratio, week_ratio = write_openmetrics(TMP / "raw.om")
    truth = {"30d": 1 - truth_ratio / (1 - OBJECTIVE), "7d": 1 - week_ratio / (1 - OBJECTIVE)}
    log(f"31 days of counters, one sample a minute, ending {time.strftime('%Y-%m-%d %H:%M', time.gmtime(END))} UTC: "
        f"true 30-day error ratio {truth_ratio:.6f}, budget left {truth['30d']:.4f}; "
        f"7-day {week_ratio:.6f}, budget left {truth['7d']:.4f}")
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
        + f"      - record: inferprobe:slo_objective\n        expr: {rules[DEFAULT]['inferprobe:slo_objective']}\n")
    t0 = time.monotonic()
    run("promtool", "tsdb", "create-blocks-from", "rules", f"--start={START}", f"--end={END}",
        f"--url={a.base}", f"--output-dir={TMP / 'rec'}", TMP / "rates.yml")
    log(f"backfilled the recorded 5-minute rates over 31 days in {time.monotonic() - t0:.0f} s")
    rates = {"inferprobe:sli_requests:rate5m", "inferprobe:sli_errors:rate5m",
             "inferprobe:sli_observations:rate5m", "inferprobe:sli_slow_observations:rate5m",
             "inferprobe:slo_objective"}
    # The coverage and the short window are stored (backfilled as recorded then, below): the
    # rules read them a day back, which an inlined expression cannot.
    stored = rates | {"inferprobe:sli_window_coverage:ratio", "inferprobe:sli_window_short:ratio"}

    old = ("1 - (sum by (cluster, target) (rate(inferprobe_request_errors_total[30d]))\n"
           "/ sum by (cluster, target) (rate(inferprobe_requests_total[30d])))\n"
           "/ on (cluster, target) (1 - max by (cluster, target) (inferprobe_slo_objective))")
    budget = {w: inline("inferprobe:error_budget_remaining:ratio", rules[w], stored) for w in windows}
    # The budget as the rules wrote it before issue 56: without hiding a short window.
    unhidden = {w: inline(f"inferprobe:sli_errors:ratio_rate{w}", rules[w], stored) for w in windows}
    unhidden = {w: f"1 - ({e}) / on (cluster, target) (1 - inferprobe:slo_objective)"
                for w, e in unhidden.items()}
    ratio30d = inline("inferprobe:sli_errors:ratio_rate30d", rules["30d"], stored)
    old_a, old_a_samples = a.value(old)
    raw_ratio_samples = a.query("sum by (cluster, target) (rate(inferprobe_request_errors_total[30d]))"
                                " / sum by (cluster, target) (rate(inferprobe_requests_total[30d]))")[1]
    a.stop()

    coverage = group("coverage", rules, [("inferprobe:sli_window_coverage:ratio", w) for w in windows])
    short = group("short", rules, [("inferprobe:sli_window_short:ratio", w) for w in windows])
    at = [END - DAY, END]

    def history(name, retention):
        """Store `name` at the end, with the coverage it recorded two days and a day before
        and now (pass 2), and its short window a day before and now (pass 3)."""
        def then_and_now(prom, rules_text, what, times, into):
            outs = backfill(prom, rules_text, what, times)
            prom.stop()
            for out in outs:
                blocks(out, into)
        for i, then in enumerate([END - 2 * DAY, END - DAY]):
            # The store as it was then: the recorded rates it held (the raw samples do not
            # count here), its retention counted from its newest block.
            data = TMP / f"{name}-then{i}"
            blocks(TMP / "rec", data, lambda m: m["maxTime"] <= then * 1000)
            then_and_now(Prometheus(f"{name}-then{i}", data, retention), coverage,
                         f"cov-{name}-then{i}", [then], TMP / name)
        then_and_now(Prometheus(name, TMP / name, retention), coverage, f"cov-{name}", [END], TMP / name)
        then_and_now(Prometheus(name, TMP / name, retention), short, f"short-{name}", at, TMP / name)
        return Prometheus(name, TMP / name, retention)

    # G: the recorded series alone, kept 40 days.
    blocks(TMP / "rec", TMP / "G")
    g = history("G", "40d")
    new_g, new_g_samples = g.value(budget["30d"])
    _, ratio_g_samples = g.query(ratio30d)
    cov_g, _ = g.value('inferprobe:sli_window_coverage:ratio{slo_window="30d"}')
    alert = {w: alerts[w]["InferprobeSLOWindowShort"].replace(
        "inferprobe:error_budget:ratio", f"(1 - {rules[w]['inferprobe:slo_objective']})") for w in windows}
    quiet_g, _ = g.query(alert["30d"])
    g.stop()

    # C10: raw and recorded at 10 days' retention.
    blocks(TMP / "raw", TMP / "C10")
    blocks(TMP / "rec", TMP / "C10")
    c10 = history("C10", "10d")
    old_c, old_c_samples = c10.value(old)
    cov_c = {w: c10.value(f'inferprobe:sli_window_coverage:ratio{{slo_window="{w}"}}')[0] for w in windows}
    shown_c = {w: c10.query(budget[w])[0] for w in windows}
    was_c = {w: c10.value(unhidden[w])[0] for w in windows}
    short_c = {w: c10.query(f'inferprobe:sli_window_short:ratio{{slo_window="{w}"}}')[0] for w in windows}
    fired = {w: c10.query(alert[w])[0] for w in windows}
    # The alert before issue 56: short and not growing, standing for as long as it is so.
    standing = (f'inferprobe:sli_window_coverage:ratio{{slo_window="30d"}} < 0.9 and on (cluster, target) '
                f'(inferprobe:sli_window_coverage:ratio{{slo_window="30d"}} - on (cluster, target) '
                f'inferprobe:sli_window_coverage:ratio{{slo_window="30d"}} offset 1d) < 1 / 60')
    stood, _ = c10.query(standing)
    c10.stop()

    def one(result):
        return float(result[0]["value"][1]) if len(result) == 1 else None

    def names(result):
        return [s["metric"].get("target") for s in result]

    failures = []
    log(f"30-day budget left at the end of the 31 days (truth {truth['30d']:.4f}):")
    log(f"  old rule, 30 d of raw samples, raw kept 60 d (A):         {old_a:.4f}  "
        f"({old_a_samples} samples read)")
    log(f"  old rule, 30 d of raw samples, raw kept 10 d (C10):       {old_c:.4f}  "
        f"({old_c_samples} samples read): what a 10-day Prometheus showed")
    log(f"  recorded rates, 30d window, global store 40 d (G):        {new_g:.4f}  "
        f"({new_g_samples} samples read; window covered {cov_g:.3f})")
    log(f"  recorded rates, 30d window, cluster at 10 d (C10):        "
        f"{'no sample' if not shown_c['30d'] else shown_c['30d']}  (window covered "
        f"{cov_c['30d']:.3f}, short for good: {names(short_c['30d'])}; before issue 56 it read "
        f"{was_c['30d']:.4f})")
    log(f"7-day budget left (truth {truth['7d']:.4f}), the shipped default window:")
    log(f"  recorded rates, 7d window, cluster at 10 d (C10):         "
        f"{one(shown_c['7d']):.4f}  (window covered {cov_c['7d']:.3f})" if shown_c['7d'] else "no sample")
    log(f"samples read by the 30-day error ratio per evaluation: {raw_ratio_samples} from raw "
        f"(2 nodes x 5 series, one sample a minute) -> {ratio_g_samples} from the recorded rates "
        f"({raw_ratio_samples / ratio_g_samples:.0f}x fewer; at a 30 s scrape twice the raw)")
    log(f"InferprobeSLOWindowShort in C10 at the end: 30d {names(fired['30d'])}, 7d "
        f"{names(fired['7d'])} (short for good since the coverage stopped growing: said then, "
        f"once); the standing alert before issue 56: {names(stood)}; in G: {names(quiet_g)}")
    if abs(old_a - truth["30d"]) > TOLERANCE:
        failures.append(f"the generator: the old rule on all raw samples reads {old_a}, truth {truth['30d']}")
    if abs(new_g - truth["30d"]) > TOLERANCE:
        failures.append(f"G's 30-day budget {new_g} is not the truth {truth['30d']} (within {TOLERANCE})")
    if abs(old_c - truth["30d"]) < 1:
        failures.append(f"C10's old budget {old_c} is near the truth: the retention did not cut")
    if abs(was_c["30d"] - truth["30d"]) < 1:
        failures.append(f"C10's unhidden 30-day budget {was_c['30d']} is near the truth: nothing to hide")
    if shown_c["30d"]:
        failures.append(f"C10 shows a 30-day budget {shown_c['30d']} over a third of the window")
    if one(shown_c["7d"]) is None or abs(one(shown_c["7d"]) - truth["7d"]) > TOLERANCE:
        failures.append(f"C10's 7-day budget {shown_c['7d']} is not the truth {truth['7d']} (within {TOLERANCE})")
    if not 0.3 <= cov_c["30d"] <= 0.37:
        failures.append(f"C10 covers {cov_c['30d']} of the 30-day window, want about a third")
    if cov_c["7d"] < 0.999 or cov_g < 0.999:
        failures.append(f"C10 covers {cov_c['7d']} of the 7-day window, G {cov_g} of 30 days, want 1")
    if names(short_c["30d"]) != ["vllm"] or short_c["7d"]:
        failures.append(f"C10's short windows: 30d {short_c['30d']} (want vllm), 7d {short_c['7d']} (want none)")
    if names(stood) != ["vllm"]:
        failures.append(f"the standing alert's expression in C10 returns {stood}: the proof's C10 is not capped")
    if fired["30d"] or fired["7d"]:
        failures.append(f"InferprobeSLOWindowShort in C10 at the end: {fired}, want none (said once, long ago)")
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
