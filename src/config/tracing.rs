//! Validation of `[tracing]`: where probe spans are exported (OTLP), how, with which
//! headers (read from a file or the environment, never from the config itself), and what
//! share of probes is sampled.

use http::{HeaderName, HeaderValue};

use super::{ConfigError, RawTracing};
use crate::endpoint::Secret;
use crate::otlp::{ExportProtocol, TracingExport};

const MAX_HEADERS_BYTES: u64 = 64 * 1024;

pub(super) fn tracing(
    raw: &RawTracing,
    skip_secrets: bool,
) -> Result<Option<TracingExport>, ConfigError> {
    let at = |key: &str| format!("tracing.{key}");
    let Some(endpoint) = &raw.otlp_endpoint else {
        let set = [
            ("protocol", raw.protocol.is_some()),
            ("headers_file", raw.headers_file.is_some()),
            ("headers_env", raw.headers_env.is_some()),
            ("sampling_ratio", raw.sampling_ratio.is_some()),
            ("queue_size", raw.queue_size.is_some()),
        ];
        return match set.iter().find(|(_, set)| *set) {
            Some((key, _)) => Err(ConfigError::new(at(key), "needs tracing.otlp_endpoint")),
            None => Ok(None),
        };
    };
    let endpoint = url::Url::parse(endpoint)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| {
            ConfigError::new(
                at("otlp_endpoint"),
                format!("`{endpoint}` is not an http(s) URL"),
            )
        })?;
    let protocol = match raw.protocol.as_deref() {
        None | Some("http/protobuf") => ExportProtocol::HttpProtobuf,
        Some("grpc") => ExportProtocol::Grpc,
        Some(other) => {
            return Err(ConfigError::new(
                at("protocol"),
                format!("`{other}`: use \"http/protobuf\" (port 4318) or \"grpc\" (port 4317)"),
            ));
        }
    };
    let sampling_ratio = raw.sampling_ratio.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&sampling_ratio) {
        return Err(ConfigError::new(
            at("sampling_ratio"),
            format!("{sampling_ratio} is not between 0 and 1"),
        ));
    }
    let queue_size = raw.queue_size.unwrap_or(2048);
    if !(1..=1_000_000).contains(&queue_size) {
        return Err(ConfigError::new(
            at("queue_size"),
            "must be between 1 and 1000000",
        ));
    }
    let mut headers = Vec::new();
    // The exporter's auth headers are secrets: `--no-secrets` reads neither.
    if let Some(path) = raw.headers_file.as_ref().filter(|_| !skip_secrets) {
        let text = crate::files::read_text(std::path::Path::new(path), MAX_HEADERS_BYTES)
            .map_err(|e| ConfigError::new(at("headers_file"), e))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let pair = line.split_once(':').or_else(|| line.split_once('='));
            let Some((name, value)) = pair else {
                return Err(ConfigError::new(
                    at("headers_file"),
                    format!("{path} line {}: expected `name: value`", i + 1),
                ));
            };
            headers.push(header(&at("headers_file"), name, value)?);
        }
    }
    if let Some(var) = raw.headers_env.as_ref().filter(|_| !skip_secrets) {
        let value = std::env::var(var).map_err(|_| {
            ConfigError::new(
                at("headers_env"),
                format!("environment variable {var} is not set or not UTF-8"),
            )
        })?;
        // OTEL_EXPORTER_OTLP_HEADERS' format: `name=value,name2=value2`.
        for pair in value.split(',').filter(|p| !p.trim().is_empty()) {
            let Some((name, value)) = pair.split_once('=') else {
                return Err(ConfigError::new(
                    at("headers_env"),
                    format!("{var} holds `name=value` pairs separated by commas"),
                ));
            };
            headers.push(header(&at("headers_env"), name, value)?);
        }
    }
    Ok(Some(TracingExport {
        endpoint,
        protocol,
        headers,
        sampling_ratio,
        queue_size: queue_size as usize,
    }))
}

/// A header whose value is a secret: checked, never shown.
fn header(key: &str, name: &str, value: &str) -> Result<(String, Secret), ConfigError> {
    let (name, value) = (name.trim(), value.trim());
    if HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(ConfigError::new(
            key,
            format!("`{name}` is not a header name"),
        ));
    }
    if value.is_empty() || HeaderValue::from_str(value).is_err() {
        return Err(ConfigError::new(
            key,
            format!("the value of `{name}` is empty or not a valid header value"),
        ));
    }
    Ok((name.to_ascii_lowercase(), Secret::new(value.to_owned())))
}
