//! Validation of what running in production needs: SLOs, connection mode, TLS files,
//! the hourly token budget, labels from the environment, the fingerprint that tells a
//! reload which targets changed, and the redacted view `/config` serves.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::fields::{duration, in_range};
use super::{ConfigError, ConnectionMode, RawConfig, RawTarget, Secret, Slo, TlsOptions};

type At<'a> = &'a dyn Fn(&str) -> String;

pub(super) fn slo(at: At, t: &RawTarget) -> Result<Option<Slo>, ConfigError> {
    let Some(raw) = &t.slo else {
        return Ok(None);
    };
    let threshold =
        |name: &str, raw: &Option<super::RawDuration>| -> Result<Option<Duration>, ConfigError> {
            let key = at(&format!("slo.{name}"));
            match raw {
                None => Ok(None),
                Some(raw) => {
                    let value = duration(&key, Some(raw), Duration::ZERO)?;
                    if value.is_zero() {
                        return Err(ConfigError::new(key, "must be greater than zero"));
                    }
                    Ok(Some(value))
                }
            }
        };
    let slo = Slo {
        ttft: threshold("ttft", &raw.ttft)?,
        tpot: threshold("tpot", &raw.tpot)?,
        itl: threshold("itl", &raw.itl)?,
        e2el: threshold("e2el", &raw.e2el)?,
        objective: raw.objective.unwrap_or(0.99),
    };
    if !(slo.objective > 0.0 && slo.objective < 1.0) {
        return Err(ConfigError::new(
            at("slo.objective"),
            format!("{} must be between 0 and 1 (e.g. 0.99)", slo.objective),
        ));
    }
    Ok(Some(slo))
}

pub(super) fn connection(at: At, t: &RawTarget) -> Result<ConnectionMode, ConfigError> {
    match t.connection.as_deref() {
        None | Some("reuse") => Ok(ConnectionMode::Reuse),
        Some("fresh") => Ok(ConnectionMode::Fresh),
        Some(other) => Err(ConfigError::new(
            at("connection"),
            format!("`{other}` is not `reuse` or `fresh`"),
        )),
    }
}

/// `reasoning_exhausted`: whether such an answer fails the probe (`error`, the default).
pub(super) fn reasoning_exhausted(at: At, t: &RawTarget) -> Result<bool, ConfigError> {
    match t.reasoning_exhausted.as_deref() {
        None | Some("error") => Ok(true),
        Some("success") => Ok(false),
        Some(other) => Err(ConfigError::new(
            at("reasoning_exhausted"),
            format!("`{other}` is not `error` or `success`"),
        )),
    }
}

/// A PEM bundle of a few hundred certificates is well under this.
const MAX_TLS_FILE_BYTES: u64 = 4 << 20;

fn read(key: String, path: &str) -> Result<Vec<u8>, ConfigError> {
    crate::files::read_file(Path::new(path), MAX_TLS_FILE_BYTES)
        .map_err(|e| ConfigError::new(key, e))
}

/// TLS files are read (and parsed) here, so a bad certificate fails `check` and a reload
/// picks up a rotated one.
pub(super) fn tls(at: At, t: &RawTarget, skip_secrets: bool) -> Result<TlsOptions, ConfigError> {
    let ca_pem = match &t.tls_ca_file {
        None => None,
        Some(path) => {
            let pem = read(at("tls_ca_file"), path)?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                ConfigError::new(
                    at("tls_ca_file"),
                    format!("{path}: not a PEM certificate bundle: {e}"),
                )
            })?;
            if certs.is_empty() {
                return Err(ConfigError::new(
                    at("tls_ca_file"),
                    format!("{path}: no certificate found"),
                ));
            }
            Some(pem)
        }
    };
    let identity_pem = match (&t.tls_client_cert_file, &t.tls_client_key_file) {
        (None, None) => None,
        // Mutual TLS's pair comes from a Secret: both given is all `--no-secrets` checks.
        (Some(_), Some(_)) if skip_secrets => Some(Secret::new(String::new())),
        (Some(cert), Some(key)) => {
            let mut pem = read(at("tls_client_cert_file"), cert)?;
            pem.push(b'\n');
            pem.extend(read(at("tls_client_key_file"), key)?);
            reqwest::Identity::from_pem(&pem).map_err(|e| {
                ConfigError::new(
                    at("tls_client_cert_file"),
                    format!("{cert} with {key}: not a PEM certificate and key: {e}"),
                )
            })?;
            let pem = String::from_utf8(pem).map_err(|_| {
                ConfigError::new(at("tls_client_key_file"), format!("{key} is not PEM text"))
            })?;
            Some(Secret::new(pem))
        }
        _ => {
            return Err(ConfigError::new(
                at("tls_client_cert_file"),
                "set both tls_client_cert_file and tls_client_key_file for mutual TLS",
            ));
        }
    };
    Ok(TlsOptions {
        ca_pem,
        identity_pem,
        insecure_skip_verify: t.insecure_skip_verify.unwrap_or(false),
    })
}

pub(super) fn budget(at: At, t: &RawTarget) -> Result<Option<u64>, ConfigError> {
    t.max_output_tokens_per_hour
        .map(|n| in_range(&at("max_output_tokens_per_hour"), n, 1, u64::MAX))
        .transpose()
}

