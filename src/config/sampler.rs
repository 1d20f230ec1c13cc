//! Validation of a target's `sampler = { … }`: the sampler check (docs/sampling.md). Off
//! unless set; the defaults ask about 64 output tokens a minute per target or replica.

use std::time::Duration;

use super::fields::{duration, in_range};
use super::{ConfigError, RawSampler};
use crate::endpoint::BackendKind;
use crate::endpoint::sampling::Params;
use crate::endpoint::sampling::{SamplingSpec, Server};

/// A round a minute.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// Enough tokens that a window fills in a few rounds, few enough to be cheap.
const DEFAULT_MAX_TOKENS: u64 = 64;
/// The most OpenAI's API and vLLM's default `--max-logprobs` list.
const DEFAULT_TOP_LOGPROBS: u64 = 20;
/// Four rounds of 64 tokens: 25.6 PITs per bin.
const DEFAULT_WINDOW: u64 = 256;
/// Per window; two in a row warn, about 1e-8 a window on a healthy replica.
const DEFAULT_ALPHA: f64 = 1e-4;
/// Answers compared per round without logprobs.
const DEFAULT_SAMPLES: u64 = 3;
/// A seeded pair every 10 rounds: two more requests every 10 minutes.
const DEFAULT_SEED_EVERY: u64 = 10;

/// The rounds' settings when none are given: a production-like one (Qwen's recommended
/// 0.7 / 20 / 0.8, at top-k 19: what a 20-long list shows whichever token was sampled),
/// then one where each truncation is the one that binds, so a sampler that ignores any of
/// them is seen within four rounds.
pub fn default_settings() -> Vec<Params> {
    let p = |temperature, top_k, top_p, min_p| Params {
        temperature,
        top_k,
        top_p,
        min_p,
    };
    vec![
        p(0.7, 19, 0.8, 0.0),
        p(1.0, 5, 1.0, 0.0),
        p(1.0, 19, 0.5, 0.0),
        p(1.0, 19, 1.0, 0.1),
    ]
}

pub(super) fn sampler(
    target_at: &dyn Fn(&str) -> String,
    raw: &RawSampler,
    backend: BackendKind,
) -> Result<SamplingSpec, ConfigError> {
    let at = |field: &str| target_at(&format!("sampler.{field}"));
    if matches!(
        backend,
        BackendKind::OpenAiEmbeddings | BackendKind::OpenAiAudio | BackendKind::DeepSpeedMii
    ) {
        return Err(ConfigError::new(
            target_at("sampler"),
            format!("{backend} generates no sampled text: the check needs a text backend"),
        ));
    }
    let interval = duration(&at("interval"), raw.interval.as_ref(), DEFAULT_INTERVAL)?;
    if !(Duration::from_millis(10)..=Duration::from_secs(86_400)).contains(&interval) {
        return Err(ConfigError::new(
            at("interval"),
            "must be between 10ms and 24h",
        ));
    }
    let logprobs = matches!(backend, BackendKind::OpenAi | BackendKind::OpenAiChat);
    let server = match raw.server.as_deref() {
        None => Server::Auto,
        Some(name) => Server::parse(name).ok_or_else(|| {
            ConfigError::new(
                at("server"),
                format!("unknown server {name:?}: one of {}", Server::NAMES),
            )
        })?,
    };
    let server = match (server, logprobs) {
        (Server::Auto | Server::Unknown, false) => Server::Unknown,
        (s, true) => s,
        (s, false) => {
            return Err(ConfigError::new(
                at("server"),
                format!(
                    "{} is read through logprobs, which {backend} does not return: use openai or openai-chat, or server = \"unknown\"",
                    s.as_str()
                ),
            ));
        }
    };
    let top_logprobs = in_range(
        &at("top_logprobs"),
        raw.top_logprobs.unwrap_or(DEFAULT_TOP_LOGPROBS),
        1,
        20,
    )? as u32;
    let settings = match &raw.settings {
        None => default_settings(),
        Some(list) if list.is_empty() => {
            return Err(ConfigError::new(
                at("settings"),
                "must name at least one setting",
            ));
        }
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let at = |field: &str| at(&format!("settings[{i}].{field}"));
                let temperature = s.temperature.unwrap_or(1.0);
                // vLLM clamps below 0.01 and calls below 1e-5 greedy; above 2 it refuses.
                if !(0.05..=2.0).contains(&temperature) {
                    return Err(ConfigError::new(
                        at("temperature"),
                        format!("{temperature} must be between 0.05 and 2 (a sampled request)"),
                    ));
                }
                let top_k = in_range(&at("top_k"), s.top_k.unwrap_or(0), 0, 100_000)? as u32;
                let top_p = s.top_p.unwrap_or(1.0);
                if !(top_p > 0.0 && top_p <= 1.0) {
                    return Err(ConfigError::new(
                        at("top_p"),
                        format!("{top_p} must be above 0 and at most 1"),
                    ));
                }
                let min_p = s.min_p.unwrap_or(0.0);
                if !(0.0..1.0).contains(&min_p) {
                    return Err(ConfigError::new(
                        at("min_p"),
                        format!("{min_p} must be at least 0 and below 1"),
                    ));
                }
                Ok(Params {
                    temperature,
                    top_k,
                    top_p,
                    min_p,
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let max_tokens = in_range(
        &at("max_tokens"),
        raw.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        8,
        4096,
    )? as u32;
    let window = in_range(
        &at("window"),
        raw.window.unwrap_or(DEFAULT_WINDOW),
        50,
        100_000,
    )? as u32;
    let alpha = raw.alpha.unwrap_or(DEFAULT_ALPHA);
    if !(alpha > 0.0 && alpha < 0.5) {
        return Err(ConfigError::new(
            at("alpha"),
            format!("{alpha} must be above 0 and below 0.5"),
        ));
    }
    let samples = in_range(
        &at("samples"),
        raw.samples.unwrap_or(DEFAULT_SAMPLES),
        2,
        16,
    )? as u32;
    // Seeds are OpenAI's field: the Messages, Responses, TGI and Triton APIs take none
    // (or under another name, with other promises).
    let seeds = logprobs;
    let seed_every = match raw.seed_every {
        Some(n) if n > 0 && !seeds => {
            return Err(ConfigError::new(
                at("seed_every"),
                format!("{backend} takes no `seed`: the seeded pair needs openai or openai-chat"),
            ));
        }
        Some(n) => in_range(&at("seed_every"), n, 0, 10_000)? as u32,
        None if seeds => DEFAULT_SEED_EVERY as u32,
        None => 0,
    };
    Ok(SamplingSpec {
        interval,
        settings,
        max_tokens,
        top_logprobs,
        server,
        window,
        alpha,
        samples,
        seed_every,
    })
}
