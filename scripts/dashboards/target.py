"""The inferprobe / Target dashboard: one probed endpoint in depth: latency heatmaps and
percentiles, errors, SLO budget and burn rates, a per-node comparison, and, for a discovered
target, its replicas one by one."""

from .grafana import (BUDGET_LEFT, BURN_RATE, DASHED, RED, STALENESS, SUCCESS, UNFILLED,
                      dashboard, heatmap_panel, merged, override, query, reference_line, row,
                      seconds, series, stat, table, timeseries)
from .promql import (E2EL_SECONDS, ERRORS, HAS_POD, LATENCIES, RATE, REQUESTS, SITE,
                     SITE_MATCH, TPOT_SECONDS, TTFT_SECONDS, burn_rate, heatmap, mean,
                     per_probe, quantile, recorded, sel, since_last_success, success_ratio,
                     summed)

DASHBOARD = dashboard(
    uid="inferprobe-target",
    title="inferprobe / Target",
    description="One probed endpoint in depth: latency heatmaps and percentiles, errors, SLO "
    "budget and burn rates, a per-node comparison, and, for a discovered target, its replicas "
    "one by one.",
    one_target=True,
)

PERCENTILES = [(0.5, "p50"), (0.9, "p90"), (0.99, "p99")]
POD = 'pod=~"$pod"'
# The server's own series of the replicas picked, its model_name matched against $model.
SERVER = f'{{{SITE_MATCH}, {POD}, model_name=~"$model"}}'
REPLICA = f"{SITE}, namespace, pod"
REPLICA_NODE = ("namespace", "pod", "node")
# A replica's probes over the whole time range picked, for a table that ranks the replicas.
OVER_RANGE = {"fn": "increase", "window": "$__range", "extra": (HAS_POD,)}
# Keeps a server series only where the probe has a replica of the targets picked.
PROBED = f"and on ({REPLICA}) max by ({REPLICA}) (inferprobe_requests_total{sel()})"
# How the probe-vs-server panels match the two sides, as each of them says.
JOINED = (
    "Server series are joined to the probe's replicas on (cluster, namespace, pod): the pod and "
    "namespace discovery put on the probe's series, the server's from its own scrape (the pod's "
    "Prometheus target labels), and the server's model_name against $model."
)


def latency_heatmap(name, grid, unit="reqps"):
    """A latency's distribution over time, on its classic bucket bounds."""
    metric, what = LATENCIES[name]
    return heatmap_panel(
        f"{name} heatmap", grid,
        f"Distribution of {what} over time, on the classic bucket bounds (successful probes "
        "only): each cell is the rate of observations that fell in that bucket, native series "
        "converted to those bounds (an estimate within a native bucket). Buckets equal vLLM's "
        "server-side ones. Exemplars (with OpenMetrics exemplar storage enabled) carry the "
        "request id of a probe in the bucket.",
        query(heatmap(metric), "{{le}}", fmt="heatmap", exemplar=True), unit, y_unit="s",
    )


def percentiles(name, grid, slo=None):
    """A latency's p50, p90 and p99, and (`slo`) the target's threshold for it, dashed."""
    metric, what = LATENCIES[name]
    description = (f"p50, p90 and p99 of {what}, from the histogram buckets summed over the "
                   "selected nodes.")
    targets = [(quantile(q, metric, "target"), f"{p} {{{{histograms}}}}") for q, p in PERCENTILES]
    overrides = None
    if slo:
        matcher = f'slo="{slo}"'
        description += (f" The dashed line is the target's {name} SLO threshold "
                        f"(inferprobe_slo_threshold_seconds{{{matcher}}}), absent without one.")
        targets.append((f"max by ({SITE}, target) (inferprobe_slo_threshold_seconds"
                        f"{sel(matcher)})", "SLO threshold"))
        overrides = [reference_line("SLO threshold")]
    return timeseries(f"{name} percentiles", grid, description, seconds(), *targets,
                      overrides=overrides)


