#!/usr/bin/env python3
"""Writes the SLO groups of the shipped rules: `inferprobe-sli` in
config/prometheus/recording-rules.yml and `inferprobe-slo-alerts` in alerting-rules.yml.

Every threshold a target's `slo` can set (ttft, tpot, itl, e2el) and availability get the
same SLIs at the same windows and the same multi-window, multi-burn-rate alerts, so a
threshold cannot be accepted by the config and forgotten by the rules. Each group is the
text between its `  - name:` line and the next group's; the rest of each file is kept.

    python3 scripts/gen-slo-rules.py           # rewrite both files
    python3 scripts/gen-slo-rules.py --check   # exit 1 if either differs (tests/prometheus_rules.rs)
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RECORDING = ROOT / "config/prometheus/recording-rules.yml"
ALERTING = ROOT / "config/prometheus/alerting-rules.yml"

# Windows read from the raw counters (a few hours of samples at most: any retention holds
# them) and windows summed from the recorded 5-minute rates (LONG): each evaluation of a
# 30-day ratio from raw counters read 30 days of every raw series (86,400 samples per series
# at a 30 s scrape), and silently read less where the Prometheus held less.
SHORT = ["5m", "30m", "1h", "2h", "6h", "1d"]
LONG = ["3d", "30d"]
WINDOWS = SHORT + LONG
# The budget window, and how many 5-minute intervals it has.
BUDGET = "30d"
INTERVALS = 30 * 24 * 12
# Below this share of the budget window covered by recorded rates (three days missing of
# 30), InferprobeSLOWindowShort says the budget is not over 30 days.
COVERAGE = "0.9"

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
     "14.4x (1h) or 6x (6h)", "in days"),
    ("Slow", "15m", "warning", [("3", "1d", "2h"), ("1", "3d", "6h")],
     "3x (1d) or 1x (3d)", "within the month"),
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
        "      # The 3-day and 30-day windows are in the groups below, from recorded 5-minute rates.",
    ]
    return "\n".join(out) + "\n"


def rates_group():
    """Numerators and denominators per target at 5 minutes, evaluated every 5 minutes."""
    out = ["  - name: inferprobe-sli-rate5m", "    interval: 5m", "    rules:"]
    out += [
        "      # Each SLI's numerator and denominator per target over 5 minutes, evaluated every",
        "      # 5 minutes: the windows tile time, each interval counted once, so a sum over them",
        "      # is a long window's count (over 300 s), whatever the probe rate did meanwhile.",
        "      # The 3-day and 30-day SLIs sum these (inferprobe-sli-3d, -long), never raw samples:",
        "      # they are few (four per target and threshold) and cheap to keep for months in a",
        "      # global or long-term store while the cluster's Prometheus keeps raw samples for",
        "      # days (docs/alerts.md, \"Retention\"). Keep the interval at 5m: the sums and",
        "      # inferprobe:sli_window_coverage:ratio30d count on it.",
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
# (resetting a `for:`); every 2 minutes reads each 30 days of rates 2.5 times per change,
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
    out += long_sums(LONG[:1])
    return "\n".join(out) + "\n"


def long_group():
    """The 30-day SLIs, the budget left and how much of its window the data covers: where
    31 days of the recorded rates are kept (docs/alerts.md, "Retention")."""
    out = ["  - name: inferprobe-sli-long", f"    interval: {LONG_INTERVAL}", "    rules:"]
    out += [
        "      # The budget window. Needs 31 days of the recorded rates and inferprobe:error_budget:ratio",
        "      # where it runs: the cluster's Prometheus if it keeps them, else a global store",
        "      # (docs/alerts.md, \"Retention\"), with inferprobe-slo-window beside it.",
    ]
    out += long_sums(LONG[1:])
    out += [
        f"      # How much of the {BUDGET} budget window the recorded rates cover (1: all of it). Less",
        "      # where this Prometheus holds less (its retention), where the target is new, or",
        "      # where rates are missing (Prometheus down); the budget is then over that share.",
        "      - record: inferprobe:sli_window_coverage:ratio30d",
        f"        expr: clamp_max(count_over_time(inferprobe:sli_requests:rate5m[{BUDGET}]) / {INTERVALS}, 1)",
        "      # What is left of the 30-day error budget (1 = untouched, 0 = spent, < 0 = overspent).",
        "      - record: inferprobe:error_budget_remaining:ratio",
        "        expr: |",
        "          1 - inferprobe:sli_errors:ratio_rate30d / on (cluster, target) inferprobe:error_budget:ratio",
    ]
    return "\n".join(out) + "\n"


def window_alert_group():
    name = "InferprobeSLOWindowShort"
    out = ["  - name: inferprobe-slo-window", "    interval: 5m", "    rules:"]
    out += [
        "      # The 30-day budget (and the 3-day slow burn) are over less than their window: the",
        f"      # recorded rates cover under {COVERAGE} of 30 days, and no more than a day ago (a new",
        "      # target's coverage grows a day a day and stays quiet; a retention of 10 days keeps",
        "      # it at a third for ever). Run this group where inferprobe-sli-long runs.",
        f"      - alert: {name}",
        "        expr: |",
        f"          inferprobe:sli_window_coverage:ratio30d < {COVERAGE}",
        "          and on (cluster, target)",
        "          (",
        "            inferprobe:sli_window_coverage:ratio30d",
        "            - on (cluster, target)",
        "            inferprobe:sli_window_coverage:ratio30d offset 1d",
        "          ) < 1 / 60",
        "          # A target with a budget, now: one removed or renamed keeps a coverage that",
        "          # no longer grows for 30 days, and a target without an slo has no budget.",
        "          and on (cluster, target)",
        "          inferprobe:error_budget:ratio",
        "        for: 1h",
        "        labels:",
        "          severity: warning",
        "        annotations:",
        f'          runbook_url: "https://github.com/inferprobe/inferprobe/blob/main/docs/alerts.md#{name.lower()}"',
        '          summary: "The 30-day error budget of {{ $labels.target }}{{ with $labels.cluster }} in {{ . }}{{ else }}{{ with $externalLabels.cluster }} in {{ . }}{{ end }}{{ end }} is over {{ $value | humanizePercentage }} of its window."',
        '          description: "The recorded 5-minute rates of {{ $labels.target }} cover {{ $value | humanizePercentage }} of the last 30 days, no more than a day ago: this Prometheus holds less than the budget window (its retention), or lost data. The budget, the 30-day SLIs and (below 10%) the 3-day slow burn are over that share alone. Evaluate the inferprobe-sli-long group where the recorded rates are kept for 31 days (a global Prometheus, Thanos, Mimir), or raise the retention (docs/alerts.md, Retention)."',
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


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit(f"usage: {sys.argv[0]} [--check]")
    stale = []
    for path, groups in [
        (RECORDING, [("inferprobe-sli", sli_group(), None),
                     ("inferprobe-sli-rate5m", rates_group(), "inferprobe-sli"),
                     ("inferprobe-sli-3d", three_day_group(), "inferprobe-sli-rate5m"),
                     ("inferprobe-sli-long", long_group(), "inferprobe-sli-3d")]),
        (ALERTING, [("inferprobe-slo-alerts", alerts_group(), None),
                    ("inferprobe-slo-window", window_alert_group(), "inferprobe-slo-alerts")]),
    ]:
        new = path.read_text()
        for name, group, after in groups:
            new = splice(new, name, group, after)
        if new != path.read_text():
            stale.append(str(path.relative_to(ROOT)))
            if not check:
                path.write_text(new)
    if check and stale:
        sys.exit(f"{', '.join(stale)}: out of date; run python3 scripts/gen-slo-rules.py")


if __name__ == "__main__":
    main()
