#!/usr/bin/env python3
"""Writes the SLO groups of the shipped rules: `inferprobe-sli` in
config/prometheus/recording-rules.yml and `inferprobe-slo-alerts` in alerting-rules.yml.

Every threshold a target's `slo` can set (ttft, tpot, itl, e2el) and availability get the
same SLIs at the same windows and the same multi-window, multi-burn-rate alerts, so a
threshold cannot be accepted by the config and forgotten by the rules. Each group is the
text between its `  - name:` line and the next group's; the rest of each file is kept.

The budget window (`--window`, whole days, default 7d) is what the budget, its SLIs, its
coverage and InferprobeSLOWindowShort read: 7 days fit kube-prometheus-stack's default
retention of 10 days with the day the rules look back; 30d is for a Prometheus or a global
store keeping 31 days (docs/alerts.md, "Windows and retention"). The shipped files hold the
default; another window is written elsewhere (`--out`), or by the chart (`slo.window`) and
scripts/gen-prometheusrule.sh (`--slo-window`), which take these groups from here.

    python3 scripts/gen-slo-rules.py           # rewrite both files
    python3 scripts/gen-slo-rules.py --check   # exit 1 if either differs (tests/prometheus_rules.rs)
    python3 scripts/gen-slo-rules.py --window 30d --out DIR   # both files, at 30 days, in DIR
"""

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RECORDING = ROOT / "config/prometheus/recording-rules.yml"
ALERTING = ROOT / "config/prometheus/alerting-rules.yml"

# Windows read from the raw counters (a few hours of samples at most: any retention holds
# them) and windows summed from the recorded 5-minute rates (the slow burn's and the budget's):
# each evaluation of a 30-day ratio from raw counters read 30 days of every raw series (86,400 samples per series
# at a 30 s scrape), and silently read less where the Prometheus held less.
SHORT = ["5m", "30m", "1h", "2h", "6h", "1d"]
SLOW = "3d"
# The budget window by default: 7 days and the day InferprobeSLOWindowShort looks back fit
# the 10 days kube-prometheus-stack keeps; the chart offers these (values.schema.json).
DEFAULT_WINDOW = "7d"
CHART_WINDOWS = ["7d", "14d", "28d", "30d"]
# Below this share of the budget window covered by recorded rates (three days missing of
# 30), the budget is not over its window: unless the coverage still grows, it has no sample.
COVERAGE = "0.9"
# How long InferprobeSLOWindowShort stays once the coverage stopped short: it says so once
# and resolves (a standing alert re-notified at every repeat_interval, twice a day at 12h).
SAID_FOR = "6h"


def window_days(window):
    m = re.fullmatch(r"([1-9][0-9]*)d", window)
    if not m or not 4 <= int(m.group(1)) <= 90:
        raise ValueError(f"--window {window!r}: whole days from 4d (longer than the slow burn's "
                         "3d) to 90d")
    return int(m.group(1))

# (slo label value, histogram, alert name part, what is slow, over whose count)
LATENCIES = [
    ("ttft", "inferprobe_time_to_first_token_seconds", "TTFT",
     "successful probes had a TTFT over the threshold"),
    ("tpot", "inferprobe_time_per_output_token_seconds", "TPOT",
     "successful probes had a TPOT over the threshold"),
    ("itl", "inferprobe_inter_token_latency_seconds", "ITL",
     "gaps between tokens were over the ITL threshold"),
    ("e2el", "inferprobe_e2e_request_latency_seconds", "E2EL",
     "successful probes took longer end to end than the threshold"),
]

# Fast burns page, slow burns open a ticket (the SRE workbook's four pairs).
BURNS = [
    ("Fast", "2m", "critical", [("14.4", "1h", "5m"), ("6", "6h", "30m")],
     "14.4x (1h) or 6x (6h)", "in a sixth of its window or less"),
    ("Slow", "15m", "warning", [("3", "1d", "2h"), ("1", "3d", "6h")],
     "3x (1d) or 1x (3d)", "within its window"),
]


