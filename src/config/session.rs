//! Validation of a target's `session = { … }`: the session check (docs/sessions.md). Off
//! unless set; the defaults cost about 12k prompt tokens an hour per target.

use std::time::Duration;

use http::HeaderName;

use super::fields::{duration, in_range};
use super::{ConfigError, RawDepth, RawSession};
use crate::endpoint::BackendKind;
use crate::endpoint::prefix_cache::known_cache;
use crate::endpoint::session::{Depth, DepthTo, SessionSpec};

/// A session every 10 minutes: six an hour, each five turns.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(600);
/// A tool answers within a couple of seconds.
const DEFAULT_TOOL_GAP: Duration = Duration::from_secs(2);
/// A human reads the answer and types the next question.
const DEFAULT_HUMAN_GAP: Duration = Duration::from_secs(30);
/// Enough for a tool call with its arguments, or a sentence quoting a tracking code.
const DEFAULT_MAX_TOKENS: u64 = 64;
/// The depth turn ends one session in six: about one an hour at the default interval.
const DEFAULT_DEPTH_EVERY: u64 = 6;
/// Of a served window: room for the template and for a tokenizer that counts more than
/// the words the padding was measured in.
const DEFAULT_DEPTH_MARGIN: f64 = 0.1;
/// A later turn hit when half of the previous turn's prompt came back cached.
const DEFAULT_HIT_SHARE: f64 = 0.5;

pub(super) fn session(
    target_at: &dyn Fn(&str) -> String,
    raw: &RawSession,
    backend: BackendKind,
    (host, model): (&str, &str),
) -> Result<SessionSpec, ConfigError> {
    let at = |field: &str| target_at(&format!("session.{field}"));
    if !matches!(
        backend,
        BackendKind::OpenAiChat
            | BackendKind::TgiChat
            | BackendKind::Anthropic
            | BackendKind::OpenAiResponses
    ) {
        return Err(ConfigError::new(
            target_at("session"),
            format!(
                "{backend} has no conversation with tools: the session check needs openai-chat, tgi-chat, anthropic or openai-responses"
            ),
        ));
    }
    let interval = duration(&at("interval"), raw.interval.as_ref(), DEFAULT_INTERVAL)?;
    let tool_gap = duration(&at("tool_gap"), raw.tool_gap.as_ref(), DEFAULT_TOOL_GAP)?;
    let human_gap = duration(&at("human_gap"), raw.human_gap.as_ref(), DEFAULT_HUMAN_GAP)?;
    let long_gap = raw
        .long_gap
        .as_ref()
        .map(|g| duration(&at("long_gap"), Some(g), Duration::ZERO))
        .transpose()?;
    let tool_choice = raw.tool_choice.as_deref().unwrap_or("auto");
    let force_calls = match tool_choice {
        "auto" => false,
        "required" => true,
        other => {
            return Err(ConfigError::new(
                at("tool_choice"),
                format!("`{other}` is not `auto` or `required`"),
            ));
        }
    };
    let max_tokens = in_range(
        &at("max_tokens"),
        raw.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        16,
        4096,
    )? as u32;
    let share = |key: &str, value: Option<f64>, default: f64| match value.unwrap_or(default) {
        v if v > 0.0 && v < 1.0 => Ok(v),
        v => Err(ConfigError::new(
            at(key),
            format!("{v} must be a share above 0 and below 1"),
        )),
    };
    let every = in_range(
        &at("depth_every"),
        raw.depth_every.unwrap_or(DEFAULT_DEPTH_EVERY),
        1,
        1000,
    )? as u32;
    let depth = match &raw.depth_tokens {
        None => {
            for (key, set) in [
                ("depth_margin", raw.depth_margin.is_some()),
                ("depth_every", raw.depth_every.is_some()),
            ] {
                if set {
                    return Err(ConfigError::new(
                        at(key),
                        "means nothing without depth_tokens",
                    ));
                }
            }
            None
        }
        Some(RawDepth::Tokens(tokens)) => Some(Depth {
            to: DepthTo::Tokens(in_range(&at("depth_tokens"), *tokens, 256, 10_000_000)? as u32),
            every,
        }),
        Some(RawDepth::Named(name)) if name == "served" => Some(Depth {
            to: DepthTo::Served {
                margin: share("depth_margin", raw.depth_margin, DEFAULT_DEPTH_MARGIN)?,
            },
            every,
        }),
        Some(RawDepth::Named(other)) => {
            return Err(ConfigError::new(
                at("depth_tokens"),
                format!("`{other}` is not a token count or \"served\""),
            ));
        }
    };
    let headers =
        |key: &str, names: Option<&Vec<String>>| -> Result<Vec<HeaderName>, ConfigError> {
            names
                .into_iter()
                .flatten()
                .map(|n| {
                    HeaderName::from_bytes(n.as_bytes()).map_err(|_| {
                        ConfigError::new(at(key), format!("`{n}` is not an HTTP header name"))
                    })
                })
                .collect()
        };
    // What a hosted API is known to cache: its block, its least cacheable prompt.
    let known = known_cache(backend, host, model);
    let spec = SessionSpec {
        interval,
        tool_gap: (Duration::ZERO, tool_gap),
        human_gap,
        long_gap,
        parallel: raw.parallel.unwrap_or(true),
        force_calls,
        max_tokens,
        depth,
        affinity_headers: headers("affinity_headers", raw.affinity_headers.as_ref())?,
        served_by: headers("served_by", raw.served_by.as_ref())?,
        hit_share: share("hit_share", raw.hit_share, DEFAULT_HIT_SHARE)?,
        block_tokens: match raw.block_tokens {
            Some(b) => Some(in_range(&at("block_tokens"), b, 1, 65_536)? as u32),
            None => known.and_then(|k| k.block_tokens),
        },
        min_cacheable: known.map_or(0, |k| k.minimum_tokens),
    };
    // The longest session, every gap at its longest, must end before the next begins.
    let longest = spec.least_duration() + tool_gap * 2;
    if longest >= interval {
        return Err(ConfigError::new(
            at("interval"),
            format!(
                "{} is not longer than a session's gaps ({}): a session must end before the next",
                humantime::format_duration(interval),
                humantime::format_duration(longest)
            ),
        ));
    }
    Ok(spec)
}
