//! Validation of a target's `prefix_cache = { interval, prefix_tokens, hit_share, speedup,
//! objective }`: the prefix-cache check (docs/prefix-cache.md). Off unless set.

use std::time::Duration;

use super::fields::{duration, in_range};
use super::{ConfigError, RawPrefixCache};
use crate::endpoint::BackendKind;
use crate::endpoint::prefix_cache::PrefixCacheSpec;

/// A pair a minute: about 2 × 1,024 prompt tokens a minute, 123k an hour per target.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// Long enough that its prefill is most of a small prompt's TTFT, and 64 of vLLM's blocks.
const DEFAULT_PREFIX_TOKENS: u64 = 1024;
/// Cached tokens come in whole blocks (16 tokens in vLLM, one page in SGLang), and the
/// nonce before the prefix is part of what is cached: more than half is a hit.
const DEFAULT_HIT_SHARE: f64 = 0.5;
/// A prefix of 1,024 tokens served from cache cuts a small model's TTFT by 3–4× on vLLM
/// (docs/prefix-cache.md); 1.5× leaves room for a busy server.
const DEFAULT_SPEEDUP: f64 = 1.5;

pub(super) fn prefix_cache(
    target_at: &dyn Fn(&str) -> String,
    raw: &RawPrefixCache,
    backend: BackendKind,
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
    let prefix_tokens = in_range(
        &at("prefix_tokens"),
        raw.prefix_tokens.unwrap_or(DEFAULT_PREFIX_TOKENS),
        64,
        131_072,
    )?;
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
    Ok(PrefixCacheSpec {
        interval,
        prefix_tokens: u32::try_from(prefix_tokens).unwrap_or(u32::MAX),
        hit_share,
        speedup,
        objective,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::{RawConfig, RawPrefixCache, RawTarget, validate};

    fn load(
        backend: &str,
        raw: RawPrefixCache,
    ) -> Result<crate::endpoint::prefix_cache::PrefixCacheSpec, String> {
        let config = RawConfig {
            targets: vec![RawTarget {
                name: Some("t".into()),
                url: Some("http://127.0.0.1:1".into()),
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
        ];
        for (backend, raw, key) in refused {
            let error = load(backend, raw).unwrap_err();
            assert!(error.contains(key), "{error}");
        }
    }
}