/// `labels_from_env`: each label's value read from its environment variable now.
pub(super) fn env_labels(
    raw: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    raw.iter()
        .map(|(label, var)| match std::env::var(var) {
            Ok(value) if !value.is_empty() => Ok((label.clone(), value)),
            _ => Err(ConfigError::new(
                format!("labels_from_env.{label}"),
                format!("environment variable {var} is not set"),
            )),
        })
        .collect()
}

/// A hash of everything that defines a running target.
pub(super) fn fingerprint(
    t: &RawTarget,
    labels: &BTreeMap<String, String>,
    secret: Option<&Secret>,
    tls: &TlsOptions,
) -> u64 {
    let mut h = DefaultHasher::new();
    serde_json::to_string(t).unwrap_or_default().hash(&mut h);
    labels.hash(&mut h);
    secret.map(Secret::expose).hash(&mut h);
    tls.ca_pem.hash(&mut h);
    tls.identity_pem.as_ref().map(Secret::expose).hash(&mut h);
    h.finish()
}

/// Header and body keys whose values are credentials: a word of the name (split at `-`
/// and `_`) is one of these, so `x-api-key` and `access_token` are, `max_tokens` is not.
fn sensitive(name: &str) -> bool {
    const WORDS: [&str; 9] = [
        "authorization",
        "cookie",
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "credential",
        "credentials",
    ];
    name.to_ascii_lowercase()
        .split(['-', '_'])
        .any(|word| WORDS.contains(&word))
}

fn redact_values(value: &mut Value) {
    if let Value::Object(map) = value {
        for (key, v) in map.iter_mut() {
            if sensitive(key) {
                *v = Value::from("[redacted]");
            } else {
                redact_values(v);
            }
        }
    }
}

/// The loaded configuration with every target's defaults applied, for `/config`. API keys
/// are never in it (only the variable or file that holds them); header and body values
/// that look like credentials are replaced.
pub(super) fn redacted(raw: &RawConfig, targets: &[RawTarget]) -> Value {
    let mut value = serde_json::to_value(RawConfig {
        defaults: RawTarget::default(),
        targets: targets.to_vec(),
        ..raw.clone()
    })
    .unwrap_or(Value::Null);
    let Value::Object(map) = &mut value else {
        return value;
    };
    let mut targets: Vec<&mut Value> = Vec::new();
    for (section, items) in map.iter_mut() {
        let Value::Array(items) = items else { continue };
        match section.as_str() {
            "targets" => targets.extend(items.iter_mut()),
            "discovery" => targets.extend(items.iter_mut().filter_map(|b| b.get_mut("template"))),
            _ => {}
        }
    }
    for target in targets {
        for field in ["headers", "extra_body"] {
            if let Some(v) = target.get_mut(field) {
                redact_values(v);
            }
        }
    }
    strip_nulls(&mut value);
    value
}

fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Fill `shown` (a target of `/config`) with the values `target` runs with where the file
/// left them to the built-in defaults: the timeouts, limits, rate and the rest a user
/// would otherwise have to look up (tests/docs_truths.rs holds them to
/// docs/configuration.md's defaults). Values written in the file are already there.
pub(super) fn fill_defaults(shown: &mut Value, target: &crate::endpoint::Target) {
    let Value::Object(map) = shown else { return };
    let duration = |d: std::time::Duration| Value::from(humantime::format_duration(d).to_string());
    let effective = [
        ("backend", Value::from(target.backend.as_str())),
        ("rate", Value::from(target.rate)),
        ("burstiness", Value::from(target.burstiness)),
        ("max_concurrency", Value::from(target.max_concurrency)),
        ("output_tokens", Value::from(target.prompts.output_tokens)),
        ("range_ratio", Value::from(target.prompts.range_ratio)),
        ("ignore_eos", Value::from(target.ignore_eos)),
        ("include_usage", Value::from(target.include_usage)),
        (
            "continuous_usage_stats",
            Value::from(target.continuous_usage_stats),
        ),
        (
            "request_id_prefix",
            Value::from(target.request_id_prefix.as_str()),
        ),
        ("connect_timeout", duration(target.timeouts.connect)),
        ("ttft_timeout", duration(target.timeouts.ttft)),
        ("stall_timeout", duration(target.timeouts.stall)),
        ("request_timeout", duration(target.timeouts.request)),
        (
            "max_event_bytes",
            Value::from(target.limits.max_event_bytes),
        ),
        (
            "max_response_bytes",
            Value::from(target.limits.max_response_bytes),
        ),
        ("max_events", Value::from(target.limits.max_events)),
        ("trace_context", Value::from(target.trace_context)),
        ("probe_endpoint", Value::from(target.probe_endpoint)),
        (
            "reasoning_exhausted",
            Value::from(if target.reasoning_exhausted_fails {
                "error"
            } else {
                "success"
            }),
        ),
        (
            "connection",
            Value::from(match target.connection {
                crate::endpoint::ConnectionMode::Reuse => "reuse",
                crate::endpoint::ConnectionMode::Fresh => "fresh",
            }),
        ),
    ];
    for (key, value) in effective {
        // A fleet_rate target's rate is its share of the fleet, set when the fleet is known.
        if key == "rate" && target.fleet_rate.is_some() {
            continue;
        }
        map.entry(key).or_insert(value);
    }
}
