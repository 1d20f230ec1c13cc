"""The inferprobe / Overview dashboard: all probed LLM inference endpoints at a glance:
availability, errors, latency percentiles, SLOs, goodput and tokens, the health of
discovery and the probe fleet, and the agent sessions' turns."""

from .grafana import (BUDGET_LEFT, BURN_RATE, STALENESS, SUCCESS, TARGET_LINK, dashboard,
                      merged, override, panel, queries, query, row, seconds, series, stat, table,
                      thresholds, timeseries)
from .promql import (ERRORS, LATENCIES, REQUESTS, SITE, SITE_MATCH, burn_rate, per_probe,
                     quantile, recorded, sel, since_last_success, success_ratio, summed)

DASHBOARD = dashboard(
    uid="inferprobe-overview",
    title="inferprobe / Overview",
    description="All probed LLM inference endpoints at a glance: availability, errors, latency "
    "percentiles, SLOs, goodput and tokens, the health of discovery and the probe fleet, and "
    "the agent sessions' turns.",
)

ADAPTER_CHECKS = "inferprobe_adapter_checks_total"

# What the [[discovery]] blocks report: a block's name stands in for the target it finds.
DISCOVERY = f'{{{SITE_MATCH}, discovery=~"$target", node=~"$node"}}'
# The SLO compliance table's target cells open the target dashboard.
TARGET_CELL_LINK = {
    "title": "Open ${__value.raw} in the target dashboard",
    "url": "/d/inferprobe-target/inferprobe-target?${datasource:queryparam}"
    "&var-target=${__value.raw}&${__url_time_range}",
}


def percentiles(name, grid):
    """A latency's p50, p90 and p99 per target, each a line per kind of histogram."""
    metric, what = LATENCIES[name]
    return timeseries(
        f"{name} p50 / p90 / p99",
        grid,
        f"Percentiles of {what} per target, from the histograms, all nodes together (where "
        "the fleet mixes native and classic histograms, one line per kind, named in the "
        "legend). Only successful probes are observed.",
        seconds(links=True),
        *((quantile(q, metric, "target"), f"{{{{target}}}} p{p} {{{{histograms}}}}")
          for q, p in [(0.5, "50"), (0.9, "90"), (0.99, "99")]),
    )


def fleet(title, grid, description, unit, *targets):
    """A time series of the discovery and fleet row, from 0 in `unit`."""
    return timeseries(title, grid, description, series(unit, steps_first=True), *targets)


# The session check (a conversation with tools about every 10 minutes per replica or pool,
# docs/alerts.md "Agent sessions"): too rare for a rate over $__rate_interval to draw a line,
# so its table is over the time range and its hit share from the 1-hour recording rules.
SESSION_TURNS = "inferprobe_session_turns_total"
SESSION_CACHE = "inferprobe_session_turn_cache_total"
SESSION_RANGE = {"fn": "increase", "window": "$__range"}
# A discovered target's replicas picked (All also matches a pool's series, which have none).
POD = 'pod=~"$pod"'


# The sampler check (a round of 64 sampled tokens a minute per replica, docs/sampling.md):
# its table is over the time range, like the sessions'.
SAMPLER_TOKENS = "inferprobe_sampler_tokens_total"


def session_hit_share(*extra):
    """Per target and kind of turn over the range: cache hits over hits and misses, 0 where
    none hit (a hit series is made at the first hit)."""
    hits, misses, judged = (f"increase({SESSION_CACHE}{sel(m, *extra)}[$__range])"
                            for m in ('result="hit"', 'result="miss"', 'result=~"hit|miss"'))
    g = f"{SITE}, target, turn"
    return f"sum by ({g}) ({hits} or 0 * {misses})\n/\nsum by ({g}) ({judged})"


def session_recorded_share(turns):
    """The 1-hour recorded hit share of the later turns matching `turns`, per target."""
    g = f"{SITE}, target"
    hits, judged = (f"sum by ({g}) ({recorded(f'inferprobe:session_turn_cache_{k}:increase1h', POD, turns)})"
                    for k in ("hits", "judged"))
    return f"{hits}\n/\n({judged} > 0)"


