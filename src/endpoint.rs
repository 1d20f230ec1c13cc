//! What a probe target is: the validated, typed description every part of the daemon runs
//! on (the wire format it speaks, its deadlines, limits, SLO, credentials...).
//!
//! Its own module so that dependencies point one way: [`crate::config`] parses into these
//! types, [`crate::discovery`] builds them from Kubernetes objects, and the modules that
//! probe (backend, probe, scheduler, metrics) read them without knowing where they came from.

use std::fmt;
use std::time::Duration;

use url::Url;

use crate::prompt::PromptSource;
use crate::validation::Validation;

pub mod adapters;
pub mod canary;
pub mod prefix_cache;
pub mod sampling;
pub mod session;
pub use canary::CanarySpec;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// `/v1/completions`
    OpenAi,
    /// `/v1/chat/completions`
    OpenAiChat,
    /// Text Generation Inference `/generate_stream`
    Tgi,
    /// Text Generation Inference's OpenAI-compatible `/v1/chat/completions`, in its dialect
    TgiChat,
    /// TensorRT-LLM behind Triton, `/v2/models/<model>/generate_stream`
    TensorRtLlm,
    /// DeepSpeed-MII, non-streaming
    DeepSpeedMii,
    /// `/v1/embeddings`, non-streaming
    OpenAiEmbeddings,
    /// `/v1/audio/transcriptions`, multipart upload, streamed
    OpenAiAudio,
    /// Anthropic Messages `/v1/messages`
    Anthropic,
    /// OpenAI Responses `/v1/responses`
    OpenAiResponses,
    /// Amazon Bedrock `ConverseStream`, `/model/<model>/converse-stream`, SigV4-signed
    Bedrock,
    /// Anthropic's Messages on Bedrock, `/model/<model>/invoke-with-response-stream`
    AnthropicBedrock,
    /// Gemini API `streamGenerateContent?alt=sse` (Google AI, an API key)
    Gemini,
    /// Gemini on Vertex AI, the same wire format under a project and region
    VertexGemini,
    /// Anthropic's Messages on Vertex AI, `:streamRawPredict`
    AnthropicVertex,
    /// Azure OpenAI / Azure AI Foundry chat completions on a deployment, with `api-version`
    AzureOpenAi,
}