def sli_group():
    out = ["  - name: inferprobe-sli", "    interval: 30s", "    rules:"]
    out += [
        "      # The objective per target: only a target that declares an `slo` has one (its",
        "      # objective, 0.99 unless set). A target without is held to no budget, so no",
        "      # budget-burn alert can fire for it (docs/alerts.md); InferprobeTargetDown still",
        "      # pages when it is down.",
        "      - record: inferprobe:slo_objective",
        "        expr: max by (cluster, target) (inferprobe_slo_objective)",
        "      # The error budget as a ratio: 1 - objective.",
        "      - record: inferprobe:error_budget:ratio",
        "        expr: 1 - inferprobe:slo_objective",
    ]
    for w in SHORT:
        out += [
            f"      - record: inferprobe:sli_errors:ratio_rate{w}",
            "        expr: |",
            f"          sum by (cluster, target) (rate(inferprobe_request_errors_total[{w}]))",
            "          /",
            f"          sum by (cluster, target) (rate(inferprobe_requests_total[{w}]))",
        ]
    for slo, _, _, _ in LATENCIES:
        out += [
            f"      # {slo}: the share of observations over the threshold, from the SLI counters the",
            "      # daemon keeps per threshold (exact, and the same whether the histograms are",
            "      # classic or native: docs/metrics.md); a target without this threshold has none.",
        ]
        for w in SHORT:
            out += [
                f"      - record: inferprobe:sli_{slo}_slow:ratio_rate{w}",
                "        expr: |",
                f'          sum by (cluster, target) (rate(inferprobe_slo_slow_observations_total{{slo="{slo}"}}[{w}]))',
                "          /",
                f'          sum by (cluster, target) (rate(inferprobe_slo_observations_total{{slo="{slo}"}}[{w}]))',
            ]
    out += [
        "      # The 3-day and the budget windows are in the groups below, from recorded 5-minute rates.",
    ]
    return "\n".join(out) + "\n"


def rates_group():
    """Numerators and denominators per target at 5 minutes, evaluated every 5 minutes."""
    out = ["  - name: inferprobe-sli-rate5m", "    interval: 5m", "    rules:"]
    out += [
        "      # Each SLI's numerator and denominator per target over 5 minutes, evaluated every",
        "      # 5 minutes: the windows tile time, each interval counted once, so a sum over them",
        "      # is a long window's count (over 300 s), whatever the probe rate did meanwhile.",
        "      # The 3-day and budget-window SLIs sum these (inferprobe-sli-3d, -long), never raw samples:",
        "      # they are few (four per target and threshold) and cheap to keep for months in a",
        "      # global or long-term store while the cluster's Prometheus keeps raw samples for",
        "      # days (docs/alerts.md, \"Retention\"). Keep the interval at 5m: the sums and",
        "      # inferprobe:sli_window_coverage:ratio count on it.",
        "      - record: inferprobe:sli_requests:rate5m",
        "        expr: sum by (cluster, target) (rate(inferprobe_requests_total[5m]))",
        "      - record: inferprobe:sli_errors:rate5m",
        "        expr: sum by (cluster, target) (rate(inferprobe_request_errors_total[5m]))",
        "      - record: inferprobe:sli_observations:rate5m",
        "        expr: sum by (cluster, target, slo) (rate(inferprobe_slo_observations_total[5m]))",
        "      - record: inferprobe:sli_slow_observations:rate5m",
        "        expr: sum by (cluster, target, slo) (rate(inferprobe_slo_slow_observations_total[5m]))",
        "      # The daemons reporting per site, for InferprobeNoData's \"a site gone\": a day of this",
        "      # is 288 samples a site, where a day of every daemon's inferprobe_build_info was 2,880",
        "      # a daemon at a 30 s scrape.",
        "      - record: inferprobe:daemons:count",
        "        expr: count by (cluster) (inferprobe_build_info)",
    ]
    return "\n".join(out) + "\n"


