//! `inferprobe simulate`'s flags: the latencies, faults, TLS and prefill costs of the
//! simulated server (also built directly by the tests, with `..SimConfig::default()`).

use std::time::Duration;

use super::faults::{self, Fault};

#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct SimConfig {
    /// Time to first token.
    #[arg(long, default_value = "50ms", value_parser = humantime::parse_duration)]
    pub ttft: Duration,
    /// Time per output token after the first.
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub itl: Duration,
    /// Uniform relative jitter on every delay: 0.2 means ±20%.
    #[arg(long, default_value_t = 0.0)]
    pub jitter: f64,
    /// Tokens per streamed chunk: a count, or a list cycled over the chunks (`2,1,3,2`),
    /// as speculative decoding accepts a varying number of draft tokens per step.
    #[arg(long, default_value = "1", value_parser = ChunkSizes::parse)]
    pub tokens_per_chunk: ChunkSizes,
    /// Reasoning tokens generated (at `itl` each) before the first visible token, billed in
    /// usage and broken out (`reasoning_tokens`) but never streamed: an o-series model.
    #[arg(long, default_value_t = 0)]
    pub hidden_reasoning: u32,
    /// The first N output tokens are streamed reasoning (chat `delta.reasoning_content`,
    /// Responses `response.reasoning_text.delta`; the other dialects stream them as text),
    /// broken out in usage: a reasoning model behind a reasoning parser. At or above the
    /// output length, the answer is reasoning alone (finish `length`).
    #[arg(long, default_value_t = 0)]
    pub reasoning: u32,
    /// Output length, overriding the request's max_tokens.
    // NonZero to save four bytes (see `prefill`); 0 still means 1, as the planner clamps.
    #[arg(long, value_parser = at_least_one)]
    pub output_tokens: Option<std::num::NonZeroU32>,
    /// Send no usage even when the request asks for it.
    #[arg(long = "no-usage", action = clap::ArgAction::SetFalse)]
    pub usage: bool,
    /// Ignore `continuous_usage_stats` requests (usage only at the end).
    #[arg(long = "no-continuous-usage", action = clap::ArgAction::SetFalse)]
    pub continuous_usage: bool,
    /// Do not send the role-only first chat chunk.
    #[arg(long = "no-role-chunk", action = clap::ArgAction::SetFalse)]
    pub role_chunk: bool,
    // The help lists every fault there is, from `Fault::ALL` (a doc comment listed 10 of 17).
    #[arg(
        long = "fault",
        value_name = "NAME=P",
        value_parser = faults::parse_fault_spec,
        help = faults::help()
    )]
    pub faults: Vec<(Fault, f64)>,
    /// How long `stall` and `ttft_stall` pause.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub stall: Duration,
    /// Seed for fault draws and jitter.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Length of the vectors `/v1/embeddings` returns.
    #[arg(long, default_value_t = 16)]
    pub embedding_dimensions: u32,
    /// The `drip` fault sends one byte per this interval.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub drip_interval: Duration,
    /// Serve HTTPS with this certificate chain (PEM)...
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// ...and this private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Require client certificates signed by this CA (PEM): mutual TLS.
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<std::path::PathBuf>,
    /// Wait this long after a connection is accepted before answering its TLS handshake: a
    /// slow handshake (the probe's `tls` phase) on a local machine.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration, requires = "tls_cert")]
    pub tls_handshake_delay: Duration,
    /// Check every Bedrock request's SigV4 signature with this secret access key (any
    /// access key id; an expired `sim-expires-<unix>` session token is refused).
    #[arg(long, env = "INFERPROBE_SIM_SIGV4_SECRET", hide_env_values = true)]
    pub sigv4_secret: Option<String>,
    /// Append, per streamed response, when the request arrived and when each token chunk
    /// was handed to the connection (JSON lines, wall-clock nanoseconds): ground truth for
    /// the fidelity benchmark.
    #[arg(long)]
    pub timeline_file: Option<std::path::PathBuf>,
    // What images and videos add to the time to first token. Boxed (and `output_tokens`
    // NonZero): `SimConfig` is a CLI enum variant, which clippy keeps within 200 bytes of
    // the others.
    #[command(flatten)]
    pub prefill: Box<Prefill>,
    /// The toy model that answers greedy requests (the correctness canary's).
    #[command(flatten)]
    pub model: Box<super::model::ModelFlags>,
    /// Several replicas behind one gateway: each its own prefix cache.
    #[command(flatten)]
    pub gateway: Box<Gateway>,
    /// The context window, as vLLM's `--max-model-len`: a request whose prompt and
    /// `max_tokens` exceed it gets vLLM's HTTP 400, and `/v1/models` reports it as
    /// `max_model_len` (without it, no window is enforced and none reported).
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_model_len: Option<u64>,
    /// LoRA adapters, as vLLM serves them (`super::adapters`).
    #[command(flatten)]
    pub lora: Box<super::adapters::LoraFlags>,
    /// A hosted API's request quota (`super::ratelimit`).
    #[command(flatten)]
    pub limits: Box<super::ratelimit::RateLimitFlags>,
}

