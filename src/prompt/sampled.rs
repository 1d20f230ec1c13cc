//! What a sampled request asks (the sampler check's, docs/sampling.md): its settings, how
//! the server it goes to spells them and lists its logprobs, and a seed. Here, below the
//! modules that build requests (`backend`) and judge them (`sampling`), so both read it.

/// What the request asked of the sampler.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// Above 0: a sampled request.
    pub temperature: f64,
    /// 0: off.
    pub top_k: u32,
    /// 1: off.
    pub top_p: f64,
    /// 0: off.
    pub min_p: f64,
}

impl Params {
    /// Whether a correct sampler may keep a single token: a list naming one token alone is
    /// then a truncation, not evidence that the server did not draw.
    pub fn may_keep_one(&self) -> bool {
        self.temperature <= 0.0 || self.top_k == 1 || self.top_p < 1.0 || self.min_p > 0.0
    }
}

/// What the listed logprobs are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Semantics {
    Raw,
    Processed,
}

/// Which server's sampling semantics to assume (docs/sampling.md, "What each server
/// returns").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// Read `owned_by` in `/v1/models`: `vllm` or `llamacpp`, else [`Server::Unknown`].
    Auto,
    /// vLLM with its default `--logprobs-mode raw_logprobs`.
    Vllm,
    /// vLLM started with `--logprobs-mode processed_logprobs`.
    VllmProcessed,
    /// llama.cpp's server, asked for `post_sampling_probs`.
    LlamaCpp,
    /// Semantics not established (SGLang, TGI, hosted APIs): the diversity test only.
    Unknown,
}

impl Server {
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "auto" => Self::Auto,
            "vllm" => Self::Vllm,
            "vllm-processed" => Self::VllmProcessed,
            "llama.cpp" => Self::LlamaCpp,
            "unknown" => Self::Unknown,
            _ => return None,
        })
    }

    pub const NAMES: &'static str = "auto, vllm, vllm-processed, llama.cpp, unknown";

    /// What a server's `/v1/models` says it is.
    pub fn from_owned_by(owned_by: &str) -> Self {
        match owned_by {
            "vllm" => Self::Vllm,
            "llamacpp" => Self::LlamaCpp,
            _ => Self::Unknown,
        }
    }

    /// How its listed logprobs are read; `None`: not established.
    pub fn semantics(self) -> Option<Semantics> {
        match self {
            Self::Vllm => Some(Semantics::Raw),
            Self::VllmProcessed | Self::LlamaCpp => Some(Semantics::Processed),
            Self::Auto | Self::Unknown => None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Vllm => "vllm",
            Self::VllmProcessed => "vllm-processed",
            Self::LlamaCpp => "llama.cpp",
            Self::Unknown => "unknown",
        }
    }
}

/// A sampler check's request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampled {
    pub params: Params,
    /// Alternatives per token; 0: no logprobs (the diversity test).
    pub top_logprobs: u32,
    pub server: Server,
    /// A seeded pair's seed (the reproducibility report); none otherwise.
    pub seed: Option<u64>,
}

// Settings are validated finite numbers: equality is total.
impl Eq for Sampled {}