impl BackendKind {
    /// Accepted `backend =` values, for error messages. The server names are aliases of
    /// `openai`, as in vLLM's benchmark client.
    pub const NAMES: [&'static str; 21] = [
        "openai",
        "openai-chat",
        "tgi",
        "tgi-chat",
        "tensorrt-llm",
        "deepspeed-mii",
        "openai-embeddings",
        "openai-audio",
        "anthropic",
        "openai-responses",
        "bedrock",
        "anthropic-bedrock",
        "gemini",
        "vertex-gemini",
        "anthropic-vertex",
        "azure-openai",
        "vllm",
        "sglang",
        "lmdeploy",
        "llama.cpp",
        "scalellm",
    ];

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "openai" | "vllm" | "sglang" | "lmdeploy" | "llama.cpp" | "scalellm" => Self::OpenAi,
            "openai-chat" => Self::OpenAiChat,
            "tgi" => Self::Tgi,
            "tgi-chat" => Self::TgiChat,
            "tensorrt-llm" => Self::TensorRtLlm,
            "deepspeed-mii" => Self::DeepSpeedMii,
            "openai-embeddings" => Self::OpenAiEmbeddings,
            "openai-audio" => Self::OpenAiAudio,
            "anthropic" => Self::Anthropic,
            "openai-responses" => Self::OpenAiResponses,
            "bedrock" => Self::Bedrock,
            "anthropic-bedrock" => Self::AnthropicBedrock,
            "gemini" => Self::Gemini,
            "vertex-gemini" => Self::VertexGemini,
            "anthropic-vertex" => Self::AnthropicVertex,
            "azure-openai" => Self::AzureOpenAi,
            _ => return None,
        })
    }

    /// The `backend` label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::OpenAiChat => "openai-chat",
            Self::Tgi => "tgi",
            Self::TgiChat => "tgi-chat",
            Self::TensorRtLlm => "tensorrt-llm",
            Self::DeepSpeedMii => "deepspeed-mii",
            Self::OpenAiEmbeddings => "openai-embeddings",
            Self::OpenAiAudio => "openai-audio",
            Self::Anthropic => "anthropic",
            Self::OpenAiResponses => "openai-responses",
            Self::Bedrock => "bedrock",
            Self::AnthropicBedrock => "anthropic-bedrock",
            Self::Gemini => "gemini",
            Self::VertexGemini => "vertex-gemini",
            Self::AnthropicVertex => "anthropic-vertex",
            Self::AzureOpenAi => "azure-openai",
        }
    }

    /// The path appended to a target's base URL; `{model}` is replaced by the model name.
    pub const fn default_endpoint(self) -> &'static str {
        match self {
            Self::OpenAi | Self::DeepSpeedMii => "/v1/completions",
            Self::OpenAiChat | Self::TgiChat => "/v1/chat/completions",
            Self::Tgi => "/generate_stream",
            Self::TensorRtLlm => "/v2/models/{model}/generate_stream",
            Self::OpenAiEmbeddings => "/v1/embeddings",
            Self::OpenAiAudio => "/v1/audio/transcriptions",
            Self::Anthropic => "/v1/messages",
            Self::OpenAiResponses => "/v1/responses",
            Self::Bedrock => "/model/{model}/converse-stream",
            Self::AnthropicBedrock => "/model/{model}/invoke-with-response-stream",
            Self::Gemini => "/v1beta/models/{model}:streamGenerateContent?alt=sse",
            Self::VertexGemini => {
                "/v1/projects/{project}/locations/{region}/publishers/google/models/{model}:streamGenerateContent?alt=sse"
            }
            Self::AnthropicVertex => {
                "/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:streamRawPredict"
            }
            // The deployment is the model; the GA `api-version` Azure documents for it.
            Self::AzureOpenAi => {
                "/openai/deployments/{model}/chat/completions?api-version=2024-10-21"
            }
        }
    }

    /// Whether responses stream token by token (TTFT, ITL and TPOT are defined).
    pub const fn streams(self) -> bool {
        !matches!(self, Self::DeepSpeedMii | Self::OpenAiEmbeddings)
    }

    /// What a cloud's door cannot do that the checks would ask of it, for `inferprobe check`.
    pub const fn limits(self) -> Option<&'static str> {
        Some(match self {
            Self::Bedrock => {
                "Bedrock's Converse API streams no logprobs and takes no seed: a canary asks known-answer and structured prompts at temperature 0 alone; no response_format (ask for a forced tool call); no images, videos or sessions"
            }
            Self::AnthropicBedrock | Self::AnthropicVertex => {
                "Anthropic's Messages API has no logprobs and no seed: a canary asks known-answer and structured prompts at temperature 0 alone; no response_format (ask for a forced tool call); no images, videos or sessions through this door"
            }
            Self::Gemini | Self::VertexGemini => {
                "Gemini's logprobs (`logprobsResult`) are not read: a canary asks known-answer and structured prompts (temperature 0 and a seed); no images, videos or sessions"
            }
            Self::AzureOpenAi => {
                "logprobs and seed as OpenAI's chat API (Azure's models that refuse them answer HTTP 400); no images, videos or sessions"
            }
            _ => return None,
        })
    }

    /// Whether requests carry a prompt text whose output can be validated and counted.
    pub const fn generates_text(self) -> bool {
        !matches!(self, Self::OpenAiEmbeddings)
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug)]
pub struct Target {
    /// Unique among running targets: the name of a configured target; discovered ones add
    /// where they were found (`vllm/inference/vllm-0`).
    pub id: String,
    /// The `target` label: a configured target's name, or the discovery block's.
    pub name: String,
    /// Where a discovered target came from (object, node), for the status page and /config.
    pub origin: Option<String>,
    pub backend: BackendKind,
    /// The full request URL: base `url` joined with the backend's (or configured) endpoint.
    pub url: Url,
    pub model: String,

    /// Mean arrivals per second (open loop), for this probe process.
    pub rate: f64,
    /// The total rate across every probe pod of the fleet (`fleet_rate`): each pod runs its
    /// share, `fleet_rate / fleet size`, which changes as probe pods come and go.
    pub fleet_rate: Option<f64>,
    /// Gamma shape of inter-arrival gaps: 1 is Poisson, < 1 burstier, > 1 more regular.
    pub burstiness: f64,
    pub max_concurrency: usize,

    /// Prompt text, max_tokens and model for each probe.
    pub prompts: PromptSource,
    pub ignore_eos: bool,
    /// A workload answer that was reasoning alone, cut at its budget, fails the probe
    /// (`reasoning_exhausted = "error"`); otherwise it counts as a success.
    pub reasoning_exhausted_fails: bool,
    /// `/probe` may probe it at scrape time (`probe_endpoint = true`): each costs a
    /// workload request that no budget or rate governs but the scraper's.
    pub probe_endpoint: bool,
    /// Sampling parameters to send, only those the user set (server defaults otherwise).
    pub sampling: serde_json::Map<String, serde_json::Value>,
    /// Merged into the request body last, overriding anything inferprobe would send.
    pub extra_body: serde_json::Map<String, serde_json::Value>,

    pub include_usage: bool,
    pub continuous_usage_stats: bool,

