//! Validation of a target's `prefix_cache = { interval, prefix_tokens, block_tokens,
//! reuse_gap, hit_share, speedup, objective }`: the prefix-cache check
//! (docs/prefix-cache.md). Off unless set.

use std::time::Duration;

use super::fields::{duration, in_range};
use super::{ConfigError, RawPrefixCache};
use crate::endpoint::BackendKind;
use crate::endpoint::prefix_cache::{PrefixCacheSpec, known_cache};

/// A pair a minute: about 2 × 1,024 prompt tokens a minute, 123k an hour per target.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// Long enough that its prefill is most of a small prompt's TTFT, and whole blocks of
/// every block size vLLM uses short of hybrid models' (16 on GPU, 128 on CPU).
const DEFAULT_PREFIX_TOKENS: u64 = 1024;
/// A conversation's next turn comes after its user reads and types: half a minute, in
/// which a busy server serves tens to thousands of other requests, so a cache too small
/// for its load has forgotten the prefix. Well under every hosted cache's lifetime (5
/// minutes and more). Half the interval where that is shorter, so pairs never overlap.
const DEFAULT_REUSE_GAP: Duration = Duration::from_secs(30);
/// How long the hosted caches keep an unused prefix: Anthropic's default `ephemeral`
/// lifetime, the least of OpenAI's "5 to 10 minutes" of in-memory retention.
const HOSTED_TTL: Duration = Duration::from_secs(300);
/// Caches hold whole blocks, and the nonce before the prefix is part of what is cached:
/// more than half is a hit.
const DEFAULT_HIT_SHARE: f64 = 0.5;
/// A prefix of 1,024 tokens served from cache cuts a small model's TTFT by 3–4× on vLLM
/// (docs/prefix-cache.md); 1.5× leaves room for a busy server.
const DEFAULT_SPEEDUP: f64 = 1.5;

pub(super) fn prefix_cache(
    target_at: &dyn Fn(&str) -> String,
    raw: &RawPrefixCache,
    backend: BackendKind,
    (host, model): (&str, &str),
) -> Result<PrefixCacheSpec, ConfigError> {
    let at = |field: &str| target_at(&format!("prefix_cache.{field}"));
    if matches!(
        backend,
        BackendKind::OpenAiEmbeddings | BackendKind::OpenAiAudio | BackendKind::DeepSpeedMii
    ) {
        return Err(ConfigError::new(
            target_at("prefix_cache"),
            format!("{backend} streams no first token to time: the check needs a text backend"),
        ));
    }
    let interval = duration(&at("interval"), raw.interval.as_ref(), DEFAULT_INTERVAL)?;
    if !(Duration::from_millis(10)..=Duration::from_secs(86_400)).contains(&interval) {
        return Err(ConfigError::new(
            at("interval"),
            "must be between 10ms and 24h",
        ));
    }
    let reuse_gap = duration(
        &at("reuse_gap"),
        raw.reuse_gap.as_ref(),
        DEFAULT_REUSE_GAP.min(interval / 2),
    )?;
    if reuse_gap >= interval {
        return Err(ConfigError::new(
            at("reuse_gap"),
            format!(
                "{} must be shorter than the interval ({}): a pair must end before the next",
                humantime::format_duration(reuse_gap),
                humantime::format_duration(interval)
            ),
        ));
    }
    let known = known_cache(backend, host, model);
    if let Some(k) = known.filter(|_| reuse_gap >= HOSTED_TTL) {
        return Err(ConfigError::new(
            at("reuse_gap"),
            format!(
                "{}'s cache keeps an unused prefix about 5 minutes: a longer gap misses on a healthy cache",
                k.name
            ),
        ));
    }
    let default_prefix = known.map_or(DEFAULT_PREFIX_TOKENS, |k| {
        DEFAULT_PREFIX_TOKENS.max(u64::from(k.minimum_tokens))
    });
    let prefix_tokens = in_range(
        &at("prefix_tokens"),
        raw.prefix_tokens.unwrap_or(default_prefix),
        64,
        131_072,
    )?;
    if let Some(k) = known.filter(|k| prefix_tokens < u64::from(k.minimum_tokens)) {
        return Err(ConfigError::new(
            at("prefix_tokens"),
            format!(
                "{prefix_tokens} is below what {} caches ({} tokens or more, {host}): every pair would miss on a healthy cache",
                k.name, k.minimum_tokens
            ),
        ));
    }
    let block_tokens = match raw.block_tokens {
        Some(block) => Some(in_range(&at("block_tokens"), block, 1, 65_536)?),
        None => known.and_then(|k| k.block_tokens).map(u64::from),
    };
    if let Some(block) = block_tokens.filter(|b| *b > prefix_tokens) {
        return Err(ConfigError::new(
            at("block_tokens"),
            format!(
                "a {prefix_tokens}-token prefix fills no {block}-token block: the server could cache none of it (prefix_tokens must be {block} or more)"
            ),
        ));
    }
    let share = |key: &str, value: Option<f64>, default: f64| match value.unwrap_or(default) {
        v if v > 0.0 && v <= 1.0 => Ok(v),
        v => Err(ConfigError::new(
            at(key),
            format!("{v} must be a share above 0 and at most 1"),
        )),
    };
    let hit_share = share("hit_share", raw.hit_share, DEFAULT_HIT_SHARE)?;
    let objective = raw
        .objective
        .map(|o| share("objective", Some(o), o))
        .transpose()?;
    let speedup = raw.speedup.unwrap_or(DEFAULT_SPEEDUP);
    if !(speedup.is_finite() && speedup > 1.0) {
        return Err(ConfigError::new(
            at("speedup"),
            format!("{speedup} must be above 1 (the warm TTFT at most the cold one divided by it)"),
        ));
    }
    let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    Ok(PrefixCacheSpec {
        interval,
        prefix_tokens: narrow(prefix_tokens),
        block_tokens: block_tokens.map(narrow),
        reuse_gap,
        hit_share,
        speedup,
        objective,
        priced_writes: known.is_some_and(|k| k.priced_writes),
    })
}

