//! The configuration exactly as written by the user (file, env, flags), before validation.
//!
//! Every field is optional so that a target can inherit from `[defaults]` field by field,
//! and unknown keys are rejected so a typo fails loudly instead of silently using a default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// `check --no-secrets`: check how each secret is given (`api_key_env`,
    /// `api_key_file`, mutual-TLS files, OTLP headers) without reading it, where the
    /// secrets are absent (a laptop, CI). Never read from a file or the environment: the
    /// daemon always reads its secrets and refuses to start without them.
    #[serde(skip)]
    pub skip_secrets: bool,
    pub listen: Option<String>,
    pub seed: Option<u64>,
    pub shutdown_grace: Option<RawDuration>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Label name → environment variable, e.g. `node = "NODE_NAME"` (Kubernetes downward API).
    #[serde(default)]
    pub labels_from_env: BTreeMap<String, String>,
    /// Reload when the config file changes (checked every `watch_interval`).
    pub watch_config: Option<bool>,
    pub watch_interval: Option<RawDuration>,
    /// Probes per target kept for the status page.
    pub status_page_probes: Option<u64>,
    #[serde(default)]
    pub defaults: RawTarget,
    #[serde(default)]
    pub targets: Vec<RawTarget>,
    /// How to reach the Kubernetes API, this node's name, and the probe's own fleet.
    #[serde(default)]
    pub kubernetes: RawKubernetes,
    /// Blocks that turn Kubernetes objects (or a file_sd file) into targets.
    #[serde(default)]
    pub discovery: Vec<RawDiscovery>,
    /// OTLP export of one span per probe.
    #[serde(default)]
    pub tracing: RawTracing,
    /// How /metrics exposes the per-target histograms.
    #[serde(default)]
    pub metrics: RawMetrics,
}

/// `[metrics]`: `histograms`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    pub histograms: Option<String>,
}