def burn(name, sli, x):
    """How fast an SLI spends the error budget, over the four windows of the burn alerts."""
    return timeseries(
        f"{name} burn rate", (x, 69, 8, 8),
        f"How fast the {name} SLI spends the error budget: the SLI ratio "
        f"(inferprobe:sli_{sli}:ratio_rate<window>) divided by the budget "
        "(inferprobe:error_budget:ratio) at 5m, 1h, 6h, 3d. 1 spends exactly the budget in its "
        "window; the lines at 6 and 14.4 are the usual slow and fast burn alert thresholds.",
        series("short", steps=BURN_RATE, lines=True),
        *((burn_rate(sli, w), w) for w in ["5m", "1h", "6h", "3d"]),
    )


def p99_by_node(title, grid, description, metric):
    """A latency's p99 as each node (probe pod) sees the endpoint."""
    return timeseries(title, grid, description, seconds(),
                      (quantile(0.99, metric, "node"), "{{node}} {{histograms}}"))


def replica_error_ratio(*labels, window=RATE):
    """Failed over all probes per replica over `window`: 0, not absent, where none failed."""
    errors, probes = (summed(m, *labels, fn="increase", window=window, extra=(HAS_POD,))
                      for m in (ERRORS, REQUESTS))
    return f"(\n  {errors}\n  or\n  {probes} * 0\n)\n/\n{probes}"


def server_mean(metric):
    """The server's mean of the histogram `metric` per replica."""
    return (f"(sum by ({REPLICA}) (rate({metric}_sum{SERVER}[{RATE}])) / "
            f"sum by ({REPLICA}) (rate({metric}_count{SERVER}[{RATE}])))")


def server_median(vllm, sglang):
    """The server's median of `vllm`, or of `sglang`, per replica the probe has."""
    return " or ".join(
        f"histogram_quantile(0.5, sum by ({REPLICA}, le) (rate({m}_bucket{SERVER}[{RATE}])) "
        f"{PROBED})"
        for m in (vllm, sglang)
    )


def probe_vs_server(name, grid, description, metric, vllm, sglang):
    """A latency's median per replica as the probe saw it, beside the server's own."""
    return timeseries(
        f"{name} p50: probe vs server", grid, f"{description} {JOINED}", seconds("seconds"),
        (quantile(0.5, metric, "namespace", "pod"), "{{pod}} probe {{histograms}}"),
        (server_median(vllm, sglang), "{{pod}} server"),
    )