#[cfg(test)]
mod tests {
    use crate::config::{RawConfig, RawDuration, RawPrefixCache, RawTarget, validate};
    use std::time::Duration;

    fn load(
        backend: &str,
        raw: RawPrefixCache,
    ) -> Result<crate::endpoint::prefix_cache::PrefixCacheSpec, String> {
        load_at("http://127.0.0.1:1", backend, raw)
    }

    fn load_at(
        url: &str,
        backend: &str,
        raw: RawPrefixCache,
    ) -> Result<crate::endpoint::prefix_cache::PrefixCacheSpec, String> {
        let config = RawConfig {
            targets: vec![RawTarget {
                name: Some("t".into()),
                url: Some(url.into()),
                model: Some("m".into()),
                backend: Some(backend.into()),
                prefix_cache: Some(raw),
                ..RawTarget::default()
            }],
            ..RawConfig::default()
        };
        validate(&config)
            .map(|c| c.targets[0].prefix_cache.clone().unwrap())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_refusals_name_the_key() {
        let spec = load("openai-chat", RawPrefixCache::default()).unwrap();
        assert_eq!(spec.interval, std::time::Duration::from_secs(60));
        assert_eq!(
            (spec.prefix_tokens, spec.hit_share, spec.speedup),
            (1024, 0.5, 1.5)
        );
        assert_eq!(spec.objective, None);
        assert_eq!(spec.reuse_gap, std::time::Duration::from_secs(30));
        assert_eq!(spec.block_tokens, None);
        let refused = [
            (
                "openai-embeddings",
                RawPrefixCache::default(),
                "prefix_cache",
            ),
            (
                "openai-chat",
                RawPrefixCache {
                    prefix_tokens: Some(8),
                    ..Default::default()
                },
                "prefix_cache.prefix_tokens",
            ),
            (
                "openai-chat",
                RawPrefixCache {
                    hit_share: Some(0.0),
                    ..Default::default()
                },
                "prefix_cache.hit_share",
            ),
            (
                "openai-chat",
                RawPrefixCache {
                    objective: Some(1.5),
                    ..Default::default()
                },
                "prefix_cache.objective",
            ),
            (
                "openai-chat",
                RawPrefixCache {
                    speedup: Some(1.0),
                    ..Default::default()
                },
                "prefix_cache.speedup",
            ),
            (
                "openai-chat",
                RawPrefixCache {
                    prefix_tokens: Some(256),
                    block_tokens: Some(512),
                    ..Default::default()
                },
                "prefix_cache.block_tokens",
            ),
            (
                "openai-chat",
                RawPrefixCache {
                    interval: Some(RawDuration::Text("10s".into())),
                    reuse_gap: Some(RawDuration::Text("10s".into())),
                    ..Default::default()
                },
                "prefix_cache.reuse_gap",
            ),
        ];
        for (backend, raw, key) in refused {
            let error = load(backend, raw).unwrap_err();
            assert!(error.contains(key), "{error}");
        }
    }

    #[test]
    fn the_gap_is_half_a_short_interval_and_zero_when_asked() {
        let short = load(
            "openai-chat",
            RawPrefixCache {
                interval: Some(RawDuration::Text("150ms".into())),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(short.reuse_gap, Duration::from_millis(75));
        let back_to_back = load(
            "openai-chat",
            RawPrefixCache {
                reuse_gap: Some(RawDuration::Text("0s".into())),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(back_to_back.reuse_gap, Duration::ZERO);
    }

    #[test]
    fn hosted_apis_get_their_minimum_and_steps() {
        let openai = load_at(
            "https://api.openai.com",
            "openai-chat",
            RawPrefixCache::default(),
        )
        .unwrap();
        assert_eq!(
            (openai.prefix_tokens, openai.block_tokens),
            (1024, Some(128))
        );
        let gemini = load_at(
            "https://generativelanguage.googleapis.com/v1beta/openai",
            "openai-chat",
            RawPrefixCache::default(),
        )
        .unwrap();
        assert_eq!(gemini.prefix_tokens, 4096, "model m: not a 2.5 model");
        let short = load_at(
            "https://api.openai.com",
            "openai-chat",
            RawPrefixCache {
                prefix_tokens: Some(512),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(
            short.contains("prefix_cache.prefix_tokens") && short.contains("1024 tokens or more"),
            "{short}"
        );
    }

    #[test]
    fn anthropic_prefixes_reach_the_models_minimum_within_its_lifetime() {
        let claude = load_at(
            "https://api.anthropic.com",
            "anthropic",
            RawPrefixCache::default(),
        )
        .unwrap();
        assert_eq!(claude.prefix_tokens, 4096, "model m: not a known Claude");
        assert!(claude.priced_writes);
        let long_gap = load_at(
            "https://api.anthropic.com",
            "anthropic",
            RawPrefixCache {
                interval: Some(RawDuration::Text("10m".into())),
                reuse_gap: Some(RawDuration::Text("6m".into())),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(long_gap.contains("prefix_cache.reuse_gap"), "{long_gap}");
    }
}