/// `[tracing]`: `otlp_endpoint`, `protocol`, `headers_file`/`headers_env`, `sampling_ratio`,
/// `queue_size`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawTracing {
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` (the default, port 4318) or `grpc` (port 4317).
    pub protocol: Option<String>,
    /// Lines `name: value` sent with every export (e.g. an authorization header).
    pub headers_file: Option<String>,
    /// An environment variable holding `name=value,name2=value2`.
    pub headers_env: Option<String>,
    pub sampling_ratio: Option<f64>,
    pub queue_size: Option<u64>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawKubernetes {
    /// Outside a cluster; in-cluster (the ServiceAccount) when unset.
    pub kubeconfig: Option<String>,
    /// The environment variable holding this node's name (the downward API's
    /// `spec.nodeName`), for `node_local` blocks.
    pub node_name_env: Option<String>,
    /// Label selector of the probe's own pods (its DaemonSet), for `fleet_rate`.
    pub fleet_selector: Option<String>,
    /// Their namespace; default: the `POD_NAMESPACE` environment variable.
    pub fleet_namespace: Option<String>,
}

/// One discovery block: where endpoints come from, and the template every target it
/// finds is built from.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawDiscovery {
    pub name: Option<String>,
    /// `pods`, `endpointslices`, `inferencepool` or `file`.
    pub source: Option<String>,
    pub namespace: Option<String>,
    pub selector: Option<String>,
    pub service: Option<String>,
    pub pool: Option<String>,
    pub pool_version: Option<String>,
    pub gateway: Option<String>,
    pub port: Option<RawPort>,
    pub scheme: Option<String>,
    pub node_local: Option<bool>,
    pub path: Option<String>,
    pub refresh: Option<RawDuration>,
    pub model_label: Option<String>,
    pub model_annotation: Option<String>,
    pub pod_labels: Option<Vec<String>>,
    pub max_targets: Option<u64>,
    pub template: Option<RawTarget>,
}

/// A port by name (`http`) or number (`8000`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum RawPort {
    Number(i64),
    Name(String),
}

/// One target; also the shape of `[defaults]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    pub name: Option<String>,
    pub backend: Option<String>,
    pub url: Option<String>,
    pub endpoint: Option<String>,
    pub model: Option<String>,

    pub rate: Option<f64>,
    /// The total rate across every probe pod of the fleet, divided among them.
    pub fleet_rate: Option<f64>,
    pub burstiness: Option<f64>,
    pub max_concurrency: Option<u64>,

    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub ignore_eos: Option<bool>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub repetition_penalty: Option<f64>,
    pub stop: Option<Vec<String>>,
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// An agent's workload: a JSON answer or tools with every probe, in the OpenAI chat
    /// spelling (each backend sends its own).
    pub response_format: Option<serde_json::Value>,
    pub tools: Option<serde_json::Value>,
    pub tool_choice: Option<serde_json::Value>,

    pub include_usage: Option<bool>,
    pub continuous_usage_stats: Option<bool>,

    pub headers: Option<BTreeMap<String, String>>,
    pub api_key_env: Option<String>,
    pub api_key_file: Option<String>,
    /// A cloud's own credentials instead of a key: `aws` (SigV4, the SDK's default chain).
    pub credentials: Option<String>,
    /// The AWS region requests are signed for (else read from a Bedrock URL's host); a
    /// Vertex AI target's location (`{region}` in its endpoint).
    pub region: Option<String>,
    /// A Vertex AI target's Google Cloud project (`{project}` in its endpoint).
    pub project: Option<String>,
    pub labels: Option<BTreeMap<String, String>>,
    pub request_id_prefix: Option<String>,

    pub connect_timeout: Option<RawDuration>,
    pub ttft_timeout: Option<RawDuration>,
    pub stall_timeout: Option<RawDuration>,
    pub request_timeout: Option<RawDuration>,
    pub max_event_bytes: Option<u64>,
    pub max_response_bytes: Option<u64>,
    pub max_events: Option<u64>,

    pub models: Option<Vec<String>>,
    pub tokenizer: Option<String>,
    pub range_ratio: Option<f64>,
    pub shared_prefix_tokens: Option<u64>,
    pub dataset: Option<String>,
    pub dataset_format: Option<String>,
    pub output_tokens_from_dataset: Option<bool>,
    pub validate: Option<RawValidation>,

    pub embedding_dimensions: Option<u64>,
    pub audio_seconds: Option<f64>,
    pub audio_tone_hz: Option<f64>,
    pub audio_language: Option<String>,
    pub anthropic_version: Option<String>,
    /// Images in every request (`openai-chat`, `anthropic`, `openai-responses`).
    pub images: Option<RawMedia>,
    /// Videos in every request (`openai-chat`, for servers that take `video_url`).
    pub videos: Option<RawMedia>,
    /// `openai`/`openai-chat`: the name the output limit is sent under.
    pub max_tokens_field: Option<String>,

    pub slo: Option<RawSlo>,
    /// Correctness canary checks next to the latency probes.
    pub canary: Option<RawCanary>,
    /// The prefix-cache check: pairs sharing a fresh prefix, the second judged a hit or not.
    pub prefix_cache: Option<RawPrefixCache>,
    /// The session check: a multi-turn conversation with tool calls, judged per turn.
    pub session: Option<RawSession>,
    /// The sampler check: sampled tokens judged against the distribution asked for.
    pub sampler: Option<RawSampler>,
    /// The adapter check: each LoRA adapter served, applied, and the base model intact.
    pub adapters: Option<RawAdapters>,
    /// Send a W3C `traceparent` header with every probe (default true).
    pub trace_context: Option<bool>,
    /// A W3C `tracestate` value sent with it, e.g. `vendor=value`.
    pub tracestate: Option<String>,
    /// `reuse` (pooled keep-alive connections) or `fresh` (a new connection per probe).
    pub connection: Option<String>,
    /// What a workload answer that was reasoning alone, cut at its budget, counts as:
    /// `error` (`reasoning_exhausted`, the default) or `success`.
    pub reasoning_exhausted: Option<String>,
    /// Whether `/probe` may probe this target at scrape time (default false).
    pub probe_endpoint: Option<bool>,
    pub tls_ca_file: Option<String>,
    pub tls_client_cert_file: Option<String>,
    pub tls_client_key_file: Option<String>,
    pub insecure_skip_verify: Option<bool>,
    pub max_output_tokens_per_hour: Option<u64>,
}

/// Where a request's images (or videos) come from: generated (`width`, `height`, `format`,
/// `pattern`, `cache`), or `files`, a `dir`, or `urls`; `count` per request either way.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawMedia {
    pub count: Option<u64>,
    pub width: Option<u64>,
    pub height: Option<u64>,
    pub format: Option<String>,
    pub pattern: Option<String>,
    pub cache: Option<bool>,
    pub files: Option<Vec<String>>,
    pub dir: Option<String>,
    pub urls: Option<Vec<String>>,
}

/// Latency thresholds and the objective (e.g. 0.99) a target is held to.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawSlo {
    pub ttft: Option<RawDuration>,
    pub tpot: Option<RawDuration>,
    pub itl: Option<RawDuration>,
    pub e2el: Option<RawDuration>,
    pub objective: Option<f64>,
}