    pub headers: http::HeaderMap,
    pub api_key: Option<Secret>,
    /// A cloud's credentials (SigV4 for Bedrock) when the target uses them, not a key.
    pub credentials: Option<crate::auth::CloudCredentials>,
    /// Static labels for every series of this target (global labels, then the target's),
    /// sorted by name; the label names were validated.
    pub labels: Vec<(String, String)>,
    pub request_id_prefix: String,

    pub timeouts: Timeouts,
    pub limits: Limits,
    pub validation: Validation,
    pub options: BackendOptions,
    pub slo: Option<Slo>,
    /// Send a W3C `traceparent` (a new trace per probe), and this `tracestate` with it.
    pub trace_context: bool,
    pub tracestate: Option<String>,
    /// Correctness canary checks, next to the latency probes.
    pub canary: Option<std::sync::Arc<CanarySpec>>,
    /// The prefix-cache check (docs/prefix-cache.md), off unless set.
    pub prefix_cache: Option<prefix_cache::PrefixCacheSpec>,
    /// The session check (docs/sessions.md), off unless set.
    pub session: Option<std::sync::Arc<session::SessionSpec>>,
    /// The sampler check (docs/sampling.md), off unless set.
    pub sampler: Option<std::sync::Arc<sampling::SamplingSpec>>,
    /// The adapter check (docs/adapters.md), off unless set.
    pub adapters: Option<std::sync::Arc<adapters::AdapterSpec>>,
    /// The controller revision of the pod behind a discovered target (see
    /// `discovery::owner::REVISION_LABELS`): the canary's default group. Never a label.
    pub revision: Option<String>,
    /// The workload that owns that pod (`discovery::owner::workload`). Never a label.
    pub workload: Option<String>,
    /// When the pod behind a discovered target was created (Unix seconds): the oldest
    /// pod's group is its block's canary baseline. Never a label.
    pub created: Option<i64>,
    pub connection: ConnectionMode,
    pub tls: TlsOptions,
    /// Skip arrivals (reason `budget`) once this many max_tokens were sent in the last hour.
    pub max_output_tokens_per_hour: Option<u64>,
    /// Changes whenever anything about the target changes, API key and TLS files
    /// included: a reload restarts exactly the targets whose fingerprint changed.
    pub fingerprint: u64,
}

impl Target {
    /// The canary group this replica is judged in (its version): the values of the
    /// canary's `group_by` labels, else its controller revision. `None` without a canary,
    /// or where nothing tells the version (a static target).
    pub fn canary_group(&self) -> Option<String> {
        let spec = self.canary.as_ref()?;
        spec.group_of(&self.labels, self.revision.as_deref())
    }
}

/// Thresholds a successful probe must meet to count as good, and the objective.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slo {
    pub ttft: Option<Duration>,
    pub tpot: Option<Duration>,
    /// Every gap between tokens must be within this.
    pub itl: Option<Duration>,
    pub e2el: Option<Duration>,
    /// Target fraction of good probes, e.g. 0.99.
    pub objective: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionMode {
    /// Keep-alive connections from a pool, as most clients do.
    Reuse,
    /// A new connection for every probe, so connection setup (and TLS) is inside TTFT.
    Fresh,
}

#[derive(Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Extra trusted roots (PEM), on top of the system's.
    pub ca_pem: Option<Vec<u8>>,
    /// Client certificate chain and key (PEM) for mutual TLS.
    pub identity_pem: Option<Secret>,
    pub insecure_skip_verify: bool,
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("ca", &self.ca_pem.is_some())
            .field("client_certificate", &self.identity_pem.is_some())
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .finish()
    }
}

/// Settings only some wire formats use.
#[derive(Clone, Debug, PartialEq)]
pub struct BackendOptions {
    /// `openai-embeddings`: the vector length a success requires.
    pub embedding_dimensions: Option<usize>,
    /// `openai-audio`: the generated WAV.
    pub audio: AudioSpec,
    /// `anthropic`: the `anthropic-version` header.
    pub anthropic_version: String,
    /// `openai`, `openai-chat`: `max_tokens` (every server) or `max_completion_tokens`
    /// (required by OpenAI's reasoning models).
    pub max_tokens_field: &'static str,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AudioSpec {
    pub seconds: f64,
    /// 0 for silence.
    pub tone_hz: f64,
    pub language: Option<String>,
}

/// Bounds on one response, so a hostile or broken server cannot grow a probe without end.
/// Exceeding one fails the probe as `too_large`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest single SSE event.
    pub max_event_bytes: usize,
    /// Largest response body.
    pub max_response_bytes: u64,
    /// Most SSE events in one response.
    pub max_events: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP (and TLS) connection establishment.
    pub connect: Duration,
    /// From t0 to the first token.
    pub ttft: Duration,
    /// Longest silence between events after the first token.
    pub stall: Duration,
    /// From t0 to the end of the response.
    pub request: Duration,
}

/// A credential. Never printed: `Debug` and `Display` show a placeholder.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Self(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}
