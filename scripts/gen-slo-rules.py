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

WINDOWS = ["5m", "30m", "1h", "2h", "6h", "1d", "3d", "30d"]

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
    for w in WINDOWS:
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
        for w in WINDOWS:
            out += [
                f"      - record: inferprobe:sli_{slo}_slow:ratio_rate{w}",
                "        expr: |",
                f'          sum by (cluster, target) (rate(inferprobe_slo_slow_observations_total{{slo="{slo}"}}[{w}]))',
                "          /",
                f'          sum by (cluster, target) (rate(inferprobe_slo_observations_total{{slo="{slo}"}}[{w}]))',
            ]
    out += [
        "      # What is left of the 30-day error budget (1 = untouched, 0 = spent, < 0 = overspent).",
        "      - record: inferprobe:error_budget_remaining:ratio",
        "        expr: |",
        "          1 - inferprobe:sli_errors:ratio_rate30d / on (cluster, target) inferprobe:error_budget:ratio",
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
            f'          summary: "{subject} of {{{{ $labels.target }}}}{{{{ with $labels.cluster }}}} in {{{{ . }}}}{{{{ end }}}} {verb} fast enough to spend the error budget {when}."',
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


def splice(path, name, group):
    text = path.read_text()
    start = text.index(f"  - name: {name}\n")
    rest = text.find("\n  - name: ", start + 1)
    end = len(text) if rest < 0 else rest + 1
    return text[:start] + group + text[end:]


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit(f"usage: {sys.argv[0]} [--check]")
    stale = []
    for path, name, group in [
        (RECORDING, "inferprobe-sli", sli_group()),
        (ALERTING, "inferprobe-slo-alerts", alerts_group()),
    ]:
        new = splice(path, name, group)
        if new != path.read_text():
            stale.append(str(path.relative_to(ROOT)))
            if not check:
                path.write_text(new)
    if check and stale:
        sys.exit(f"{', '.join(stale)}: out of date; run python3 scripts/gen-slo-rules.py")


if __name__ == "__main__":
    main()