/// `canary = { interval, max_tokens, structured_max_tokens, top_logprobs, margin, prompts,
/// golden, group_by, baseline, votes, structured, warmup, max_divergence }`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawCanary {
    pub interval: Option<RawDuration>,
    pub max_tokens: Option<u64>,
    pub top_logprobs: Option<u64>,
    pub margin: Option<f64>,
    /// A prompts file: JSON lines `{"prompt": "...", "expect": "REGEX"}`.
    pub prompts: Option<String>,
    /// A golden file written by `inferprobe canary record`.
    pub golden: Option<String>,
    /// Target labels whose values split a block's replicas into groups with a reference
    /// each (default: the pod's controller revision).
    pub group_by: Option<Vec<String>>,
    /// The one group a block's replicas are compared with (default: every other group, by
    /// name, for a rollout's template to select the pair).
    pub baseline: Option<String>,
    /// Replicas on other nodes asked to vote for a node-local group's reference (default 3).
    pub votes: Option<u64>,
    /// Add the built-in structured prompts (a JSON answer, a named tool, a required tool
    /// call) to the built-in set (default false; a prompts file brings its own).
    pub structured: Option<bool>,
    /// `max_tokens` of the structured prompts (default 512): room for a reasoning model's
    /// thinking before the answer, which the text prompts' budget is not.
    pub structured_max_tokens: Option<u64>,
    /// Checks run back to back when a replica is first found, so a rollout's gate has a
    /// verdict in seconds: at least this many (default: whole rounds of the prompts, at
    /// least two and enough for 12 comparisons and 4 known answers, at most 48 checks; 0:
    /// no warm-up), and on until the gate's evidence suffices (`canary::warmup`).
    pub warmup: Option<u64>,
    /// The rollout gate's tolerance (its template's `max-divergence`, default 0.1): a
    /// replica's warm-up runs until each of its comparison pairs is decided at it.
    pub max_divergence: Option<f64>,
}

/// `prefix_cache = { interval, prefix_tokens, block_tokens, reuse_gap, hit_share, speedup,
/// objective }`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawPrefixCache {
    pub interval: Option<RawDuration>,
    pub prefix_tokens: Option<u64>,
    /// The server caches whole blocks of this many tokens.
    pub block_tokens: Option<u64>,
    /// How long the warm request waits after the cold one.
    pub reuse_gap: Option<RawDuration>,
    pub hit_share: Option<f64>,
    pub speedup: Option<f64>,
    pub objective: Option<f64>,
}

/// `sampler = { interval, settings, max_tokens, top_logprobs, server, window, alpha,
/// samples, seed_every }` (docs/sampling.md).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawSampler {
    pub interval: Option<RawDuration>,
    /// The settings rounds rotate through.
    pub settings: Option<Vec<RawSamplerSettings>>,
    pub max_tokens: Option<u64>,
    pub top_logprobs: Option<u64>,
    /// `auto`, `vllm`, `vllm-processed`, `llama.cpp`, `unknown`.
    pub server: Option<String>,
    pub window: Option<u64>,
    pub alpha: Option<f64>,
    pub samples: Option<u64>,
    /// Every this many rounds, a seeded pair (0: never).
    pub seed_every: Option<u64>,
}

/// `adapters = { interval, per_round, max_adapters, max_tokens, top_logprobs, margin,
/// prompts, names, discover, golden, server }` (docs/adapters.md).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawAdapters {
    pub interval: Option<RawDuration>,
    pub per_round: Option<u64>,
    pub max_adapters: Option<u64>,
    pub max_tokens: Option<u64>,
    pub top_logprobs: Option<u64>,
    pub margin: Option<f64>,
    /// A prompts file (the canary's format; plain prompts only).
    pub prompts: Option<String>,
    /// Adapters checked whether listed or not.
    pub names: Option<Vec<String>>,
    /// Follow the adapters `/v1/models` lists (default true).
    pub discover: Option<bool>,
    /// A golden file from `inferprobe canary record --adapters`.
    pub golden: Option<String>,
    /// `auto`, `vllm` or `llama.cpp`: how adapters are listed and chosen.
    pub server: Option<String>,
}

/// One round's `{ temperature, top_k, top_p, min_p }`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawSamplerSettings {
    pub temperature: Option<f64>,
    pub top_k: Option<u64>,
    pub top_p: Option<f64>,
    pub min_p: Option<f64>,
}

/// `session = { interval, tool_gap, human_gap, long_gap, parallel, tool_choice, max_tokens,
/// depth_tokens, depth_margin, depth_every, affinity_headers, served_by, hit_share,
/// block_tokens }` (docs/sessions.md).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawSession {
    pub interval: Option<RawDuration>,
    /// The longest wait before a turn carrying tool results (uniform from 0).
    pub tool_gap: Option<RawDuration>,
    pub human_gap: Option<RawDuration>,
    pub long_gap: Option<RawDuration>,
    pub parallel: Option<bool>,
    /// `auto` or `required`.
    pub tool_choice: Option<String>,
    pub max_tokens: Option<u64>,
    /// A depth turn padded to this many prompt tokens, or `"served"`: the window the
    /// server advertises less `depth_margin`.
    pub depth_tokens: Option<RawDepth>,
    pub depth_margin: Option<f64>,
    pub depth_every: Option<u64>,
    pub affinity_headers: Option<Vec<String>>,
    pub served_by: Option<Vec<String>>,
    pub hit_share: Option<f64>,
    pub block_tokens: Option<u64>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum RawDepth {
    Tokens(u64),
    Named(String),
}

