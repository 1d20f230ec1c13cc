#!/usr/bin/env python3
"""Watch a running inferprobe's sampler check until enough sampled tokens are judged, then
report (scripts/real-server/sampler-proof.sh and scripts/real-vllm/sampler-proof.sh).

    sampler_watch.py METRICS_URL TOKENS SECONDS ALPHA OUT_DIR

The daemon keeps only the last window's p-value (inferprobe_sampler_calibration_p_value), so
/metrics is read every 50 ms: a target whose window count went up by one since the last read
gives that window's p-value; where more than one window closed between two reads only the
last is seen (counted as missed; which one is last does not depend on its value, so the
p-values seen are still a fair sample). Stops at TOKENS judged tokens, after SECONDS or on
SIGTERM,
writes OUT_DIR/metrics.txt and OUT_DIR/p_values.txt, prints the report and exits 0 when no
token is outside the support, no round failed and the windows' false-alarm rate is not
clearly above ALPHA (its 95% interval's lower end at most ALPHA). Standard library only.
"""
import math
import re
import signal
import sys
import time
import urllib.request

url, want, seconds, alpha, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
SERIES = re.compile(r'^(inferprobe_sampler_[a-z_]+)\{([^}]*)\} (\S+)$', re.M)
LABEL = re.compile(r'(\w+)="([^"]*)"')


def scrape():
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    rows = [(name, dict(LABEL.findall(labels)), float(v)) for name, labels, v in SERIES.findall(text)]
    return text, rows


def total(rows, name, **want_labels):
    return sum(v for n, l, v in rows if n == name and all(l.get(k) == w for k, w in want_labels.items()))


# SIGTERM or SIGINT: stop early and report what was reached.
stopped = []
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda *_: stopped.append(True))
seen = {}       # target -> windows counted at the last read
p_values = []
missed = 0
start = time.monotonic()
text, rows = "", []
last_print = 0.0
while True:
    try:
        text, rows = scrape()
    except OSError:
        time.sleep(0.5)
        if time.monotonic() - start > seconds:
            break
        continue
    for n, l, v in rows:
        if n != "inferprobe_sampler_calibration_p_value":
            continue
        target = l.get("target", "")
        windows = total(rows, "inferprobe_sampler_calibration_windows_total", target=target)
        before = seen.get(target, 0.0)
        if windows > before:
            p_values.append(v)
            missed += int(windows - before) - 1
            seen[target] = windows
    tokens = total(rows, "inferprobe_sampler_tokens_total")
    elapsed = time.monotonic() - start
    if elapsed - last_print >= 30:
        last_print = elapsed
        print(f"  {elapsed:5.0f}s: {tokens:.0f} tokens judged", flush=True)
    if tokens >= want or elapsed > seconds or stopped:
        break
    time.sleep(0.05)
elapsed = time.monotonic() - start
open(f"{out}/metrics.txt", "w").write(text)
open(f"{out}/p_values.txt", "w").write("".join(f"{p!r}\n" for p in p_values))


def by_result(name):
    results = {}
    for n, l, v in rows:
        if n == name:
            results[l.get("result", "")] = results.get(l.get("result", ""), 0.0) + v
    return results


def wilson(k, n, z=1.96):
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def ks_uniform(xs):
    """Kolmogorov-Smirnov against uniform on [0, 1]: D and its asymptotic p-value."""
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return 0.0, 1.0
    d = max(max((i + 1) / n - x, x - i / n) for i, x in enumerate(xs))
    t = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    p = 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * t * t) for k in range(1, 101))
    return d, min(1.0, max(0.0, p))


tokens = by_result("inferprobe_sampler_tokens_total")
rounds = by_result("inferprobe_sampler_checks_total")
windows = by_result("inferprobe_sampler_calibration_windows_total")
judged = sum(tokens.values())
n_windows = windows.get("ok", 0) + windows.get("miscalibrated", 0)
bad = windows.get("miscalibrated", 0)
low, high = wilson(bad, n_windows)
print(f"after {elapsed:.0f}s: {judged:.0f} sampled tokens judged: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(tokens.items())))
print("rounds: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(rounds.items())))
print(f"windows: {n_windows:.0f} ({', '.join(f'{k} {v:.0f}' for k, v in sorted(windows.items()))}); "
      f"false alarms at alpha {alpha}: {bad / max(n_windows, 1):.4f} (95% Wilson interval {low:.4f} to {high:.4f})")
d, p = ks_uniform(p_values)
share = lambda c: sum(x < c for x in p_values) / max(len(p_values), 1)
print(f"window p-values read: {len(p_values)} ({missed} closed between two reads, unseen); "
      f"below 0.01: {share(0.01):.4f}, below 0.05: {share(0.05):.4f}, below 0.5: {share(0.5):.4f}; "
      f"KS against uniform: D {d:.4f}, p {p:.3f}")
failed_rounds = {k: v for k, v in rounds.items() if v > 0 and k not in ("ok", "outside_support", "unscored")}
ok = tokens.get("outside_support", 0) == 0 and judged >= want and not failed_rounds and low <= alpha
print("PASS" if ok else "FAILED")
sys.exit(0 if ok else 1)