PANELS = [
    row("Summary", 0, panels=[]),
    stat("Success ratio", (0, 1, 4, 5),
         "1 - errors / requests over the last rate interval (all selected nodes).",
         "percentunit", (success_ratio("target"), "{{target}}"), SUCCESS, decimals=2),
    stat("Probe rate", (4, 1, 4, 5), "Probes finished per second (all selected nodes).",
         "reqps", (summed(REQUESTS, "target"), "{{target}}"), decimals=2),
    stat("TTFT p99", (8, 1, 4, 5),
         "99th percentile of time to first token over the last rate interval, from the "
         "histogram buckets.",
         "s", (quantile(0.99, TTFT_SECONDS, "target"), "{{target}} {{histograms}}")),
    stat("E2EL p99", (12, 1, 4, 5),
         "99th percentile of end-to-end latency over the last rate interval, from the histogram "
         "buckets.",
         "s", (quantile(0.99, E2EL_SECONDS, "target"), "{{target}} {{histograms}}")),
    stat("Error budget remaining ($slo_window)", (16, 1, 4, 5),
         "What is left of the error budget over its window, $slo_window "
         "(inferprobe:error_budget_remaining:ratio, all nodes): 100% untouched, 0% spent, "
         "negative overspent. No value while the data covers less than 90% of the window and no "
         "longer grows (a Prometheus keeping less than the window): the SLO row's budget panel "
         "shows the share covered.",
         "percentunit",
         # Instant: no value where the rules give none (see the overview's budget panel).
         query(recorded("inferprobe:error_budget_remaining:ratio"), "{{target}}", instant=True),
         BUDGET_LEFT, decimals=1),
    stat("Time since last success", (20, 1, 4, 5),
         "Seconds since the last successful probe on any selected node.",
         "s", (since_last_success(), "{{target}}"), STALENESS, decimals=0),

    row("Latency distribution", 6, panels=[]),
    latency_heatmap("TTFT", (0, 7, 12, 9)),
    latency_heatmap("TPOT", (12, 7, 12, 9)),
    # One observation per token gap, not per probe.
    latency_heatmap("ITL", (0, 16, 12, 9), unit="ops"),
    latency_heatmap("E2EL", (12, 16, 12, 9)),

    row("Latency percentiles", 25, panels=[]),
    percentiles("TTFT", (0, 26, 12, 8), slo="ttft"),
    percentiles("TPOT", (12, 26, 12, 8), slo="tpot"),
    percentiles("ITL", (0, 34, 12, 8)),
    percentiles("E2EL", (12, 34, 12, 8)),

    row("Errors", 42, panels=[]),
    timeseries(
        "Errors by category", (0, 43, 12, 9),
        "Failed probes per second by error category (stacked). Every failure lands in exactly "
        "one category; the daemon's log line for each failure names its request id and cause.",
        series("reqps", stacked=True), (summed(ERRORS, "category"), "{{category}}"),
    ),
    table(
        "Error categories", (12, 43, 12, 9),
        "One row per error category over the dashboard's time range: the mean, peak and latest "
        "failure rate (probes per second). Sort by a column to find the dominant failure.",
        "reqps", (summed(ERRORS, "category"), "{{category}}"),
        transformations=[
            {"id": "reduce", "options": {"reducers": ["mean", "max", "lastNotNull"],
                                         "mode": "seriesToRows", "includeTimeField": False}},
            {"id": "organize", "options": {"renameByName": {"Field": "Category"}}},
            {"id": "sortBy", "options": {"sort": [{"field": "Mean", "desc": True}]}},
        ],
    ),
    timeseries(
        "Error ratio", (0, 52, 12, 8),
        "Failed probes / finished probes, against the error budget (1 - objective). Above the "
        "budget line the availability SLO is burning faster than allowed.",
        series("percentunit"),
        (per_probe(ERRORS), "error ratio"),
        (recorded("inferprobe:error_budget:ratio"), "error budget"),
        overrides=[reference_line("error budget")],
    ),
    timeseries(
        "Skipped probes by reason", (12, 52, 12, 8),
        "Arrivals not sent, per second: concurrency = max_concurrency probes were in flight; "
        "budget = max_output_tokens_per_hour spent.",
        series("reqps", stacked=True),
        (summed("inferprobe_requests_skipped_total", "reason"), "{{reason}}"),
    ),

    row("SLO", 60, panels=[]),
    stat("Objective", (0, 61, 4, 8),
         "The target's SLO objective (inferprobe:slo_objective: the configured one, else 99%).",
         "percentunit", (recorded("inferprobe:slo_objective"), "{{target}}"), decimals=2),
    timeseries(
        "Error budget remaining ($slo_window)", (4, 61, 8, 8),
        "inferprobe:error_budget_remaining:ratio over time: 1 - (error ratio over the budget "
        "window, $slo_window, / error budget). Below 0 the budget is overspent. 'window "
        "covered' is the share of the window the data behind it covers "
        "(inferprobe:sli_window_coverage:ratio): under 100% the budget is over that share alone "
        "(a new target), and under 90% without growing it has no value (a Prometheus keeping "
        "less than the window, days of data lost; InferprobeSLOWindowShort).",
        series("percentunit", min=None, steps=BUDGET_LEFT, lines=True),
        (recorded("inferprobe:error_budget_remaining:ratio"), "{{target}}"),
        (recorded("inferprobe:sli_window_coverage:ratio"), "{{target}} window covered"),
    ),
    timeseries(
        "SLIs (1h)", (12, 61, 12, 8),
        "The SLIs over the last hour, from the recording rules: the fraction of probes that "
        "failed, and the fractions of successful probes slower than the TTFT and TPOT thresholds "
        "(absent without that threshold).",
        series("percentunit"),
        (recorded("inferprobe:sli_errors:ratio_rate1h"), "errors"),
        (recorded("inferprobe:sli_ttft_slow:ratio_rate1h"), "TTFT slower than SLO"),
        (recorded("inferprobe:sli_tpot_slow:ratio_rate1h"), "TPOT slower than SLO"),
    ),
    burn("Availability", "errors", 0),
    burn("TTFT", "ttft_slow", 8),
    burn("TPOT", "tpot_slow", 16),

    row("Per node", 77, panels=[]),
    p99_by_node("TTFT p99 by node", (0, 78, 12, 8),
                "99th percentile TTFT as each node (DaemonSet pod) sees the endpoint. One node "
                "above the others points at its network path, not the server.", TTFT_SECONDS),
    p99_by_node("E2EL p99 by node", (12, 78, 12, 8),
                "99th percentile end-to-end latency per node.", E2EL_SECONDS),
    p99_by_node("TPOT p99 by node", (0, 86, 12, 8),
                "99th percentile time per output token per node: differences here are streaming "
                "(network) effects, since generation speed is the server's.", TPOT_SECONDS),
    timeseries(
        "Success ratio by node", (12, 86, 12, 8),
        "1 - errors / requests per node. A single node failing suggests its network, DNS or "
        "egress rather than the endpoint.",
        series("percentunit", min=None, max=1), (success_ratio("node"), "{{node}}"),
    ),
    table(
        "Node comparison", (0, 94, 24, 7),
        "Now, per node: TTFT p50 and p99, TPOT p99, E2EL p99, success ratio and probe rate over "
        "the last rate interval. Sort by a column to find the node that sees the endpoint "
        "slowest.",
        "s",
        quantile(0.5, TTFT_SECONDS, "node", row=True),
        quantile(0.99, TTFT_SECONDS, "node", row=True),
        quantile(0.99, TPOT_SECONDS, "node", row=True),
        quantile(0.99, E2EL_SECONDS, "node", row=True),
        success_ratio("node"),
        summed(REQUESTS, "node"),
        overrides=[override("Success ratio", ("unit", "percentunit")),
                   override("Probes/s", ("unit", "reqps"))],
        transformations=merged(["node"], ["TTFT p50", "TTFT p99", "TPOT p99", "E2EL p99",
                                          "Success ratio", "Probes/s"]),
    ),

    row("Per replica (discovered targets)", 101),
    heatmap_panel(
        "TTFT p90 by replica", (0, 102, 12, 9),
        "One row per replica (pod) of a discovered target, coloured by its TTFT p90 over each "
        "rate interval (successful probes): a replica that stays darker than the others is slow "
        "for its users too, whatever the Service's average says. Configured targets and a "
        "pool's gateway have no pod and no row. Rows are ordered by name; the Worst replicas "
        "table ranks them.",
        query(quantile(0.9, TTFT_SECONDS, "namespace", "pod", extra=(HAS_POD,), row=True),
              "{{pod}}", fmt="time_series"),
        "s", rows="TTFT p90",
    ),
    timeseries(
        "Replica TTFT p90 vs its peers (15m)", (12, 102, 12, 9),
        "What InferprobeReplicaOutlier compares: each replica's TTFT p90 over 15 minutes, and "
        "twice the median p90 of the target's replicas that had at least 10 TTFTs in the "
        "window. A replica above the dashed line for 15 minutes, in a target with at least 3 "
        "such replicas, opens a ticket. From the recording rules of "
        "config/prometheus/recording-rules.yml (group inferprobe-replicas).",
        series("s", steps_first=True),
        (recorded("inferprobe:replica_ttft_seconds:p90_rate15m", 'node=~"$node"', POD),
         "{{pod}}"),
        ("2 * " + recorded("inferprobe:target_replica_ttft_seconds:median_p90_rate15m"),
         "2 × median of the replicas (alert line)"),
        overrides=[override("2 × median of the replicas (alert line)", DASHED, RED, UNFILLED)],
    ),
    table(
        "Worst replicas (over the time range)", (0, 111, 24, 8),
        "Every replica (pod) of the target over the whole time range picked, slowest TTFT p90 "
        "first: its node, TTFT p90 and p50 (successful probes), error ratio (failed probes; 0 "
        "when none failed) and how many probes it got. A few probes make a p90 one slow probe "
        "decides: read it with the probe count. Configured targets and a pool's gateway have no "
        "pod and are not listed.",
        "s",
        f"sort_desc({quantile(0.9, TTFT_SECONDS, *REPLICA_NODE, row=True, **OVER_RANGE)})",
        quantile(0.5, TTFT_SECONDS, *REPLICA_NODE, row=True, **OVER_RANGE),
        replica_error_ratio(*REPLICA_NODE, window="$__range"),
        summed(REQUESTS, *REPLICA_NODE, **OVER_RANGE),
        overrides=[override("Error ratio", ("unit", "percentunit")),
                   override("Probes", ("unit", "short"))],
        transformations=[
            *merged(["pod", "node", "namespace"],
                    ["TTFT p90", "TTFT p50", "Error ratio", "Probes"]),
            {"id": "sortBy",
             "options": {"fields": {}, "sort": [{"field": "TTFT p90", "desc": True}]}},
        ],
    ),
    timeseries(
        "Error ratio by replica", (0, 119, 12, 8),
        "Failed probes over all probes, per replica (pod), over each rate interval; 0 for a "
        "replica none of whose probes failed. One replica failing while the others do not is "
        "that replica, not the model.",
        series("percentunit", steps_first=True),
        (replica_error_ratio("namespace", "pod"), "{{pod}}"),
    ),
    timeseries(
        "Probe rate by replica", (12, 119, 12, 8),
        "Probes per second each replica (pod) gets, from every probe pod together: its rate "
        "with node_local (one prober), or its fleet_rate once divided among the probe pods and "
        "summed back. A replica at 0 is no longer found (not Ready, gone) or was refused above "
        "max_targets.",
        series("reqps", steps_first=True),
        (summed(REQUESTS, "namespace", "pod", extra=(HAS_POD,)), "{{pod}}"),
    ),

    row("Tokens and probe health", 127, collapsed=True, panels=[
        timeseries(
            "Tokens per second", (0, 128, 12, 8),
            "Output and prompt tokens per second of successful probes.",
            series("short", "tokens/s"),
            (summed("inferprobe_output_tokens_total", "target"), "output"),
            (summed("inferprobe_prompt_tokens_total", "target"), "prompt"),
        ),
        timeseries(
            "Tokens per probe", (12, 128, 12, 8),
            "Median output and prompt tokens per successful probe, from the token-count "
            "histograms (1-2-5 buckets, so approximate). Output below max_tokens means the "
            "server stopped early.",
            series("short"),
            *((quantile(0.5, f"inferprobe_request_{k}_tokens", "target"),
               f"{k} p50 {{{{histograms}}}}") for k in ["output", "prompt"]),
        ),
        timeseries(
            "Schedule lag", (0, 136, 8, 8),
            "How late arrivals were sent versus their schedule (p50, p99). High values mean the "
            "probing host is overloaded and latencies are suspect.",
            seconds(),
            (quantile(0.5, "inferprobe_schedule_lag_seconds", "target"), "p50 {{histograms}}"),
            (quantile(0.99, "inferprobe_schedule_lag_seconds", "target"), "p99 {{histograms}}"),
        ),
        timeseries(
            "Probes in flight", (8, 136, 8, 8),
            "Probes in flight (summed over the selected nodes).",
            series("short"),
            (f"sum by ({SITE}, target) (inferprobe_requests_in_flight{sel()})", "in flight"),
        ),
        timeseries(
            "New connections and retries per probe", (16, 136, 8, 8),
            'Connections opened / probes: about 1 with connection = "fresh", near 0 when '
            "keep-alive connections are reused. Retried: probes re-sent once because the server "
            "closed a reused keep-alive connection as the request went out (only then is a probe "
            "retried).",
            series("percentunit"),
            (per_probe("inferprobe_connections_opened_total"), "new connections"),
            (per_probe("inferprobe_request_retries_total"), "retried (keep-alive race)"),
        ),
        timeseries(
            "Rate-limit headroom", (0, 144, 12, 8),
            "The share of its rate limit a hosted API said is left, by resource (requests, "
            "tokens), in the responses' x-ratelimit-*, anthropic-ratelimit-* or RateLimit-* "
            "headers: a quota running out shows here before the 429s (rate_limited). Shared "
            "with every caller of the key; no data where the server sends no such headers.",
            series("percentunit"),
            (f"min by ({SITE}, target, resource) (inferprobe_ratelimit_remaining{sel()} "
             f"/ (inferprobe_ratelimit_limit{sel()} > 0))", "{{target}} {{resource}} left"),
        ),
        timeseries(
            "Rate-limit window resets in", (12, 144, 12, 8),
            "Seconds until the rate-limit window the responses reported turns over (when "
            "remaining is refilled), by resource.",
            seconds(),
            (f"max by ({SITE}, target, resource) "
             f"(inferprobe_ratelimit_reset_timestamp_seconds{sel()}) - time()",
             "{{target}} {{resource}}"),
        ),
        timeseries(
            "Connection phases (p50)", (0, 152, 12, 8),
            "Where a request's time went before its response headers (the blackbox exporter's "
            "phases): DNS resolve, TCP connect and the TLS handshake, recorded only by requests "
            "that opened a connection (a reused connection has none), and processing, the wait "
            "for headers once connected, for every request. A slow TTFT with a slow tls phase "
            "is the connection, not the model server.",
            seconds(),
            # `>= 0` drops a phase with no observation in the window (no connection opened:
            # all reused), which would be a NaN line rather than no line.
            (f'({quantile(0.5, "inferprobe_connection_phase_seconds", "target", "phase")}) >= 0',
             "{{phase}} p50 {{histograms}}"),
        ),
        timeseries(
            "Certificate expires in", (12, 152, 12, 8),
            "Time left before the earliest notAfter in the certificate chain a target presents "
            "(server) and of the client certificate the probe presents (client). "
            "InferprobeCertificateExpiringSoon tickets under 21 days, "
            "InferprobeCertificateExpiring pages under 7. No data for plain-HTTP targets.",
            seconds(),
            (f"min by ({SITE}, target, chain) "
             f"(inferprobe_tls_earliest_cert_expiry_timestamp_seconds{sel()}) - time()",
             "{{target}} {{chain}}"),
        ),
        timeseries(
            "Time to first answer token (reasoning models)", (0, 160, 12, 8),
            "For a model that reasons before it answers: the time to the answer's first visible "
            "token (p50, p99) beside the time to the first token of any kind, reasoning "
            "included. The gap is the thinking its users wait through. No data for a model "
            "that never reasons.",
            seconds(),
            (quantile(0.5, "inferprobe_time_to_first_answer_token_seconds", "target"),
             "answer p50 {{histograms}}"),
            (quantile(0.99, "inferprobe_time_to_first_answer_token_seconds", "target"),
             "answer p99 {{histograms}}"),
            (quantile(0.5, "inferprobe_time_to_first_token_seconds", "target"),
             "first token p50 {{histograms}}"),
        ),
        timeseries(
            "Reasoning share of output tokens", (12, 160, 12, 8),
            "Of the output tokens of successful probes, the share that was reasoning (usage's "
            "reasoning_tokens, else counted from the streamed reasoning). Probes that reasoned "
            "through their whole budget and answered nothing are errors (reasoning_exhausted), "
            "on the errors panel.",
            series("percentunit"),
            (f"{summed('inferprobe_reasoning_tokens_total', 'target')} / "
             f"{summed('inferprobe_output_tokens_total', 'target')}", "{{target}} reasoning"),
        ),
    ]),

    row("Correctness (canary)", 128, collapsed=True, panels=[
        timeseries(
            "Canary checks by result", (0, 129, 12, 8),
            "Correctness canary checks per second by result (docs/canary.md): match, diverged (a "
            "token differs where the reference was sure), wrong_answer (a known answer's regex "
            "failed), unscored (no logprobs, no reference yet, or the request failed). Benign "
            "near-tie flips count as match.",
            series("reqps", "checks/s"),
            (summed("inferprobe_canary_checks_total", "result"), "{{result}}"),
        ),
        timeseries(
            "Wrong answers by replica (30m)", (12, 129, 12, 8),
            "Per replica, canary checks over 30 minutes that diverged or failed a known answer "
            "(inferprobe:replica_canary_bad:increase30m). InferprobeWrongAnswers pages when one "
            "replica has at least 3 (and 10% of its checks) while its peers answer right. The "
            "daemon's WARN lines and status page show the prompt, position, expected and "
            "received tokens.",
            series("short", "checks"),
            (recorded("inferprobe:replica_canary_bad:increase30m", POD), "{{pod}}"),
        ),
        timeseries(
            "Canary logprob drift p90 by replica (30m)", (0, 137, 12, 8),
            "Per replica, the p90 over 30 minutes of the largest logprob difference from the "
            "reference over the tokens both agree on (nats). Batch noise is 1e-7 to 1e-2; "
            "InferprobeCanaryDrift opens a ticket above 0.1.",
            series("short", "nats"),
            (recorded("inferprobe:replica_canary_drift:p90_rate30m", POD), "{{pod}}"),
        ),
        timeseries(
            "First divergent position", (12, 137, 12, 8),
            "Diverged canary checks over the interval by how early they diverged: the count at "
            "or before each token position (cumulative, from "
            "inferprobe_canary_divergence_position). Wrong weights diverge at position 0; a "
            "failing kernel anywhere.",
            series("short", "diverged checks"),
            (summed("inferprobe_canary_divergence_position_bucket", "le", fn="increase"),
             "position <= {{le}}"),
        ),
    ]),

    row("Structured output and tool calls", 129, collapsed=True, panels=[
        timeseries(
            "Invalid structured answers by reason", (0, 130, 12, 8),
            "Structured canary answers (a JSON answer, a tool call) an agent could not use, per "
            "second by reason: rejected (HTTP 400/422), truncated (length limit), not_json, "
            "schema (breaks the schema or the function's parameters), no_tool_call (none arrived "
            "as a call, or one came as text), wrong_tool, refused (the model declined); and all "
            "scored structured checks for scale (docs: docs/structured.md).",
            series("reqps", "checks/s"),
            (summed("inferprobe_canary_invalid_outputs_total", "reason"), "{{reason}}"),
            (summed("inferprobe_canary_structured_checks_total"), "all structured checks"),
        ),
        timeseries(
            "Invalid share of structured answers by replica (30m)", (12, 130, 12, 8),
            "Per replica, the share of its structured canary checks over 30 minutes whose answer "
            "an agent could not use (inferprobe:replica_canary_invalid:increase30m over "
            "inferprobe:replica_canary_structured:increase30m). InferprobeInvalidOutputs pages "
            "when one replica is at 50% or more (at least 3 of 5) while its peers stay under "
            "10%, or a target with no peers is, or a replica fails every one.",
            series("percentunit", "invalid share", max=1),
            (recorded("inferprobe:replica_canary_invalid:increase30m", POD) + "\n/\n"
             + recorded("inferprobe:replica_canary_structured:increase30m", POD),
             "{{target}} {{pod}}"),
        ),
    ]),

    row("Probe vs server (discovered replicas)", 130, collapsed=True, panels=[
        probe_vs_server(
            "TTFT", (0, 130, 12, 8),
            "Median time to first token per replica as the probe saw it, beside the server's own "
            "vllm:time_to_first_token_seconds (or sglang:time_to_first_token_seconds). The gap "
            "is time outside the engine: network, gateway, tokenization, the HTTP server.",
            TTFT_SECONDS, "vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds",
        ),
        timeseries(
            "Outside the engine (probe TTFT - server TTFT, mean)", (12, 130, 12, 8),
            "Per replica, the probe's mean TTFT less the server's mean TTFT over the interval: "
            "what the network, a gateway or load balancer, tokenization and the HTTP front end "
            "add. A rise here with a flat server TTFT is not the engine. " + JOINED,
            seconds("seconds"),
            (f"{mean(TTFT_SECONDS, 'namespace', 'pod')} - on ({REPLICA}) "
             f"{server_mean('vllm:time_to_first_token_seconds')}", "{{pod}}"),
        ),
        timeseries(
            "Inside the engine: queue and prefill (mean)", (0, 138, 12, 8),
            "Per replica, the server's mean time waiting in its queue "
            "(vllm:request_queue_time_seconds) and in prefill (vllm:request_prefill_time_seconds): "
            "with the probe's TTFT and the gap beside them, \"probe 900 ms = outside 40 + queue "
            "700 + prefill 160\". " + JOINED,
            seconds("seconds"),
            (f"{server_mean('vllm:request_queue_time_seconds')} {PROBED}", "{{pod}} queue"),
            (f"{server_mean('vllm:request_prefill_time_seconds')} {PROBED}", "{{pod}} prefill"),
        ),
        probe_vs_server(
            "TPOT", (12, 138, 12, 8),
            "Median time per output token per replica, the probe's beside the server's "
            "vllm:request_time_per_output_token_seconds (or SGLang's "
            "sglang:inter_token_latency_seconds).",
            TPOT_SECONDS, "vllm:request_time_per_output_token_seconds",
            "sglang:inter_token_latency_seconds",
        ),
        probe_vs_server(
            "E2EL", (0, 146, 12, 8),
            "Median end-to-end latency per replica, the probe's beside the server's "
            "vllm:e2e_request_latency_seconds (or sglang:e2e_request_latency_seconds).",
            E2EL_SECONDS, "vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds",
        ),
    ]),

    row("Prefix cache", 131, collapsed=True, panels=[
        timeseries(
            "Prefix-cache hit ratio by replica or pool (1h)", (0, 132, 12, 8),
            "The prefix-cache check's hit ratio over an hour (inferprobe:prefix_cache_hit:"
            "ratio_rate1h: hits over hits and misses; unreported and failed checks count for "
            "neither), per replica of a discovered target, or for the pool where the target is a "
            "gateway; and the target's objective. InferprobePrefixCacheMisses files a ticket "
            "below the objective. A pool that misses while its replicas' own checks hit has a "
            "routing problem; replicas that miss have a cache problem (docs/prefix-cache.md).",
            series("percentunit", "hit ratio", max=1),
            (recorded("inferprobe:prefix_cache_hit:ratio_rate1h", POD), "{{target}} {{pod}}"),
            (recorded("inferprobe:prefix_cache_objective", POD), "objective {{target}} {{pod}}"),
        ),
        timeseries(
            "Prefix-cache checks by result", (12, 132, 12, 8),
            "Prefix-cache checks per second by result and the rule that judged them: hit or miss "
            "by the cached tokens the server reported (usage); hit by the warm request's TTFT "
            "against the cold one's where it reports nothing (ttft), or unreported when that "
            "shows no saving (never a miss); failed when a request of the pair failed "
            "(docs/prefix-cache.md).",
            series("reqps", "checks/s"),
            (summed("inferprobe_prefix_cache_checks_total", "result", "rule"),
             "{{result}} ({{rule}})"),
        ),
        timeseries(
            "Cold vs warm TTFT (p50)", (0, 140, 12, 8),
            "Median TTFT of a prefix-cache check's first request (cold: its whole prompt "
            "prefilled) and its second (warm: the same prefix, served from the cache when it "
            "hits). Their ratio is the speed-up a user gets from the cache for a prefix of "
            "prefix_tokens.",
            seconds("TTFT"),
            *((quantile(0.5, f"inferprobe_prefix_cache_{k}_ttft_seconds", "target"),
               f"{k} {{{{target}}}} {{{{histograms}}}}") for k in ["cold", "warm"]),
        ),
        timeseries(
            "Cached share of prompt tokens (workload probes)", (12, 140, 12, 8),
            "Of the workload probes' prompt tokens, the share the server reported as served from "
            "its prefix cache (inferprobe_prompt_cached_tokens_total over "
            "inferprobe_prompt_tokens_total). Probes put a unique nonce first, so only a "
            "configured shared_prefix_tokens can be cached; no line where the server never "
            "reports cached tokens (absent is not 0).",
            series("percentunit", "cached share", max=1),
            (f"{summed('inferprobe_prompt_cached_tokens_total', 'target')} / "
             f"{summed('inferprobe_prompt_tokens_total', 'target')}", "{{target}}"),
        ),
    ]),
]