/// `--replicas N --route R`: the simulator as a gateway in front of N replicas, each with
/// its own prefix cache, so a prefix-cache check through it measures routing affinity.
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct Gateway {
    /// Replicas behind the gateway (1: a single server).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub replicas: u16,
    /// How the gateway picks a replica: `round-robin`, `prefix-affinity` (by the
    /// prompt's first block, as a prefix-aware router sends a shared prefix to the replica
    /// that holds it), `session-header` (by the value of `--route-header`; without it,
    /// round robin) or `first-message` (by the first message's text: chat's `messages[0]`,
    /// Anthropic's `system`, Responses' `instructions`, else the first message).
    #[arg(long, value_enum, default_value_t = Route::RoundRobin)]
    pub route: Route,
    /// The request header `--route session-header` hashes.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_ROUTE_HEADER)]
    pub route_header: String,
    /// A fault on one replica only, `REPLICA=NAME` (every request it serves; replicas
    /// count from 0) or `REPLICA=NAME=P` (repeatable): one gateway over replicas that
    /// misbehave differently. Drawn before `--fault`'s.
    #[arg(long = "replica-fault", value_name = "REPLICA=NAME[=P]",
          value_parser = super::faults::parse_replica_fault)]
    pub replica_faults: Vec<(u16, Fault, f64)>,
}

/// `--route-header`'s default.
pub const DEFAULT_ROUTE_HEADER: &str = "x-session-id";

impl Default for Gateway {
    fn default() -> Self {
        Self {
            replicas: 1,
            route: Route::RoundRobin,
            route_header: DEFAULT_ROUTE_HEADER.into(),
            replica_faults: Vec::new(),
        }
    }
}

impl Gateway {
    /// Replica `replica`'s own faults, with their probabilities.
    pub fn faults_of(&self, replica: usize) -> Vec<(Fault, f64)> {
        self.replica_faults
            .iter()
            .filter(|(r, _, _)| usize::from(*r) == replica)
            .map(|&(_, fault, p)| (fault, p))
            .collect()
    }

