//! One target, raw → typed [`Target`]: defaults, ranges, cross-field rules, secrets. Used
//! for configured targets and for every discovery template alike.
//!
//! Every check reports the full key path of the offending value so `inferprobe check` can
//! point at it. Secrets (API keys) are read here, from the environment or a file named in
//! the config, so a missing key is a config error at start, not a 401 storm later.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fields::{api_key, check_labels, endpoint_url, headers, in_range, timeouts};
use super::operations::{budget, connection, fingerprint, reasoning_exhausted, slo, tls};
use super::prompts::{Loaded, backend_options, prompt_source, validation};
use super::{ConfigError, Limits, RawTarget, Target};
use crate::endpoint::BackendKind;

const DEFAULT_RATE: f64 = 0.1;
const DEFAULT_MAX_CONCURRENCY: u64 = 4;
/// Far above any real response (a 64-token probe is a few KiB; even 100k tokens with
/// per-chunk usage stay under 64 MiB and 100k events), far below what would hurt the daemon.
const DEFAULT_LIMITS: Limits = Limits {
    max_event_bytes: crate::sse::DEFAULT_MAX_EVENT_BYTES,
    max_response_bytes: 64 << 20,
    max_events: 200_000,
};
const MAX_RATE: f64 = 1000.0; // a probe, not a load generator
/// One probe per ~11.6 days on average. Below it the mean gap (1/rate) stops fitting a
/// `Duration` (1e-300 made the scheduler panic converting it; 5e-324 made it infinite).
const MIN_RATE: f64 = 1e-6;
/// Gamma shapes beyond these are no longer a traffic pattern (coefficient of variation 32
/// or 0.03), and at the extremes Gamma(shape, 1/(rate·shape)) cannot be built (its scale
/// overflows or underflows), which left the target silently unscheduled.
const BURSTINESS_RANGE: (f64, f64) = (1e-3, 1e3);