def long_sums(windows):
    """The SLIs over `windows`: sums of the recorded 5-minute rates, numerator over
    denominator (never a mean of ratios: an interval with more probes weighs more)."""
    out = []
    for w in windows:
        out += [
            f"      - record: inferprobe:sli_errors:ratio_rate{w}",
            "        expr: |",
            f"          sum_over_time(inferprobe:sli_errors:rate5m[{w}])",
            "          /",
            f"          sum_over_time(inferprobe:sli_requests:rate5m[{w}])",
        ]
    for slo, _, _, _ in LATENCIES:
        for w in windows:
            out += [
                f"      - record: inferprobe:sli_{slo}_slow:ratio_rate{w}",
                "        expr: |",
                f'          sum by (cluster, target) (sum_over_time(inferprobe:sli_slow_observations:rate5m{{slo="{slo}"}}[{w}]))',
                "          /",
                f'          sum by (cluster, target) (sum_over_time(inferprobe:sli_observations:rate5m{{slo="{slo}"}}[{w}]))',
            ]
    return out


# The long groups' interval: the recorded rates change every 5 minutes, and a record written
# less often than the 5-minute lookback would sometimes be missing to the alerts reading it
# (resetting a `for:`); every 2 minutes reads each window of rates 2.5 times per change,
# not 5.
LONG_INTERVAL = "2m"


def three_day_group():
    """The slow burn's 3-day SLIs: in the cluster's own Prometheus, beside the alerts."""
    out = ["  - name: inferprobe-sli-3d", f"    interval: {LONG_INTERVAL}", "    rules:"]
    out += [
        "      # The slow burn's 3-day window, summed from the recorded 5-minute rates. Runs where",
        "      # the burn-rate alerts run (the cluster's Prometheus): 3 days fit any retention a",
        "      # cluster keeps (kube-prometheus-stack's default is 10).",
    ]
    out += long_sums([SLOW])
    return "\n".join(out) + "\n"


def long_group(window):
    """The SLIs over the budget window, how much of it the data covers, whether that is short
    for good, and the budget left: where the window and a day of the recorded rates are kept
    (docs/alerts.md, "Retention")."""
    days = window_days(window)
    out = ["  - name: inferprobe-sli-long", f"    interval: {LONG_INTERVAL}", "    rules:"]
    out += [
        f"      # The budget window, {window}. Needs {days + 1} days of the recorded rates (the window and",
        "      # the day the rules look back) and inferprobe:error_budget:ratio where it runs: the",
        "      # cluster's Prometheus if it keeps them, else a global store (docs/alerts.md,",
        "      # \"Retention\"), with inferprobe-slo-window beside it. The window is",
        "      # scripts/gen-slo-rules.py --window (the chart's slo.window); the coverage, the",
        "      # short window and the budget carry it as the label slo_window.",
    ]
    out += long_sums([window])
    sel = f'{{slo_window="{window}"}}'
    out += [
        f"      # How much of the {window} window the recorded rates cover (1: all of it). Less where",
        "      # this Prometheus holds less (its retention), where the target is new, or where",
        "      # rates are missing (Prometheus down).",
        "      - record: inferprobe:sli_window_coverage:ratio",
        f"        expr: clamp_max(count_over_time(inferprobe:sli_requests:rate5m[{window}]) / {days * 24 * 12}, 1)",
        "        labels:",
        f"          slo_window: {window}",
        f"      # The coverage where it is short for good: under {COVERAGE}, and grown by less than half a",
        f"      # day's share (1/{2 * days}) since a day ago. A Prometheus keeping less than the window",
        "      # holds it there (10 days of 30: about a third, for ever), as does a gap of days",
        "      # until it leaves the window; a new target, a new Prometheus or these rules' first",
        "      # day (no coverage a day ago) grow and are not short. \"A day ago\" is the last",
        "      # coverage recorded in the day before: a Prometheus down a day ago (a restart, an",
        "      # upgrade) would otherwise read as no coverage then, and show the short budget.",
        "      - record: inferprobe:sli_window_short:ratio",
        "        expr: |",
        f"          inferprobe:sli_window_coverage:ratio{sel} < {COVERAGE}",
        "          and on (cluster, target)",
        "          (",
        f"            inferprobe:sli_window_coverage:ratio{sel}",
        "            - on (cluster, target)",
        f"            last_over_time(inferprobe:sli_window_coverage:ratio{sel}[1d] offset 1d)",
        f"          ) < 1 / {2 * days}",
        "        labels:",
        f"          slo_window: {window}",
        f"      # What is left of the {window} error budget (1 = untouched, 0 = spent, < 0 = overspent).",
        "      # No sample where the window is short for good: a budget over a third of its window",
        "      # is another window's budget under this one's name (issue 56: 0.97 where the truth",
        "      # was -1.24), so nothing is shown rather than a wrong number.",
        "      - record: inferprobe:error_budget_remaining:ratio",
        "        expr: |",
        f"          1 - inferprobe:sli_errors:ratio_rate{window} / on (cluster, target) inferprobe:error_budget:ratio",
        f"          unless on (cluster, target) inferprobe:sli_window_short:ratio{sel}",
        "        labels:",
        f"          slo_window: {window}",
    ]
    return "\n".join(out) + "\n"