/// Checks on every successful response (`validation` category when one fails).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawValidation {
    /// The output text must match this regular expression.
    pub regex: Option<String>,
    /// `finish_reason` (or the backend's equivalent) must be one of these.
    pub finish_reasons: Option<Vec<String>>,
    /// Output tokens must equal max_tokens (meaningful with ignore_eos).
    pub output_tokens: Option<bool>,
    /// The response's `model` must equal the requested one.
    pub model: Option<bool>,
}

/// A duration as users write it: `"250ms"`, `"1m30s"`, or a number of seconds.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum RawDuration {
    Seconds(f64),
    Text(String),
}

impl RawTarget {
    /// This target with every unset field taken from `defaults`. Maps merge key by key,
    /// the target's own entries winning.
    pub fn inherit(mut self, defaults: &RawTarget) -> RawTarget {
        macro_rules! inherit {
            ($($field:ident),* $(,)?) => {
                $( if self.$field.is_none() { self.$field = defaults.$field.clone(); } )*
            };
        }
        inherit!(
            backend,
            url,
            endpoint,
            model,
            burstiness,
            max_concurrency,
            input_tokens,
            output_tokens,
            ignore_eos,
            temperature,
            top_p,
            top_k,
            min_p,
            frequency_penalty,
            presence_penalty,
            repetition_penalty,
            stop,
            include_usage,
            continuous_usage_stats,
            request_id_prefix,
            connect_timeout,
            ttft_timeout,
            stall_timeout,
            request_timeout,
            max_event_bytes,
            max_response_bytes,
            max_events,
            models,
            tokenizer,
            range_ratio,
            shared_prefix_tokens,
            dataset,
            dataset_format,
            output_tokens_from_dataset,
            validate,
            reasoning_exhausted,
            probe_endpoint,
            embedding_dimensions,
            audio_seconds,
            audio_tone_hz,
            audio_language,
            anthropic_version,
            max_tokens_field,
            images,
            videos,
            slo,
            canary,
            prefix_cache,
            session,
            sampler,
            adapters,
            trace_context,
            tracestate,
            connection,
            tls_ca_file,
            tls_client_cert_file,
            tls_client_key_file,
            insecure_skip_verify,
            max_output_tokens_per_hour,
            response_format,
            tools,
            tool_choice,
            credentials,
            region,
            project,
        );
        // One rate: a target's own `rate` or `fleet_rate` replaces both of the defaults'.
        if self.rate.is_none() && self.fleet_rate.is_none() {
            self.rate = defaults.rate;
            self.fleet_rate = defaults.fleet_rate;
        }
        // One secret source: a target that names its own key must not also inherit the
        // other kind from defaults (that would be reported as a conflict it never wrote).
        if self.api_key_env.is_none() && self.api_key_file.is_none() {
            self.api_key_env = defaults.api_key_env.clone();
            self.api_key_file = defaults.api_key_file.clone();
        }
        self.headers = merge_maps(&defaults.headers, self.headers);
        self.labels = merge_maps(&defaults.labels, self.labels);
        self.extra_body = merge_maps(&defaults.extra_body, self.extra_body);
        self
    }
}

fn merge_maps<M>(defaults: &Option<M>, own: Option<M>) -> Option<M>
where
    M: Clone + Extend<<M as IntoIterator>::Item> + IntoIterator,
{
    match (defaults, own) {
        (Some(base), Some(own)) => {
            let mut merged = base.clone();
            merged.extend(own);
            Some(merged)
        }
        (base, own) => own.or_else(|| base.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_fields_override_defaults_and_maps_merge() {
        let defaults = RawTarget {
            rate: Some(1.0),
            model: Some("m".into()),
            api_key_file: Some("/secret".into()),
            headers: Some(BTreeMap::from([
                ("a".into(), "1".into()),
                ("b".into(), "1".into()),
            ])),
            ..RawTarget::default()
        };
        let target = RawTarget {
            rate: Some(2.0),
            api_key_env: Some("KEY".into()),
            headers: Some(BTreeMap::from([("b".into(), "2".into())])),
            ..RawTarget::default()
        }
        .inherit(&defaults);
        assert_eq!(target.rate, Some(2.0));
        assert_eq!(target.model.as_deref(), Some("m"));
        assert_eq!(target.api_key_env.as_deref(), Some("KEY"));
        assert_eq!(
            target.api_key_file, None,
            "own secret source replaces the default"
        );
        let headers = target.headers.unwrap();
        assert_eq!(headers["a"], "1");
        assert_eq!(headers["b"], "2");
    }
}
