//! The series the dashboards may query: what the daemon exports, the inference server's
//! own histograms beside them, and the matchers each kind of series must carry.

/// Counters and gauges the daemon exports, under their exposed names.
pub(super) const EXPORTED_SERIES: &[&str] = &[
    "inferprobe_canary_checks_total",
    "inferprobe_canary_structured_checks_total",
    "inferprobe_canary_invalid_outputs_total",
    "inferprobe_requests_total",
    "inferprobe_request_errors_total",
    "inferprobe_requests_skipped_total",
    "inferprobe_requests_in_flight",
    "inferprobe_output_tokens_total",
    "inferprobe_prompt_tokens_total",
    "inferprobe_good_requests_total",
    "inferprobe_last_success_timestamp_seconds",
    "inferprobe_connections_opened_total",
    "inferprobe_request_retries_total",
    "inferprobe_slo_objective",
    "inferprobe_slo_threshold_seconds",
    "inferprobe_build_info",
    "inferprobe_config_last_reload_successful",
    "inferprobe_target_rate",
    "inferprobe_discovery_up",
    "inferprobe_discovery_targets",
    "inferprobe_discovery_refused_total",
    "inferprobe_fleet_size",
    "inferprobe_prompt_cached_tokens_total",
    "inferprobe_prefix_cache_checks_total",
    "inferprobe_prefix_cache_objective",
    // The session check (issue 50): its turns, sessions, cache judgements, tokens, routing
    // and the served window.
    "inferprobe_session_turns_total",
    "inferprobe_sessions_total",
    "inferprobe_session_turn_cache_total",
    "inferprobe_session_prompt_tokens_total",
    "inferprobe_session_cached_tokens_total",
    "inferprobe_session_output_tokens_total",
    "inferprobe_session_replica_switches_total",
    "inferprobe_session_routed_turns_total",
    "inferprobe_session_routed_cache_total",
    "inferprobe_session_refusal_open",
    "inferprobe_session_served_window_tokens",
    "inferprobe_session_depth_tokens",
    // The sampler check (issue 57): its rounds, tokens, windows and the last window's test.
    "inferprobe_sampler_checks_total",
    "inferprobe_sampler_tokens_total",
    "inferprobe_sampler_calibration_windows_total",
    "inferprobe_sampler_calibration_p_value",
    "inferprobe_sampler_miscalibrated_windows_in_row",
    // The adapter check (issue 58): an adapter's checks, the base model's, the prompts that
    // tell an adapter from the base.
    // Rate-limit headroom (issue 59): what a hosted API's headers say is left.
    "inferprobe_ratelimit_remaining",
    "inferprobe_ratelimit_limit",
    "inferprobe_ratelimit_reset_timestamp_seconds",
    // Certificate expiry and reasoning tokens (issue 59).
    "inferprobe_reasoning_tokens_total",
    "inferprobe_tls_earliest_cert_expiry_timestamp_seconds",
    "inferprobe_adapter_checks_total",
    "inferprobe_adapter_base_checks_total",
    "inferprobe_adapter_informative_prompts",
];

/// The histograms that carry native buckets beside their classic ones (a protobuf scrape):
/// every per-target histogram, the four latency ones first, the prefix-cache check's and the
/// session check's.
pub(super) const NATIVE_HISTOGRAMS: [&str; 14] = [
    "inferprobe_time_to_first_token_seconds",
    "inferprobe_time_per_output_token_seconds",
    "inferprobe_inter_token_latency_seconds",
    "inferprobe_e2e_request_latency_seconds",
    "inferprobe_request_output_tokens",
    "inferprobe_request_prompt_tokens",
    "inferprobe_schedule_lag_seconds",
    "inferprobe_prefix_cache_cold_ttft_seconds",
    "inferprobe_prefix_cache_warm_ttft_seconds",
    "inferprobe_session_turn_ttft_seconds",
    "inferprobe_session_turn_e2el_seconds",
    "inferprobe_session_turn_time_to_call_seconds",
    "inferprobe_connection_phase_seconds",
    "inferprobe_time_to_first_answer_token_seconds",
];

