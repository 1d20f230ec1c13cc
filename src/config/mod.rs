//! Configuration: loading (file → `INFERPROBE_*` env → CLI flags, merged by figment) and the
//! validated, typed [`Config`] the rest of the daemon runs on.
//!
//! Raw serde structs ([`raw`]) only describe what may be written; [`validate`] is the one
//! place that checks it and fills in defaults, so every other module can trust its input.
//! Errors name the key path (`targets[1].rate`) and the source (file or env variable).

mod adapters;
mod canary;
mod discovery;
mod fields;
mod media;
mod operations;
mod prefix_cache;
mod prompts;
mod raw;
mod sampler;
mod session;
mod target;
mod tracing;
mod validate;

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};

pub use crate::endpoint::{
    AudioSpec, BackendKind, BackendOptions, ConnectionMode, Limits, Secret, Slo, Target, Timeouts,
    TlsOptions,
};

pub use discovery::{
    Discovery, Fleet, Found, Kubernetes, PoolVersion, Port, Source, check_selector,
};
pub use fields::RESERVED_LABELS;
pub use raw::{
    RawAdapters, RawCanary, RawConfig, RawDepth, RawDiscovery, RawDuration, RawKubernetes,
    RawMedia, RawMetrics, RawPort, RawPrefixCache, RawSampler, RawSamplerSettings, RawSession,
    RawSlo, RawTarget, RawTracing, RawValidation,
};
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
    pub kubernetes: Kubernetes,
    /// Blocks that find targets at run time (Kubernetes objects, file_sd files).
    pub discovery: Vec<Arc<Discovery>>,
    /// Where probe spans go (OTLP), if anywhere.
    pub tracing: Option<crate::otlp::TracingExport>,
    /// Which buckets the per-target histograms carry in a protobuf scrape.
    pub histograms: crate::metrics::HistogramMode,
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
    /// `check --no-secrets` (see [`RawConfig::skip_secrets`]).
    pub skip_secrets: bool,
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
    let mut raw: RawConfig = figment.extract().map_err(from_figment)?;
    raw.skip_secrets = overrides.skip_secrets;
    Ok(raw)
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
    let reason = match &err.kind {
        figment::error::Kind::UnknownField(field, expected) => unknown_key(field, expected),
        kind => kind.to_string(),
    };
    ConfigError {
        key: key_path(&err.path),
        reason,
        source,
    }
}

/// A figment path as the other errors and the docs spell a key: `targets[0].rate`.
fn key_path(path: &[String]) -> String {
    let mut key = String::new();
    for part in path {
        if part.parse::<usize>().is_ok() {
            key.push_str(&format!("[{part}]"));
        } else {
            if !key.is_empty() {
                key.push('.');
            }
            key.push_str(part);
        }
    }
    key
}

/// An unknown key, and the known one it is closest to where it is one slip away (as cargo
/// and clap suggest), else where the keys are documented: the whole list of a target's
/// ~65 keys helps nobody find one.
fn unknown_key(field: &str, expected: &[&str]) -> String {
    let closest = expected
        .iter()
        .map(|key| (strsim::jaro(field, key), *key))
        .filter(|(similarity, _)| *similarity > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match closest {
        Some((_, key)) => format!("unknown key `{field}`: did you mean `{key}`?"),
        None if expected.len() <= 8 => format!(
            "unknown key `{field}`: expected one of {}",
            expected
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => format!("unknown key `{field}` (docs/configuration.md lists the keys)"),
    }
}

#[cfg(test)]
mod tests;
