//! A target's validated prefix-cache check (docs/prefix-cache.md): how often a pair is
//! sent, how long the prefix is, how long the second request waits, and the rules that
//! judge it; and what the hosted APIs are known to cache, so a prefix they never cache is
//! refused before it is sent rather than counted a miss.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub struct PrefixCacheSpec {
    /// One pair per interval.
    pub interval: Duration,
    /// Words-as-tokens of the shared prefix (exact with the target's tokenizer).
    pub prefix_tokens: u32,
    /// The server caches whole blocks of this many tokens (set, or known for a hosted
    /// API): the verdict expects only the prefix's whole blocks back.
    pub block_tokens: Option<u32>,
    /// How long the warm request waits after the cold one: a conversation's next turn.
    pub reuse_gap: Duration,
    /// The second request hit when the server says it read at least this share of the
    /// prefix from its cache (whole blocks: a little less than all of it).
    pub hit_share: f64,
    /// Where the server reports no cached tokens: the second request hit when its TTFT is
    /// at most the first's divided by this (the prefill the cache saved).
    pub speedup: f64,
    /// The share of checks that must hit, for the alert; none: no alert.
    pub objective: Option<f64>,
}

/// Prompt tokens a pair adds to its prefix: the nonce and a question each (the chat
/// template comes on top, and depends on the model).
const PAIR_OVERHEAD_TOKENS: u64 = 14;

/// Below this, a prefix may fill no block of a server whose block size is not known:
/// vLLM's are 16 tokens on GPU, 128 on CPU, 512 or more for hybrid models.
const UNKNOWN_BLOCK_SAFE_TOKENS: u32 = 1024;

impl PrefixCacheSpec {
    /// Prompt tokens an hour the check sends, both requests of every pair, before the chat
    /// template: what `inferprobe check` prints so its cost is seen before it runs.
    pub fn prompt_tokens_per_hour(&self) -> u64 {
        let pairs = 3600.0 / self.interval.as_secs_f64();
        (pairs * 2.0 * (u64::from(self.prefix_tokens) + PAIR_OVERHEAD_TOKENS) as f64).round() as u64
    }

    /// The least of the prefix a healthy cache serves the warm request: its whole blocks.
    /// What comes before the prefix is served in whole blocks to both requests alike, so
    /// the warm one gains at least `⌊prefix / block⌋` blocks, however the prefix is
    /// aligned.
    pub fn cacheable_tokens(&self) -> u32 {
        match self.block_tokens {
            Some(block) if block > 0 => self.prefix_tokens / block * block,
            _ => self.prefix_tokens,
        }
    }

    /// One line for `inferprobe check`: what the check sends, what it costs, what alerts.
    pub fn describe(&self, exact: bool) -> String {
        let tokens = match exact {
            true => "tokens, exact with its tokenizer",
            false => "words as tokens",
        };
        let alert = match self.objective {
            Some(o) => format!(
                "InferprobePrefixCacheMisses tickets below {}% hits",
                o * 100.0
            ),
            None => "no objective: no alert".to_owned(),
        };
        let gap = match self.reuse_gap.is_zero() {
            true => "back to back".to_owned(),
            false => format!("{} apart", humantime::format_duration(self.reuse_gap)),
        };
        format!(
            "prefix-cache check every {}, a {}-token prefix ({tokens}), the pair's requests {gap}: about {} prompt tokens an hour; {alert}",
            humantime::format_duration(self.interval),
            self.prefix_tokens,
            self.prompt_tokens_per_hour()
        )
    }

    /// What `inferprobe check` warns about: a prefix short enough that a server whose
    /// block size is not known may cache none of it.
    pub fn warnings(&self) -> Vec<String> {
        match self.block_tokens {
            None if self.prefix_tokens < UNKNOWN_BLOCK_SAFE_TOKENS => vec![format!(
                "prefix_cache: a {}-token prefix may fill no whole block of the server's cache (vLLM caches 16-token blocks on GPU, 128 on CPU, 512 or more for hybrid models): every pair would miss on a healthy cache; set block_tokens to the server's, or prefix_tokens to {UNKNOWN_BLOCK_SAFE_TOKENS} or more",
                self.prefix_tokens
            )],
            _ => Vec::new(),
        }
    }
}