pub(super) fn validate_target(
    key: &str,
    t: RawTarget,
    global_labels: &BTreeMap<String, String>,
    loaded: &mut Loaded,
) -> Result<Target, ConfigError> {
    let at = |field: &str| format!("{key}.{field}");
    let timeouts = timeouts(&at, &t)?;
    let name = t
        .name
        .clone()
        .ok_or_else(|| ConfigError::new(at("name"), "is required"))?;
    check_name(&at("name"), &name)?;
    let backend_name = t.backend.as_deref().unwrap_or("openai-chat");
    let backend = BackendKind::from_name(backend_name).ok_or_else(|| {
        ConfigError::new(
            at("backend"),
            format!(
                "unknown backend `{backend_name}` (expected one of: {})",
                BackendKind::NAMES.join(", ")
            ),
        )
    })?;
    let model = t
        .model
        .clone()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| ConfigError::new(at("model"), "is required"))?;
    let endpoint = super::fields::endpoint_template(&at, &t, backend)?;
    let url = endpoint_url(&at, t.url.as_deref(), Some(&endpoint), backend, &model)?;
    let prompts = prompt_source(&at, &t, &model, backend, loaded)?;
    let validation = validation(&at, &t, backend, prompts.tokenizer.is_some())?;
    let options = backend_options(&at, &t)?;
    let slo = slo(&at, &t)?;
    if let Some(slo) = &slo {
        if !backend.streams() && (slo.ttft.is_some() || slo.tpot.is_some() || slo.itl.is_some()) {
            return Err(ConfigError::new(
                at("slo"),
                format!("{backend} responses are not streamed: only an e2el threshold applies"),
            ));
        }
    }
    let connection = connection(&at, &t)?;
    let reasoning_exhausted_fails = reasoning_exhausted(&at, &t)?;
    let tls = tls(&at, &t, loaded.skip_secrets)?;
    let max_output_tokens_per_hour = budget(&at, &t)?;
    let api_key = api_key(
        &at,
        t.api_key_env.as_deref(),
        t.api_key_file.as_deref(),
        loaded.skip_secrets,
    )?;
    let credentials = super::fields::credentials(&at, &t, backend, &url, api_key.is_some())?;
    let (canary, canary_files) = match &t.canary {
        Some(raw) => {
            let extra_body = t.extra_body.clone().unwrap_or_default();
            let (spec, files) =
                super::canary::canary(&at, raw, backend, &extra_body, loaded.skip_secrets)?;
            (Some(spec), files)
        }
        None => (None, 0),
    };
    let prefix_cache = t
        .prefix_cache
        .as_ref()
        .map(|raw| {
            let host = url.host_str().unwrap_or_default();
            super::prefix_cache::prefix_cache(&at, raw, backend, (host, &model))
        })
        .transpose()?;
    let sampler = t
        .sampler
        .as_ref()
        .map(|raw| super::sampler::sampler(&at, raw, backend).map(std::sync::Arc::new))
        .transpose()?;
    let adapters = t
        .adapters
        .as_ref()
        .map(|raw| super::adapters::adapters(&at, raw, backend).map(std::sync::Arc::new))
        .transpose()?;
    let session = t
        .session
        .as_ref()
        .map(|raw| {
            let host = url.host_str().unwrap_or_default();
            super::session::session(&at, raw, backend, (host, &model)).map(std::sync::Arc::new)
        })
        .transpose()?;
    let trace_context = t.trace_context.unwrap_or(true);
    if let Some(state) = &t.tracestate {
        if !trace_context {
            return Err(ConfigError::new(
                at("tracestate"),
                "is sent with traceparent: it needs trace_context = true",
            ));
        }
        crate::trace_context::check_tracestate(state)
            .map_err(|e| ConfigError::new(at("tracestate"), e))?;
    }
    // The canary's prompt and golden files define the target too.
    let fingerprint = fingerprint(&t, global_labels, api_key.as_ref(), &tls) ^ canary_files;

    let (rate, fleet_rate) = match (t.rate, t.fleet_rate) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::new(
                at("fleet_rate"),
                "set either rate (per probe pod) or fleet_rate (across the fleet), not both",
            ));
        }
        (rate, None) => (check_rate(&at("rate"), rate.unwrap_or(DEFAULT_RATE))?, None),
        (None, Some(fleet)) => {
            let fleet = check_rate(&at("fleet_rate"), fleet)?;
            (fleet, Some(fleet))
        }
    };
    let burstiness = t.burstiness.unwrap_or(1.0);
    if !(burstiness.is_finite() && burstiness > 0.0) {
        return Err(ConfigError::new(
            at("burstiness"),
            format!("{burstiness} must be > 0 (1 = Poisson arrivals)"),
        ));
    }
    let (least, most) = BURSTINESS_RANGE;
    if !(least..=most).contains(&burstiness) {
        return Err(ConfigError::new(
            at("burstiness"),
            format!("{burstiness} must be between {least} and {most} (1 = Poisson arrivals)"),
        ));
    }
    let max_concurrency = in_range(
        &at("max_concurrency"),
        t.max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY),
        1,
        10_000,
    )? as usize;
    let mut sampling = Map::new();
    let floats = [
        ("temperature", t.temperature, 0.0, f64::MAX),
        ("top_p", t.top_p, f64::MIN_POSITIVE, 1.0),
        ("min_p", t.min_p, 0.0, 1.0),
        ("frequency_penalty", t.frequency_penalty, f64::MIN, f64::MAX),
        ("presence_penalty", t.presence_penalty, f64::MIN, f64::MAX),
        (
            "repetition_penalty",
            t.repetition_penalty,
            f64::MIN_POSITIVE,
            f64::MAX,
        ),
    ];
    for (field, value, min, max) in floats {
        if let Some(v) = value {
            if !(v.is_finite() && v >= min && v <= max) {
                return Err(ConfigError::new(at(field), format!("{v} is out of range")));
            }
            sampling.insert(field.into(), Value::from(v));
        }
    }
    if let Some(top_k) = t.top_k {
        sampling.insert("top_k".into(), Value::from(top_k));
    }
    if let Some(stop) = t.stop {
        sampling.insert("stop".into(), Value::from(stop));
    }
    let extra_body = t.extra_body.clone().unwrap_or_default();
    if extra_body.contains_key("stream") {
        return Err(ConfigError::new(
            at("extra_body.stream"),
            "inferprobe always streams; remove this key",
        ));
    }
    for key in ["n", "best_of"] {
        match extra_body.get(key) {
            None | Some(Value::Null) => {}
            Some(one) if one.as_f64() == Some(1.0) => {}
            Some(other) => {
                return Err(ConfigError::new(
                    at(&format!("extra_body.{key}")),
                    format!(
                        "{other}: a probe measures one answer, but {key} > 1 interleaves several \
                         choices in one stream and mixes their tokens into ITL and TPOT; remove it"
                    ),
                ));
            }
        }
    }

    let include_usage = t.include_usage.unwrap_or(true);
    let continuous_usage_stats = t.continuous_usage_stats.unwrap_or(false);
    if continuous_usage_stats && !include_usage {
        return Err(ConfigError::new(
            at("continuous_usage_stats"),
            "requires include_usage = true (servers only send per-chunk usage with it)",
        ));
    }

    // Anthropic sends its key in x-api-key, so an Authorization header does not clash.
    let bearer = (api_key.is_some() && backend != BackendKind::Anthropic) || credentials.is_some();
    let headers = headers(&at, t.headers.clone().unwrap_or_default(), bearer)?;

    let mut labels = global_labels.clone();
    if let Some(own) = &t.labels {
        check_labels(&at("labels"), own)?;
        labels.extend(own.clone());
    }
    let request_id_prefix = t.request_id_prefix.unwrap_or_else(|| "inferprobe-".into());
    if request_id_prefix.len() > 64
        || !request_id_prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
    {
        return Err(ConfigError::new(
            at("request_id_prefix"),
            "must be at most 64 characters of A-Z a-z 0-9 . _ : -",
        ));
    }

    let limits = Limits {
        max_event_bytes: in_range(
            &at("max_event_bytes"),
            t.max_event_bytes
                .unwrap_or(DEFAULT_LIMITS.max_event_bytes as u64),
            1024,
            1 << 30,
        )? as usize,
        max_response_bytes: in_range(
            &at("max_response_bytes"),
            t.max_response_bytes
                .unwrap_or(DEFAULT_LIMITS.max_response_bytes),
            1024,
            1 << 40,
        )?,
        max_events: in_range(
            &at("max_events"),
            t.max_events.unwrap_or(DEFAULT_LIMITS.max_events),
            1,
            1 << 32,
        )?,
    };

    Ok(Target {
        id: name.clone(),
        name,
        origin: None,
        backend,
        url,
        model,
        rate,
        fleet_rate,
        burstiness,
        max_concurrency,
        prompts,
        ignore_eos: t.ignore_eos.unwrap_or(true),
        reasoning_exhausted_fails,
        probe_endpoint: t.probe_endpoint.unwrap_or(false),
        sampling,
        extra_body,
        include_usage,
        continuous_usage_stats,
        headers,
        api_key,
        credentials,
        labels: labels.into_iter().collect(),
        request_id_prefix,
        timeouts,
        limits,
        validation,
        options,
        slo,
        trace_context,
        tracestate: t.tracestate.clone(),
        canary,
        prefix_cache,
        session,
        sampler,
        adapters,
        revision: None,
        workload: None,
        created: None,
        connection,
        tls,
        max_output_tokens_per_hour,
        fingerprint,
    })
}

/// A target's (or discovery block's) name: the `target` label.
pub(super) fn check_name(key: &str, name: &str) -> Result<(), ConfigError> {
    let name_ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
    if !name_ok {
        return Err(ConfigError::new(
            key,
            format!("`{name}` must be 1-64 characters of A-Z a-z 0-9 . _ : -"),
        ));
    }
    Ok(())
}

fn check_rate(key: &str, rate: f64) -> Result<f64, ConfigError> {
    if !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE) {
        return Err(ConfigError::new(
            key,
            format!("{rate} must be > 0 and <= {MAX_RATE} requests per second"),
        ));
    }
    if rate < MIN_RATE {
        return Err(ConfigError::new(
            key,
            format!(
                "{rate} is below the lowest rate, {MIN_RATE} per second (a mean gap of 11.6 days)"
            ),
        ));
    }
    Ok(rate)
}