def window_alert_group(window):
    name = "InferprobeSLOWindowShort"
    sel = f'{{slo_window="{window}"}}'
    out = ["  - name: inferprobe-slo-window", "    interval: 5m", "    rules:"]
    out += [
        f"      # The {window} budget window is short for good (inferprobe:sli_window_short:ratio): its",
        "      # budget has no sample. Said once, for the first hours, then resolved: a standing",
        "      # alert at a retention shorter than the window fired for ever, re-notified at every",
        "      # repeat_interval (twice a day at kube-prometheus-stack's 12h). Quiet again while the",
        "      # window was short in the day before (a coverage crossing 0.9 as blocks are deleted",
        f"      # says it once). Run this group where inferprobe-sli-long runs.",
        f"      - alert: {name}",
        "        expr: |",
        f"          inferprobe:sli_window_short:ratio{sel}",
        "          unless on (cluster, target)",
        f"          max_over_time(inferprobe:sli_window_short:ratio{sel}[1d] offset {SAID_FOR})",
        "          # A target with a budget, now: one removed or renamed keeps a coverage that",
        "          # no longer grows, and a target without an slo has no budget.",
        "          and on (cluster, target)",
        "          inferprobe:error_budget:ratio",
        "        for: 1h",
        "        labels:",
        "          severity: warning",
        "        annotations:",
        f'          runbook_url: "https://github.com/inferprobe/inferprobe/blob/main/docs/alerts.md#{name.lower()}"',
        f'          summary: "The {window} error budget of {{{{ $labels.target }}}}{{{{ with $labels.cluster }}}} in {{{{ . }}}}{{{{ else }}}}{{{{ with $externalLabels.cluster }}}} in {{{{ . }}}}{{{{ end }}}}{{{{ end }}}} is not shown: its data covers {{{{ $value | humanizePercentage }}}} of the window."',
        f'          description: "The recorded 5-minute rates of {{{{ $labels.target }}}} cover {{{{ $value | humanizePercentage }}}} of the last {window}, and no more than a day ago: this Prometheus keeps less than the window (its retention), or lost days of data. The budget left has no sample until they cover 90% or grow again; the dashboards show the coverage. This alert resolves after {SAID_FOR} and is not repeated while the window stays short. Choose a window this Prometheus holds with a day to spare (the chart\'s slo.window, scripts/gen-slo-rules.py --window), raise the retention, or evaluate inferprobe-sli-long where the recorded rates are kept for the window and a day (docs/alerts.md, Retention)."',
    ]
    return "\n".join(out) + "\n"