PANELS = [
    row("Availability and traffic", 0, panels=[]),
    stat("Success ratio", (0, 1, 8, 6),
         "Fraction of finished probes that succeeded, per target, over the last rate interval "
         "(1 - errors / requests). Red below 95%, orange below 99%.",
         "percentunit", (success_ratio("target"), "{{target}}"), SUCCESS, decimals=2, links=True),
    stat("Time since last success", (8, 1, 8, 6),
         "Seconds since each target last answered a probe successfully "
         "(inferprobe_last_success_timestamp_seconds). Grows without bound while a target is "
         "down; compare it with the target's probe interval (1 / rate).",
         "s", (since_last_success(), "{{target}}"), STALENESS, decimals=0, links=True),
    panel(
        "bargauge", "Error budget remaining ($slo_window)", (16, 1, 8, 6),
        "What is left of each target's error budget over its window, $slo_window (recording "
        "rule inferprobe:error_budget_remaining:ratio, over the share of the window the SLO "
        "compliance table's Budget window covered says; none under 90% that no longer grows): "
        "100% untouched, 0% spent, negative overspent. Aggregated over all nodes; the model and "
        "node filters do not apply.",
        # Instant: the budget now, or no value where it has no sample (a window short for
        # good); a range reduced to its last non-null value would show the last number the
        # rules gave before they stopped (up to 3 hours old at the default range).
        queries(query(recorded("inferprobe:error_budget_remaining:ratio"), "{{target}}",
                      instant=True)),
        {"unit": "percentunit", "color": {"mode": "thresholds"}, "thresholds": BUDGET_LEFT,
         "min": 0, "max": 1, "links": [TARGET_LINK]},
        options={"displayMode": "gradient", "orientation": "horizontal",
                 "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                 "showUnfilled": True, "valueMode": "color"},
    ),
    timeseries(
        "Probe rate", (0, 7, 12, 8),
        "Probes that finished per second (successful or not), per target. The probe is open "
        "loop, so this follows the configured rate times the number of nodes, whatever the "
        "endpoint's speed; a drop means the probe itself is in trouble (see skipped probes and "
        "schedule lag).",
        series("reqps", links=True), (summed(REQUESTS, "target"), "{{target}}"),
    ),
    timeseries(
        "Success ratio over time", (12, 7, 12, 8),
        "1 - errors / requests per target. A probe succeeds only with a 2xx, a well-formed event "
        "stream, at least one token, no error event and a proper end of stream.",
        series("percentunit", min=None, max=1, links=True),
        (success_ratio("target"), "{{target}}"),
    ),
    timeseries(
        "Errors by category", (0, 15, 12, 8),
        "Failed probes per second by error category (stacked), summed over the selected "
        "targets. Every failure lands in exactly one category: rate_limited = HTTP 429, "
        "stream_interrupted = connection dropped or no end marker, stream_error_event = error "
        "object inside a 2xx stream, and so on (see docs/errors.md).",
        series("reqps", stacked=True), (summed(ERRORS, "category"), "{{category}}"),
    ),
    timeseries(
        "Skipped probes by reason", (12, 15, 12, 8),
        "Arrivals the daemon did not send, per second (stacked): reason=concurrency when "
        "max_concurrency probes were already in flight (the endpoint is slower than the probe "
        "rate allows), reason=budget when max_output_tokens_per_hour was spent.",
        series("reqps", stacked=True),
        (summed("inferprobe_requests_skipped_total", "target", "reason"), "{{target}} {{reason}}"),
    ),

    row("Latency (successful probes)", 23, panels=[]),
    percentiles("TTFT", (0, 24, 12, 8)),
    percentiles("TPOT", (12, 24, 12, 8)),
    percentiles("ITL", (0, 32, 12, 8)),
    percentiles("E2EL", (12, 32, 12, 8)),

    row("SLO and goodput", 40, panels=[]),
    timeseries(
        "Goodput", (0, 41, 12, 8),
        "Good probes per second: successes within every SLO threshold of their target "
        "(inferprobe_good_requests_total; every success counts for a target without an SLO).",
        series("reqps", links=True),
        (summed("inferprobe_good_requests_total", "target"), "{{target}}"),
    ),
    timeseries(
        "Good-probe ratio", (12, 41, 12, 8),
        "Good probes / all finished probes, per target: the share that succeeded and met every "
        "SLO threshold. Compare with the target's objective.",
        series("percentunit", min=None, max=1, links=True),
        (per_probe("inferprobe_good_requests_total"), "{{target}}"),
    ),
    table(
        "SLO compliance", (0, 49, 24, 7),
        "Per target, from the recording rules (aggregated over all nodes): the objective, the "
        "fraction of probes that succeeded in the last hour, the fraction of successful probes "
        "within the TTFT and TPOT thresholds in the last hour (empty when the target has no such "
        "threshold), what is left of the error budget over its window ($slo_window) and how "
        "much of the window the data it is computed from covers (under 100%: the budget is "
        "over that share alone, a new target; under 90% and no longer growing: no budget, a "
        "Prometheus keeping less than the window), and how fast the last hour burned it (1 = "
        "exactly on budget, 14.4 = a budget gone in a 14.4th of its window: 2 days of 30).",
        "percentunit",
        recorded("inferprobe:slo_objective"),
        "1 - " + recorded("inferprobe:sli_errors:ratio_rate1h"),
        "1 - " + recorded("inferprobe:sli_ttft_slow:ratio_rate1h"),
        "1 - " + recorded("inferprobe:sli_tpot_slow:ratio_rate1h"),
        recorded("inferprobe:error_budget_remaining:ratio"),
        recorded("inferprobe:sli_window_coverage:ratio"),
        burn_rate("errors", "1h"),
        overrides=[
            override("Error budget left", ("unit", "percentunit"),
                     ("custom.cellOptions", {"type": "color-text"}), ("thresholds", BUDGET_LEFT)),
            override("Error burn rate (1h)", ("unit", "short"), ("decimals", 2),
                     ("custom.cellOptions", {"type": "color-text"}), ("thresholds", BURN_RATE)),
            override("target", ("links", [TARGET_CELL_LINK])),
        ],
        transformations=merged(["target"], [
            "Objective", "Availability (1h)", "TTFT within SLO (1h)", "TPOT within SLO (1h)",
            "Error budget left", "Budget window covered", "Error burn rate (1h)",
        ]),
    ),

    row("Tokens and probe health", 56, panels=[]),
    timeseries(
        "Tokens per second", (0, 57, 12, 8),
        "Output (generated) and prompt tokens per second of successful probes, per target: what "
        "the probe costs the endpoint.",
        series("short", "tokens/s", links=True),
        (summed("inferprobe_output_tokens_total", "target"), "{{target}} output"),
        (summed("inferprobe_prompt_tokens_total", "target"), "{{target}} prompt"),
    ),
    timeseries(
        "Probes in flight", (12, 57, 12, 8),
        "Probes currently waiting for or reading a response, per target (summed over nodes). "
        "Near max_concurrency, arrivals start being skipped.",
        series("short"),
        (f"sum by ({SITE}, target) (inferprobe_requests_in_flight{sel()})", "{{target}}"),
    ),
    timeseries(
        "Schedule lag p99", (0, 65, 12, 8),
        "How late the daemon sent its arrivals versus their schedule (99th percentile). Large "
        "values mean the probing host is overloaded, which would also inflate the measured "
        "latencies.",
        seconds(),
        (quantile(0.99, "inferprobe_schedule_lag_seconds", "target"), "{{target}} {{histograms}}"),
    ),
    timeseries(
        "New connections per probe", (12, 65, 12, 8),
        'Connections opened / probes finished, per target: about 1 with connection = "fresh" '
        "(setup inside TTFT), near 0 when pooled keep-alive connections are reused. A rise under "
        "reuse means the server closes connections.",
        series("percentunit"), (per_probe("inferprobe_connections_opened_total"), "{{target}}"),
    ),

    row("Discovery and fleet", 73),
    table(
        "Discovery health", (0, 74, 12, 8),
        "Per [[discovery]] block, now: whether every probe pod's source answers (1) or at least "
        "one fails (0), how many probe pods fail, the targets found (summed over probe pods: "
        "with node_local each pod finds its own node's, else every pod finds them all), and "
        "endpoints refused above max_targets over the time range. A failing block keeps probing "
        "what it last found; the probe pods' logs say why (403: RBAC). InferprobeDiscoveryDown "
        "opens a ticket after 10 minutes.",
        "short",
        f"min by ({SITE}, discovery) (inferprobe_discovery_up{DISCOVERY})",
        f"sum by ({SITE}, discovery) (inferprobe_discovery_up{DISCOVERY} == bool 0)",
        f"sum by ({SITE}, discovery) (inferprobe_discovery_targets{DISCOVERY})",
        f"sum by ({SITE}, discovery) "
        f"(increase(inferprobe_discovery_refused_total{DISCOVERY}[$__range]))",
        transformations=merged(["discovery"], [
            "Up (every probe pod)", "Probe pods failing", "Targets found", "Refused (range)",
        ]),
    ),
    fleet(
        "Discovered targets", (12, 74, 12, 8),
        "Targets each [[discovery]] block found, summed over the probe pods (node_local: each "
        "pod its node's replicas; otherwise every pod finds them all). A drop is replicas going "
        "unready or away; a flat line at max_targets with refusals means the selector matches "
        "more than the block probes.",
        "short",
        (f"sum by ({SITE}, discovery) (inferprobe_discovery_targets{DISCOVERY})", "{{discovery}}"),
        (f"sum by ({SITE}, discovery) (rate(inferprobe_discovery_refused_total{DISCOVERY}"
         "[$__rate_interval])) * 60", "{{discovery}} refused per minute"),
    ),
    fleet(
        "Discovery up", (0, 82, 8, 8),
        "Share of probe pods whose source of each [[discovery]] block answers (1 = all). Below "
        "1: some probe pods cannot list or watch (API server, RBAC 403, missing InferencePool "
        "CRD 404, unreadable file) and probe what they last found.",
        "percentunit",
        (f"avg by ({SITE}, discovery) (inferprobe_discovery_up{DISCOVERY})", "{{discovery}}"),
    ),
    fleet(
        "Probe fleet size", (8, 82, 8, 8),
        "inferprobe_fleet_size: the Ready probe pods (kubernetes.fleet_selector) each probe pod "
        "counts, which divides every fleet_rate; 1 without a fleet. Min and max differ for a "
        "moment while pods come and go; probe pods scraped is how many report at all.",
        "short",
        *((f'{fn}(inferprobe_fleet_size{{{SITE_MATCH}, node=~"$node"}})', legend)
          for fn, legend in [("max", "fleet size (max over probe pods)"),
                             ("min", "fleet size (min over probe pods)"),
                             ("count", "probe pods scraped")]),
    ),
    fleet(
        "Probe rate per target: configured and measured", (16, 82, 8, 8),
        "inferprobe_target_rate summed over the probe pods: the probes per second the fleet is "
        "set to send each target (a rate times the probe pods probing it, or its fleet_rate, "
        "divided and summed back), beside the probes that finished. Measured well below "
        "configured means skipped arrivals (concurrency, budget).",
        "reqps",
        (f"sum by ({SITE}, target) (inferprobe_target_rate{sel()})", "{{target}} configured"),
        (summed(REQUESTS, "target"), "{{target}} measured"),
    ),
    row("Agent sessions", 90, collapsed=True, panels=[
        table(
            "Session turns by target and kind (over the time range)", (0, 91, 24, 8),
            "The session check over the time range picked, per target and kind of turn (first, "
            "tool_result, follow_up, parallel, parallel_result, long_gap, depth): TTFT p50 and "
            "p90 of the turns whose answer began with text; for the turns whose answer began "
            "with a tool call, the time to the call's first delta instead (p50, p90: a server "
            "streams a call only once its tool parser has the function's name, so it is later "
            "than a TTFT and kept apart); the share of later turns that found the previous turn's "
            "prompt in the prefix cache (hits over hits and misses), for the sessions that sent "
            "their affinity headers and for those that did not (hits without them too: "
            "prefix-aware routing; only with them: header affinity; neither, through a pool: "
            "round-robin); the turns sent and those that did not succeed (any result but ok). "
            "The alerts and what to check: docs/alerts.md, Agent sessions.",
            "s",
            *(quantile(q, "inferprobe_session_turn_ttft_seconds", "target", "turn", row=True,
                       **SESSION_RANGE) for q in (0.5, 0.9)),
            *(quantile(q, "inferprobe_session_turn_time_to_call_seconds", "target", "turn",
                       row=True, **SESSION_RANGE) for q in (0.5, 0.9)),
            session_hit_share('affinity="header"'),
            session_hit_share('affinity="none"'),
            summed(SESSION_TURNS, "target", "turn", **SESSION_RANGE),
            summed(SESSION_TURNS, "target", "turn", extra=('result!="ok"',), **SESSION_RANGE),
            overrides=[
                *(override(c, ("unit", "percentunit"))
                  for c in ("Hit share, affinity headers", "Hit share, none")),
                *(override(c, ("unit", "short")) for c in ("Turns", "Failed")),
                override("target", ("links", [TARGET_CELL_LINK])),
            ],
            transformations=merged(["target", "turn"], [
                "TTFT p50", "TTFT p90", "Time to call p50", "Time to call p90",
                "Hit share, affinity headers", "Hit share, none", "Turns", "Failed",
            ]),
        ),
        timeseries(
            "Session cache hit share (1h)", (0, 99, 8, 8),
            "Per target over an hour, the share of later turns that found the previous turn's "
            "prompt in the prefix cache, from the recording rules: the turns sent right after "
            "the previous one (what InferprobeSessionCacheMisses judges on a pool, under the red "
            "line) and the long_gap turns, sent after a human's think time (missing alone on a "
            "replica: its cache evicts idle conversations, InferprobeSessionEvictions).",
            series("percentunit", "hit share", max=1, steps=thresholds("red", (0.5, "green")),
                   lines=True, links=True),
            (session_recorded_share('turn!="long_gap"'), "{{target}} turns sent at once"),
            (session_recorded_share('turn="long_gap"'), "{{target}} long_gap"),
        ),
        timeseries(
            "Session turns failed by result", (8, 99, 8, 8),
            "Session turns that did not succeed, per target, turn and result: history_rejected "
            "(the history refused), context_length, tool_result_ignored, "
            "parallel_calls_missing, no_tool_call, wrong_tool, bad_arguments, not_json, refused, "
            "truncated, or a probe error category. A bump per failed turn; the daemon's WARN "
            "lines quote each.",
            series("short", "turns", links=True),
            (summed(SESSION_TURNS, "target", "turn", "result", fn="increase",
                    extra=('result!="ok"',)), "{{target}} {{turn}} {{result}}"),
        ),
        timeseries(
            "Session depth: served window and padding", (16, 99, 8, 8),
            "Per target and replica: the context window the server advertises "
            "(inferprobe_session_served_window_tokens, max_model_len in /v1/models) and the "
            "length the last depth turn was padded to (inferprobe_session_depth_tokens). A "
            "window that falls below the padding is InferprobeSessionDepthRejected.",
            series("short", "tokens", links=True),
            *((f"max by ({SITE}, target, pod) (inferprobe_session_{m}_tokens{sel()})",
               f"{{{{target}}}} {{{{pod}}}} {k}")
              for m, k in (("served_window", "window"), ("depth", "depth"))),
        ),
    ]),
    row("Sampler", 107, collapsed=True, panels=[
        table(
            "Sampler by target and replica (over the time range)", (0, 108, 24, 8),
            "The sampler check over the time range picked, per target and replica: the sampled "
            "tokens judged against the temperature, top-k, top-p and min-p their request asked "
            "for, those no correct sampler draws (outside support: InferprobeSamplerOutsideSupport "
            "pages on a replica whose peers have none), the calibration windows whose proportions "
            "failed the χ² test, the rounds without logprobs whose answers at temperature 1 were "
            "all the same, and the last window's p-value (uniform on a healthy sampler). The "
            "alerts and what to check: docs/alerts.md, Sampler.",
            "short",
            summed(SAMPLER_TOKENS, "target", "pod", fn="increase", window="$__range",
                   extra=('result=~"ok|outside_support"',)),
            summed(SAMPLER_TOKENS, "target", "pod", fn="increase", window="$__range",
                   extra=('result="outside_support"',)),
            summed("inferprobe_sampler_calibration_windows_total", "target", "pod",
                   fn="increase", window="$__range", extra=('result="miscalibrated"',)),
            summed("inferprobe_sampler_checks_total", "target", "pod", fn="increase",
                   window="$__range", extra=('result="sampling_ignored"',)),
            f"min by ({SITE}, target, pod) (inferprobe_sampler_calibration_p_value{sel()})",
            overrides=[
                override("Outside support", ("color", {"mode": "thresholds"}),
                         ("thresholds", thresholds("green", (1, "red"))),
                         ("custom.cellOptions", {"type": "color-text"})),
                override("Last p-value", ("unit", "none"), ("decimals", 4)),
                override("target", ("links", [TARGET_CELL_LINK])),
            ],
            transformations=merged(["target", "pod"], [
                "Tokens judged", "Outside support", "Windows miscalibrated",
                "Rounds ignored", "Last p-value",
            ]),
        ),
        timeseries(
            "Sampled tokens outside the support", (0, 116, 12, 8),
            "Per target and replica, the sampled tokens no correct sampler draws under their "
            "request's settings: any is evidence (a broken top-k or top-p kernel, corrupt "
            "logits). The daemon's WARN lines name each token, its position and the settings.",
            series("short", "tokens", links=True),
            (summed(SAMPLER_TOKENS, "target", "pod", fn="increase",
                    extra=('result="outside_support"',)), "{{target}} {{pod}}"),
        ),
        timeseries(
            "Miscalibrated windows in a row", (12, 116, 12, 8),
            "Per target and replica, the calibration windows in a row whose sampled tokens failed "
            "the χ² test (a wrong temperature, greedy decoding forced, a stuck random generator). "
            "Two, the red line, is InferprobeSamplerMiscalibrated.",
            series("short", "windows", steps=thresholds("green", (2, "red")), lines=True,
                   links=True),
            (f"max by ({SITE}, target, pod) (inferprobe_sampler_miscalibrated_windows_in_row{sel()})",
             "{{target}} {{pod}}"),
        ),
    ]),
    row("Adapters", 124, collapsed=True, panels=[
        table(
            "Adapters by target, replica and adapter (over the time range)", (0, 125, 24, 9),
            "The adapter check over the time range picked, per LoRA adapter and replica: its "
            "answers that followed the adapter's reference (applied), the base model's instead "
            "(base served: InferprobeAdapterNotApplied pages on a replica whose peers apply it, "
            "or against recorded references), neither (diverged), requests refused as an "
            "unknown model (unavailable: missing here, or listed and refused), and the prompts "
            "on which the adapter's answer parts from the base's (0 with every prompt tried: "
            "InferprobeAdapterNoEffect). The alerts and what to check: docs/alerts.md, Adapters.",
            "short",
            *(summed(ADAPTER_CHECKS, "target", "pod", "adapter", fn="increase",
                     window="$__range", extra=(f'result=~"{r}"',))
              for r in ("applied", "base_served", "diverged", "missing|not_found")),
            f"max by ({SITE}, target, pod, adapter) "
            f"(inferprobe_adapter_informative_prompts{sel()})",
            overrides=[
                *(override(name, ("color", {"mode": "thresholds"}),
                           ("thresholds", thresholds("green", (1, "red"))),
                           ("custom.cellOptions", {"type": "color-text"}))
                  for name in ("Base served", "Diverged", "Unavailable")),
                override("target", ("links", [TARGET_CELL_LINK])),
            ],
            transformations=merged(["target", "pod", "adapter"], [
                "Applied", "Base served", "Diverged", "Unavailable", "Informative prompts",
            ]),
        ),
        timeseries(
            "Base model's answers diverged beside adapters", (0, 134, 24, 8),
            "Per target and replica, the base model's greedy answers that diverged from its "
            "reference where it was sure, on a replica serving adapters: a loaded adapter "
            "corrupting the base model's requests (InferprobeAdapterBaseCorrupted).",
            series("short", "answers", links=True),
            (summed("inferprobe_adapter_base_checks_total", "target", "pod", fn="increase",
                    extra=('result="diverged"',)), "{{target}} {{pod}}"),
        ),
    ]),
]