/// The four latency histograms every dashboard shows.
pub(super) const LATENCY_HISTOGRAMS: [&str; 4] = [
    NATIVE_HISTOGRAMS[0],
    NATIVE_HISTOGRAMS[1],
    NATIVE_HISTOGRAMS[2],
    NATIVE_HISTOGRAMS[3],
];

/// The canary's histograms: classic only.
const CANARY_HISTOGRAMS: [&str; 2] = [
    "inferprobe_canary_divergence_position",
    "inferprobe_canary_logprob_drift",
];

/// Histograms the daemon exports; each has `_bucket`, `_sum` and `_count` series.
pub(super) fn is_exported_histogram(name: &str) -> bool {
    NATIVE_HISTOGRAMS.contains(&name) || CANARY_HISTOGRAMS.contains(&name)
}

/// The only datasource reference a panel or query may carry.
pub(super) const DATASOURCE_UID: &str = "${datasource}";

/// Matchers every selector of a raw per-target series must carry; recording rules are
/// aggregated by target, so they carry only the first. `pod` is a discovered replica's
/// (its "All" value `.*` also matches the series of configured targets, which have none).
pub(super) const TARGET_MATCHER: &str = r#"target=~"$target""#;
pub(super) const NODE_MATCHER: &str = r#"node=~"$node""#;
/// The site label (scripts/site_labels.py): behind Thanos or Mimir, two clusters with a
/// target of the same name must stay apart, so every selector filters on it too.
pub(super) const CLUSTER_MATCHER: &str = r#"cluster=~"$cluster""#;
pub(super) const RAW_MATCHERS: [&str; 5] = [
    CLUSTER_MATCHER,
    TARGET_MATCHER,
    r#"model=~"$model""#,
    NODE_MATCHER,
    r#"pod=~"$pod""#,
];
/// The inference server's own histograms (vLLM 0.32, SGLang), beside the probe's in the
/// target dashboard's "Probe vs server" row: scraped from the server pods, so they carry
/// no `target`; they are filtered by the site, the replica and the served model name, and
/// joined to the probe's replicas on (cluster, namespace, pod).
pub(super) const SERVER_HISTOGRAMS: &[&str] = &[
    "vllm:time_to_first_token_seconds",
    "vllm:request_time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "sglang:time_to_first_token_seconds",
    "sglang:inter_token_latency_seconds",
    "sglang:e2e_request_latency_seconds",
];
pub(super) const SERVER_MATCHERS: [&str; 3] =
    [CLUSTER_MATCHER, r#"pod=~"$pod""#, r#"model_name=~"$model""#];

pub(super) fn is_server_series(name: &str) -> bool {
    ["_bucket", "_sum", "_count"].iter().any(|suffix| {
        name.strip_suffix(suffix)
            .is_some_and(|base| SERVER_HISTOGRAMS.contains(&base))
    })
}

/// Series of the probe process rather than of a target, and the matchers they carry
/// instead: a discovery block's name is the `target` label of what it finds, and `node`
/// (the probe's, from the PodMonitor) is on every series a probe pod exports.
pub(super) const DISCOVERY_MATCHER: &str = r#"discovery=~"$target""#;
pub(super) const PROBE_SERIES: &[(&str, &[&str])] = &[
    (
        "inferprobe_discovery_up",
        &[CLUSTER_MATCHER, DISCOVERY_MATCHER, NODE_MATCHER],
    ),
    (
        "inferprobe_discovery_targets",
        &[CLUSTER_MATCHER, DISCOVERY_MATCHER, NODE_MATCHER],
    ),
    (
        "inferprobe_discovery_refused_total",
        &[CLUSTER_MATCHER, DISCOVERY_MATCHER, NODE_MATCHER],
    ),
    ("inferprobe_fleet_size", &[CLUSTER_MATCHER, NODE_MATCHER]),
];
