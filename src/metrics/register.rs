//! Registering every family on the injected registry, with its help text: what each
//! series means, written once, where a scraper reads it.

use std::sync::Arc;

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::{F64Gauge, LabeledFamily, Metrics, TargetLabels, process};

impl Metrics {
    /// Register every inferprobe metric on `registry` (under the `inferprobe_` prefix) and
    /// the standard `process_*` metrics at its root.
    pub fn register(registry: &mut Registry) -> Self {
        registry.register_collector(Box::new(process::ProcessCollector::new()));
        let r = registry.sub_registry_with_prefix("inferprobe");
        let m = Self {
            requests: LabeledFamily::default(),
            errors: LabeledFamily::default(),
            skipped: LabeledFamily::default(),
            in_flight: LabeledFamily::default(),
            ttft: LabeledFamily::default(),
            tpot: LabeledFamily::default(),
            itl: LabeledFamily::default(),
            e2el: LabeledFamily::default(),
            output_tokens: LabeledFamily::default(),
            prompt_tokens: LabeledFamily::default(),
            output_tokens_total: LabeledFamily::default(),
            prompt_tokens_total: LabeledFamily::default(),
            prompt_cached_tokens: LabeledFamily::default(),
            reasoning_tokens: LabeledFamily::default(),
            cache_write_tokens: LabeledFamily::default(),
            answer_ttft: LabeledFamily::default(),
            good_requests: LabeledFamily::default(),
            last_success: LabeledFamily::default(),
            schedule_lag: LabeledFamily::default(),
            connections: LabeledFamily::default(),
            retries: LabeledFamily::default(),
            buffered: LabeledFamily::default(),
            target_rate: LabeledFamily::default(),
            discovery_up: LabeledFamily::default(),
            discovery_targets: LabeledFamily::default(),
            discovery_refused: LabeledFamily::default(),
            fleet_size: Gauge::default(),
            slo_objective: LabeledFamily::default(),
            slo_threshold: LabeledFamily::default(),
            slo_observations: LabeledFamily::default(),
            slo_slow: LabeledFamily::default(),
            slos: Arc::default(),
            config_reload_successful: Gauge::default(),
            config_reload_success_time: F64Gauge::default(),
            canary: Default::default(),
            prefix: Default::default(),
            session: Default::default(),
            sampler: Default::default(),
            adapters: Default::default(),
            quota: Default::default(),
            connection: Default::default(),
            spans: Default::default(),
            snapshot: Arc::default(),
            histograms: Arc::default(),
        };
        m.canary.register(r);
        m.prefix.register(r);
        m.session.register(r);
        m.sampler.register(r);
        m.adapters.register(r);
        m.quota.register(r);
        m.connection.register(r);
        r.register(
            "trace_spans_exported",
            "Probe spans the OTLP exporter delivered to the collector",
            m.spans.exported.clone(),
        );
        r.register(
            "trace_spans_dropped",
            "Probe spans dropped because the export queue was full (the collector is slow or down); probes never wait for it",
            m.spans.dropped.clone(),
        );
        r.register(
            "trace_spans_failed",
            "Probe spans whose export failed (the collector refused them or did not answer)",
            m.spans.failed.clone(),
        );
        r.register(
            "requests",
            "Probes that finished, successful or not",
            m.requests.clone(),
        );
        r.register(
            "request_errors",
            "Probes that failed, by error category",
            m.errors.clone(),
        );
        r.register(
            "requests_skipped",
            "Scheduled arrivals not sent (open loop: never queued), by reason",
            m.skipped.clone(),
        );
        r.register(
            "requests_in_flight",
            "Probes in flight now",
            m.in_flight.clone(),
        );
        let seconds = [
            (
                "time_to_first_token",
                "Time from sending the request to the first token-carrying event (successful probes)",
                &m.ttft,
            ),
            (
                "time_to_first_answer_token",
                "Time from sending the request to the first event carrying the answer's text, after any reasoning: what a reasoning model's user waits for (successful probes with answer text; made on the target's first answer that came after reasoning)",
                &m.answer_ttft,
            ),
            (
                "time_per_output_token",
                "(last token - first token) / tokens that arrived after the first event (not hidden reasoning or an EOS never sent): the mean ITL, per successful probe with tokens after its first event",
                &m.tpot,
            ),
            (
                "inter_token_latency",
                "Gap between successive tokens, one observation per token: an event carrying k tokens is observed k times as gap/k (tokens per event from per-chunk usage, the tokenizer, or the final usage shared by text)",
                &m.itl,
            ),
            (
                "e2e_request_latency",
                "Time from sending the request to the end of the response (successful probes)",
                &m.e2el,
            ),
        ];
        for (name, help, family) in seconds {
            r.register_with_unit(name, help, Unit::Seconds, family.clone());
        }
        r.register(
            "request_output_tokens",
            "Output tokens per successful probe",
            m.output_tokens.clone(),
        );
        r.register(
            "request_prompt_tokens",
            "Prompt tokens per successful probe, as reported by the server's usage",
            m.prompt_tokens.clone(),
        );
        r.register(
            "output_tokens",
            "Output tokens received by successful probes",
            m.output_tokens_total.clone(),
        );
        r.register(
            "prompt_tokens",
            "Prompt tokens of successful probes, as reported by the server's usage",
            m.prompt_tokens_total.clone(),
        );
        r.register(
            "prompt_cached_tokens",
            "Of prompt_tokens_total, the tokens the server served from its prefix cache, as its usage reports them (OpenAI-style prompt_tokens_details.cached_tokens, Anthropic cache_read_input_tokens, llama.cpp timings.cache_n); no series for a target whose server never reported them",
            m.prompt_cached_tokens.clone(),
        );
        r.register(
            "reasoning_tokens",
            "Of output_tokens_total, the tokens that were reasoning: usage's completion_tokens_details.reasoning_tokens (OpenAI, vLLM, Gemini's thoughtsTokenCount through compatible endpoints), Responses' output_tokens_details; else the configured tokenizer on the streamed reasoning (Anthropic's thinking blocks: a summary on Claude 4, so an undercount), else the events that carried only reasoning. At most what the answer billed; no series for a target that never reasoned",
            m.reasoning_tokens.clone(),
        );
        r.register(
            "prompt_cache_write_tokens",
            "Prompt tokens the server wrote to its prompt cache, as it reports them (Anthropic's cache_creation_input_tokens, billed above the input rate); no series for a target whose server never reported them",
            m.cache_write_tokens.clone(),
        );
        r.register(
            "good_requests",
            "Successful probes within every configured SLO threshold (goodput)",
            m.good_requests.clone(),
        );
        r.register_with_unit(
            "last_success_timestamp",
            "Unix time of the last successful probe",
            Unit::Seconds,
            m.last_success.clone(),
        );
        r.register_with_unit(
            "schedule_lag",
            "How late each arrival was sent compared with its scheduled time",
            Unit::Seconds,
            m.schedule_lag.clone(),
        );
        r.register(
            "connections_opened",
            "New connections opened by the probe's HTTP client (the rest of the requests reused one)",
            m.connections.clone(),
        );
        r.register(
            "request_retries",
            "Probes sent a second time because the server closed a reused keep-alive connection just as the request went out; only the second attempt is measured and counted",
            m.retries.clone(),
        );
        r.register(
            "buffered_streams",
            "Successful streams whose output all arrived in one read, several events together: a hop between the server and the probe buffered it (TTFT is the whole answer's time; TPOT and ITL are not observed)",
            m.buffered.clone(),
        );
        r.register(
            "target_rate",
            "Probes per second this process sends to the target: its rate, or its fleet_rate divided by the fleet size",
            m.target_rate.clone(),
        );
        r.register(
            "discovery_up",
            "1 while a discovery block's source answers (the Kubernetes API, its file); 0 while it fails and its last known targets are kept",
            m.discovery_up.clone(),
        );
        r.register(
            "discovery_targets",
            "Targets a discovery block is probing now",
            m.discovery_targets.clone(),
        );
        r.register(
            "discovery_refused",
            "Endpoints a discovery block found beyond its max_targets, and did not probe",
            m.discovery_refused.clone(),
        );
        r.register(
            "fleet_size",
            "Ready pods of the probe's own fleet (1 without kubernetes.fleet_selector): every fleet_rate is divided by it",
            m.fleet_size.clone(),
        );
        m.fleet_size.set(1);
        r.register(
            "slo_objective",
            "The fraction of probes that must be good, per target with an SLO",
            m.slo_objective.clone(),
        );
        r.register_with_unit(
            "slo_threshold",
            "An SLO latency threshold; `bound` is it as the classic histogram bucket `le` spells it",
            Unit::Seconds,
            m.slo_threshold.clone(),
        );
        r.register(
            "slo_observations",
            "Observations of a latency an SLO sets a threshold on (`slo`: ttft, tpot, e2el per successful probe; itl per gap), counted whatever buckets the histograms carry",
            m.slo_observations.clone(),
        );
        r.register(
            "slo_slow_observations",
            "Of inferprobe_slo_observations_total, those over the threshold (the SLO rules' slow share; exact, not read from buckets)",
            m.slo_slow.clone(),
        );
        let build_info = LabeledFamily::<TargetLabels, Gauge>::default();
        build_info
            .get_or_insert(
                TargetLabels::new(vec![
                    ("version".into(), env!("CARGO_PKG_VERSION").into()),
                    ("revision".into(), crate::REVISION.into()),
                ]),
                Gauge::default,
            )
            .set(1);
        r.register("build_info", "Always 1; labels carry the build", build_info);
        r.register(
            "config_last_reload_successful",
            "1 if the last configuration load succeeded",
            m.config_reload_successful.clone(),
        );
        r.register_with_unit(
            "config_last_reload_success_timestamp",
            "Unix time of the last successful configuration load",
            Unit::Seconds,
            m.config_reload_success_time.clone(),
        );
        m
    }
}