    /// Every replica a `--replica-fault` names exists and its probabilities can be drawn.
    pub fn validate(&self) -> Result<(), String> {
        for &(replica, _, _) in &self.replica_faults {
            if replica >= self.replicas {
                return Err(format!(
                    "--replica-fault names replica {replica}, but there are {} (from 0)",
                    self.replicas
                ));
            }
            faults::validate(&self.faults_of(usize::from(replica)))?;
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Route {
    RoundRobin,
    PrefixAffinity,
    SessionHeader,
    FirstMessage,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportCached {
    Normal,
    PdDecode,
    HitOnly,
}

impl ReportCached {
    /// What usage says of `cached` of `prompt_tokens` (`None`: no prefix cache).
    pub fn report(self, cached: Option<u64>, prompt_tokens: u64) -> Option<u64> {
        match self {
            Self::Normal => cached,
            Self::PdDecode => cached.map(|_| prompt_tokens.saturating_sub(1)),
            Self::HitOnly => cached.filter(|c| *c > 0),
        }
    }
}

/// `--tokens-per-chunk`: the sizes of successive chunks, cycled; each at least one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkSizes(Box<[u32]>);

impl ChunkSizes {
    fn parse(text: &str) -> Result<Self, String> {
        let sizes = text
            .split(',')
            .map(|n| match n.trim().parse::<u32>() {
                Ok(0) | Err(_) => Err(format!("`{n}` is not a positive token count")),
                Ok(n) => Ok(n),
            })
            .collect::<Result<Box<[u32]>, _>>()?;
        Ok(Self(sizes))
    }

    /// The size of chunk `j` (0-based).
    pub fn nth(&self, j: u64) -> u64 {
        let len = self.0.len().max(1) as u64;
        self.0
            .get((j % len) as usize)
            .map_or(1, |&k| u64::from(k.max(1)))
    }
}

impl From<u32> for ChunkSizes {
    fn from(k: u32) -> Self {
        Self(Box::new([k.max(1)]))
    }
}

/// `--output-tokens`: a count, 0 read as 1.
fn at_least_one(text: &str) -> Result<std::num::NonZeroU32, String> {
    let n: u32 = text.parse().map_err(|e| format!("{e}"))?;
    Ok(std::num::NonZeroU32::MIN.saturating_add(n.saturating_sub(1)))
}

/// What lengthens the prefill beyond `--ttft`: a request's media, and the prompt tokens
/// its prefix cache did not serve.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct Prefill {
    /// Time to first token added per prompt token not served from the prefix cache (the
    /// prefill a cache hit saves).
    #[arg(
        long = "prefill-per-token",
        value_name = "DURATION",
        default_value = "0s",
        value_parser = humantime::parse_duration
    )]
    pub per_token: Duration,
    /// Prefix cache size in blocks of `--prefix-block-tokens` prompt words, least recently
    /// used evicted first; its hits are reported as usage's cached tokens. 0: no prefix
    /// cache, and no cached tokens reported (as vLLM without
    /// `--enable-prompt-tokens-details`).
    #[arg(long = "prefix-cache-blocks", value_name = "BLOCKS", default_value_t = DEFAULT_PREFIX_CACHE_BLOCKS)]
    pub prefix_cache_blocks: usize,
    /// Prompt words per cached block: vLLM's 16 on GPU, 128 on CPU, 512 or more for hybrid
    /// models.
    #[arg(long = "prefix-block-tokens", value_name = "TOKENS", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub block_tokens: u32,
    /// As llama-server's `--cache-reuse N`: also serve runs of at least N words that match
    /// the replica's previous prompt at a shifted position, after the first difference
    /// (0: off).
    #[arg(long = "cache-reuse", value_name = "TOKENS", default_value_t = 0)]
    pub cache_reuse: usize,
    /// How usage reports cached tokens: as they are (`normal`), as vLLM's decode side of a
    /// prefill/decode split does (`pd-decode`: the prompt less one, on every request), or
    /// only on a hit (`hit-only`: no `prompt_tokens_details` when none were cached).
    #[arg(long = "report-cached", value_name = "HOW", value_enum, default_value_t = ReportCached::Normal)]
    pub report_cached: ReportCached,
    /// Anthropic's minimum cacheable prompt: a breakpoint after fewer words caches nothing
    /// (1,024 for Sonnet 4.5, 4,096 for Opus 4.5).
    #[arg(
        long = "anthropic-min-cacheable",
        value_name = "TOKENS",
        default_value_t = 1024
    )]
    pub anthropic_min_cacheable: u64,
    /// Time to first token added per image or video in the request (the vision encoder's
    /// share of prefill).
    #[arg(
        long = "prefill-per-image",
        value_name = "DURATION",
        default_value = "0s",
        value_parser = humantime::parse_duration
    )]
    pub per_image: Duration,
    /// Time to first token added per megapixel of the request's images.
    #[arg(
        long = "prefill-per-megapixel",
        value_name = "DURATION",
        default_value = "0s",
        value_parser = humantime::parse_duration
    )]
    pub per_megapixel: Duration,
}

impl Default for Prefill {
    /// As the flags' defaults.
    fn default() -> Self {
        Self {
            per_token: Duration::ZERO,
            prefix_cache_blocks: DEFAULT_PREFIX_CACHE_BLOCKS,
            block_tokens: 16,
            cache_reuse: 0,
            report_cached: ReportCached::Normal,
            anthropic_min_cacheable: 1024,
            per_image: Duration::ZERO,
            per_megapixel: Duration::ZERO,
        }
    }
}

/// `--prefix-cache-blocks`' default: 64k prompt words, plenty for probes.
const DEFAULT_PREFIX_CACHE_BLOCKS: usize = 4096;

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            ttft: Duration::from_millis(50),
            itl: Duration::from_millis(10),
            jitter: 0.0,
            tokens_per_chunk: ChunkSizes::from(1),
            hidden_reasoning: 0,
            reasoning: 0,
            output_tokens: None,
            usage: true,
            continuous_usage: true,
            role_chunk: true,
            faults: Vec::new(),
            stall: Duration::from_secs(3600),
            seed: None,
            embedding_dimensions: 16,
            drip_interval: Duration::from_secs(1),
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            tls_handshake_delay: Duration::ZERO,
            sigv4_secret: None,
            timeline_file: None,
            prefill: Box::default(),
            model: Box::default(),
            gateway: Box::default(),
            max_model_len: None,
            lora: Box::default(),
            limits: Box::default(),
        }
    }
}

#[cfg(test)]
mod tests;
