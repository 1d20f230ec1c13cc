//! Configuration: loading (file → `INFERPROBE_*` env → CLI flags, merged by figment) and the
//! validated, typed [`Config`] the rest of the daemon runs on.
//!
//! Raw serde structs ([`raw`]) only describe what may be written; [`validate`] is the one
//! place that checks it and fills in defaults, so every other module can trust its input.
//! Errors name the key path (`targets[1].rate`) and the source (file or env variable).

mod fields;
mod operations;
mod prompts;
mod raw;
mod validate;

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use url::Url;

use crate::backend::BackendKind;
use crate::prompt::PromptSource;
use crate::validation::Validation;

pub use fields::RESERVED_LABELS;
pub use raw::{RawConfig, RawDuration, RawSlo, RawTarget, RawValidation};
pub use validate::validate;

/// Top-level keys that may be set from the environment.
const ENV_SECTIONS: [&str; 5] = ["listen", "seed", "shutdown_grace", "labels", "defaults"];

/// Exit status for a bad configuration (BSD `EX_USAGE`, as linkerd and sysexits use).
pub const EXIT_CONFIG: i32 = 64;

/// The environment prefix for configuration keys: `INFERPROBE_LISTEN`,
/// `INFERPROBE_DEFAULTS__RATE` (a double underscore separates nested keys).
pub const ENV_PREFIX: &str = "INFERPROBE_";

#[derive(Debug)]
pub struct Config {
    pub listen: SocketAddr,
    /// Seeds every random choice (arrivals, prompts, request ids) for reproducible tests.
    pub seed: Option<u64>,
    /// How long in-flight probes may run on after a shutdown signal.
    pub shutdown_grace: Duration,
    /// Check the config file for changes this often (opt-in).
    pub watch: Option<Duration>,
    /// Probes per target kept for the status page.
    pub status_page_probes: usize,
    pub targets: Vec<Arc<Target>>,
    /// The configuration as loaded (targets with their defaults applied), secrets and
    /// sensitive headers redacted: what `/config` serves.
    pub redacted: serde_json::Value,
    /// Files the configuration read (API keys, TLS), watched with the config file: a
    /// rotated Kubernetes Secret then takes effect by itself.
    pub files: Vec<std::path::PathBuf>,
}

#[derive(Debug)]
pub struct Target {
    pub name: String,
    pub backend: BackendKind,
    /// The full request URL: base `url` joined with the backend's (or configured) endpoint.
    pub url: Url,
    pub model: String,

    /// Mean arrivals per second (open loop).
    pub rate: f64,
    /// Gamma shape of inter-arrival gaps: 1 is Poisson, < 1 burstier, > 1 more regular.
    pub burstiness: f64,
    pub max_concurrency: usize,

    /// Prompt text, max_tokens and model for each probe.
    pub prompts: PromptSource,
    pub ignore_eos: bool,
    /// Sampling parameters to send, only those the user set (server defaults otherwise).
    pub sampling: serde_json::Map<String, serde_json::Value>,
    /// Merged into the request body last, overriding anything inferprobe would send.
    pub extra_body: serde_json::Map<String, serde_json::Value>,

    pub include_usage: bool,
    pub continuous_usage_stats: bool,

    pub headers: http::HeaderMap,
    pub api_key: Option<Secret>,
    /// Static labels for every series of this target (global labels, then the target's),
    /// sorted by name; the label names were validated.
    pub labels: Vec<(String, String)>,
    pub request_id_prefix: String,

    pub timeouts: Timeouts,
    pub limits: Limits,
    pub validation: Validation,
    pub options: BackendOptions,
    pub slo: Option<Slo>,
    pub connection: ConnectionMode,
    pub tls: TlsOptions,
    /// Skip arrivals (reason `budget`) once this many max_tokens were sent in the last hour.
    pub max_output_tokens_per_hour: Option<u64>,
    /// Changes whenever anything about the target changes, API key and TLS files
    /// included: a reload restarts exactly the targets whose fingerprint changed.
    pub fingerprint: u64,
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

/// A configuration problem: which key, what is wrong, and where the value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub reason: String,
    pub source: Option<String>,
}

impl ConfigError {
    pub fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            reason: reason.into(),
            source: None,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "invalid configuration: {}", self.reason)?;
        } else {
            write!(
                f,
                "invalid configuration at `{}`: {}",
                self.key, self.reason
            )?;
        }
        match &self.source {
            Some(source) => write!(f, " (from {source})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Values given as command-line flags; they win over the file and the environment.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    pub seed: Option<u64>,
}

/// Merge file, environment and flags, then validate.
pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
    validate(&load_raw(path, overrides)?)
}

/// `text` as the whole configuration file, without the environment or flags: the entry
/// point of the config fuzz target and property tests ([`load`] needs a file on disk and
/// reads the process environment). Errors are the ones [`load`] gives, without a source.
pub fn load_str(text: &str) -> Result<Config, ConfigError> {
    let raw = Figment::from(Toml::string(text))
        .extract()
        .map_err(from_figment)?;
    validate(&raw)
}

/// Read a file the configuration names: only a regular file (a device or a FIFO, such as
/// `/dev/zero` or `/dev/stdin`, would hang the load or exhaust memory) of at most `limit`
/// bytes. Symlinks are followed: Kubernetes mounts Secrets and ConfigMaps through them.
pub(crate) fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let name = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {name}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {name}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{name} is not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {name}: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!("{name} is larger than {limit} bytes"));
    }
    Ok(bytes)
}

/// [`read_file`] for text.
pub(crate) fn read_text(path: &Path, limit: u64) -> Result<String, String> {
    String::from_utf8(read_file(path, limit)?)
        .map_err(|_| format!("{} is not valid UTF-8", path.display()))
}

/// The merged, unvalidated configuration.
pub fn load_raw(path: Option<&Path>, overrides: &Overrides) -> Result<RawConfig, ConfigError> {
    let mut figment = Figment::new();
    if let Some(path) = path {
        if !path.is_file() {
            return Err(ConfigError::new(
                "",
                format!("config file {} does not exist", path.display()),
            ));
        }
        figment = figment.merge(Toml::file_exact(path));
    }
    figment = figment.merge(
        Env::prefixed(ENV_PREFIX)
            .split("__")
            // Only variables that address a configuration section: Kubernetes injects
            // INFERPROBE_SERVICE_HOST, INFERPROBE_PORT… for a Service named inferprobe, and
            // the CLI reads INFERPROBE_CONFIG / _LOG / _LOG_FORMAT itself. Unknown keys
            // *inside* a section are still errors.
            .filter(|key| {
                let section = key.as_str().split('.').next().unwrap_or("");
                ENV_SECTIONS.iter().any(|s| s.eq_ignore_ascii_case(section))
            }),
    );
    if let Some(listen) = &overrides.listen {
        figment = figment.merge(Serialized::default("listen", listen));
    }
    if let Some(seed) = overrides.seed {
        figment = figment.merge(Serialized::default("seed", seed));
    }
    figment.extract().map_err(from_figment)
}

fn from_figment(err: figment::Error) -> ConfigError {
    let source = err.metadata.as_ref().map(|meta| match &meta.source {
        Some(source) => format!("{} {source}", meta.name),
        // Name the exact variable rather than "INFERPROBE_ environment variable(s)".
        None if meta.name.contains("environment variable") => format!(
            "environment variable {ENV_PREFIX}{}",
            err.path.join("__").to_uppercase()
        ),
        None => meta.name.to_string(),
    });
    ConfigError {
        key: err.path.join("."),
        reason: err.kind.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests;