def alert(name, sli, slo_label, subject, verb, what):
    out = []
    for speed, for_, severity, pairs, rates, when in BURNS:
        alert_name = f"Inferprobe{name}BudgetBurn{speed}"
        expr = []
        for i, (factor, long, short) in enumerate(pairs):
            if i:
                expr.append("          or")
            expr += [
                "          (",
                f"            inferprobe:{sli}:ratio_rate{long} > on (cluster, target) ({factor} * inferprobe:error_budget:ratio)",
                "            and",
                f"            inferprobe:{sli}:ratio_rate{short} > on (cluster, target) ({factor} * inferprobe:error_budget:ratio)",
                "          )",
            ]
        out += [
            f"      - alert: {alert_name}",
            "        expr: |",
            *expr,
            f"        for: {for_}",
            "        labels:",
            f"          severity: {severity}",
            f"          slo: {slo_label}",
            "        annotations:",
            f'          runbook_url: "https://github.com/inferprobe/inferprobe/blob/main/docs/alerts.md#{alert_name.lower()}"',
            f'          summary: "{subject} of {{{{ $labels.target }}}}{{{{ with $labels.cluster }}}} in {{{{ . }}}}{{{{ else }}}}{{{{ with $externalLabels.cluster }}}} in {{{{ . }}}}{{{{ end }}}}{{{{ end }}}} {verb} fast enough to spend the error budget {when}."',
            f'          description: "{{{{ $value | humanizePercentage }}}} of {what} over the long window: more than {rates} the rate the SLO allows."',
        ]
    return out


def alerts_group():
    out = ["  - name: inferprobe-slo-alerts", "    rules:"]
    out += alert("Error", "sli_errors", "availability", "Probes", "fail", "probes failed")
    for slo, _, name, what in LATENCIES:
        subject = f"{name}"
        out += alert(name, f"sli_{slo}_slow", slo, subject, "is over its threshold", what)
    return "\n".join(out) + "\n"


def splice(text, name, group, after):
    """`text` with group `name` replaced by `group`, or put after group `after` if missing."""
    if f"  - name: {name}\n" not in text:
        start = text.index(f"  - name: {after}\n")
        rest = text.find("\n  - name: ", start + 1)
        end = len(text) if rest < 0 else rest + 1
        return text[:end] + group + text[end:]
    start = text.index(f"  - name: {name}\n")
    rest = text.find("\n  - name: ", start + 1)
    end = len(text) if rest < 0 else rest + 1
    return text[:start] + group + text[end:]


def groups(window):
    """{file: [(group name, text, the group it follows if missing)]} at `window`."""
    return {
        RECORDING: [("inferprobe-sli", sli_group(), None),
                    ("inferprobe-sli-rate5m", rates_group(), "inferprobe-sli"),
                    ("inferprobe-sli-3d", three_day_group(), "inferprobe-sli-rate5m"),
                    ("inferprobe-sli-long", long_group(window), "inferprobe-sli-3d")],
        ALERTING: [("inferprobe-slo-alerts", alerts_group(), None),
                   ("inferprobe-slo-window", window_alert_group(window), "inferprobe-slo-alerts")],
    }


def render(window):
    """{file: the shipped file's text with the SLO groups at `window`}."""
    out = {}
    for path, gs in groups(window).items():
        new = path.read_text()
        for name, group, after in gs:
            new = splice(new, name, group, after)
        out[path] = new
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a shipped file differs")
    parser.add_argument("--window", default=DEFAULT_WINDOW,
                        help=f"the budget window, whole days (default {DEFAULT_WINDOW})")
    parser.add_argument("--out", type=pathlib.Path,
                        help="write recording-rules.yml and alerting-rules.yml here instead")
    args = parser.parse_args()
    try:
        window_days(args.window)
    except ValueError as e:
        parser.error(str(e))
    if args.window != DEFAULT_WINDOW and args.out is None:
        parser.error(f"the shipped files hold the default window {DEFAULT_WINDOW}: "
                     f"write --window {args.window} elsewhere with --out DIR")
    if args.check and args.out is not None:
        parser.error("--check compares the shipped files: no --out")
    stale = []
    for path, new in render(args.window).items():
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / path.name).write_text(new)
            continue
        if new != path.read_text():
            stale.append(str(path.relative_to(ROOT)))
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        sys.exit(f"{', '.join(stale)}: out of date; run python3 scripts/gen-slo-rules.py")


if __name__ == "__main__":
    main()