/// What a hosted API is known to cache (docs/prefix-cache.md, "What each server caches"):
/// prompts of at least `minimum_tokens`, in steps of `block_tokens`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownCache {
    pub name: &'static str,
    pub minimum_tokens: u32,
    pub block_tokens: Option<u32>,
}

/// The cache of the API at `host` serving `model`, where its provider documents one.
/// Providers change these: the table only refuses what is sure to miss and sets defaults.
pub fn known_cache(host: &str, model: &str) -> Option<KnownCache> {
    match host {
        // platform.openai.com prompt caching: automatic from 1,024 tokens, hits in
        // increments of 128 tokens.
        "api.openai.com" => Some(KnownCache {
            name: "OpenAI",
            minimum_tokens: 1024,
            block_tokens: Some(128),
        }),
        // ai.google.dev implicit caching: 2,048 tokens for the 2.5 models, 4,096 for later.
        "generativelanguage.googleapis.com" => Some(KnownCache {
            name: "Gemini",
            minimum_tokens: if model.contains("2.5") { 2048 } else { 4096 },
            block_tokens: None,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> PrefixCacheSpec {
        PrefixCacheSpec {
            interval: Duration::from_secs(60),
            prefix_tokens: 1024,
            block_tokens: None,
            reuse_gap: Duration::from_secs(30),
            hit_share: 0.5,
            speedup: 1.5,
            objective: Some(0.9),
        }
    }

    #[test]
    fn the_defaults_cost_what_the_docs_say() {
        let spec = spec();
        // docs/prefix-cache.md: about 125k prompt tokens an hour at the defaults.
        assert_eq!(spec.prompt_tokens_per_hour(), 124_560);
        assert_eq!(
            spec.describe(false),
            "prefix-cache check every 1m, a 1024-token prefix (words as tokens), the pair's requests 30s apart: about 124560 prompt tokens an hour; InferprobePrefixCacheMisses tickets below 90% hits"
        );
        assert!(spec.warnings().is_empty());
        let cheap = PrefixCacheSpec {
            interval: Duration::from_secs(300),
            prefix_tokens: 256,
            objective: None,
            ..spec
        };
        assert_eq!(cheap.prompt_tokens_per_hour(), 6_480);
        assert!(cheap.describe(true).ends_with("no objective: no alert"));
        assert!(cheap.warnings()[0].contains("set block_tokens"));
    }

    #[test]
    fn only_whole_blocks_of_the_prefix_are_expected_back() {
        let blocks = |prefix_tokens, block| {
            PrefixCacheSpec {
                prefix_tokens,
                block_tokens: block,
                ..spec()
            }
            .cacheable_tokens()
        };
        assert_eq!(blocks(256, None), 256);
        assert_eq!(blocks(256, Some(128)), 256);
        assert_eq!(blocks(300, Some(128)), 256);
        assert_eq!(blocks(1000, Some(16)), 992);
        assert_eq!(blocks(256, Some(512)), 0);
    }

    #[test]
    fn hosted_apis_name_their_minimum() {
        assert_eq!(
            known_cache("api.openai.com", "gpt-4o").map(|k| (k.minimum_tokens, k.block_tokens)),
            Some((1024, Some(128)))
        );
        let gemini = |model| known_cache("generativelanguage.googleapis.com", model);
        assert_eq!(gemini("gemini-2.5-flash").unwrap().minimum_tokens, 2048);
        assert_eq!(gemini("gemini-3-pro").unwrap().minimum_tokens, 4096);
        assert_eq!(known_cache("vllm.internal", "m"), None);
    }
}
