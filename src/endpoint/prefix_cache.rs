//! A target's validated prefix-cache check (docs/prefix-cache.md): how often a pair is
//! sent, how long the prefix is, how long the second request waits, and the rules that
//! judge it; and what the hosted APIs are known to cache, so a prefix they never cache is
//! refused before it is sent rather than counted a miss.

use std::time::Duration;

use super::BackendKind;

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
    /// The API prices a cache write above plain input and a read below it (Anthropic's
    /// 1.25× and 0.1×): `inferprobe check` says what a pair costs there.
    pub priced_writes: bool,
}

/// Prompt tokens a pair adds to its prefix: the nonce and a question each (the chat
/// template comes on top, and depends on the model).
const PAIR_OVERHEAD_TOKENS: u64 = 14;
/// Output tokens a pair asks for: 4 a request (`crate::prefix_check`).
pub const PAIR_OUTPUT_TOKENS: u64 = 8;

/// Below this, a prefix may fill no block of a server whose block size is not known:
/// vLLM's are 16 tokens on GPU, 128 on CPU, 512 or more for hybrid models.
const UNKNOWN_BLOCK_SAFE_TOKENS: u32 = 1024;

impl PrefixCacheSpec {
    /// Prompt tokens an hour the check sends, both requests of every pair, before the chat
    /// template: what `inferprobe check` prints so its cost is seen before it runs.
    pub fn prompt_tokens_per_hour(&self) -> u64 {
        (self.pairs_per_hour()
            * 2.0
            * (u64::from(self.prefix_tokens) + PAIR_OVERHEAD_TOKENS) as f64)
            .round() as u64
    }

    fn pairs_per_hour(&self) -> f64 {
        3600.0 / self.interval.as_secs_f64()
    }

    /// Output tokens an hour the check asks for at most.
    pub fn output_tokens_per_hour(&self) -> u64 {
        (self.pairs_per_hour() * PAIR_OUTPUT_TOKENS as f64).round() as u64
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
        let priced = match self.priced_writes {
            true => format!(
                " (with Anthropic's cache priced 1.25× to write, 0.1× to read: as {} plain input tokens)",
                self.priced_tokens_per_hour()
            ),
            false => String::new(),
        };
        format!(
            "prefix-cache check every {}, a {}-token prefix ({tokens}), the pair's requests {gap}: about {} prompt tokens an hour{priced}; {alert}",
            humantime::format_duration(self.interval),
            self.prefix_tokens,
            self.prompt_tokens_per_hour()
        )
    }

    /// An hour's prompt tokens as plain input tokens where writes and reads are priced
    /// apart: each pair writes the prefix once (1.25×) and reads it once (0.1×), and sends
    /// the rest plain.
    pub fn priced_tokens_per_hour(&self) -> u64 {
        let prefix = f64::from(self.prefix_tokens);
        (self.pairs_per_hour() * (1.35 * prefix + 2.0 * PAIR_OVERHEAD_TOKENS as f64)).round() as u64
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
    /// Writes priced above plain input, reads below (Anthropic).
    pub priced_writes: bool,
}

/// The cache of the API at `host` serving `model`, where its provider documents one.
/// Providers change these: the table only refuses what is sure to miss and sets defaults.
pub fn known_cache(backend: BackendKind, host: &str, model: &str) -> Option<KnownCache> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let under = |domain: &str| host == domain || host.ends_with(&format!(".{domain}"));
    // Claude's rules for Claude: a self-hosted server speaking the Messages API (vLLM,
    // llama-server) has its own cache and none of Anthropic's minimums or prices.
    if backend == BackendKind::Anthropic {
        let claude = under("anthropic.com") || model.to_ascii_lowercase().contains("claude");
        return claude.then(|| KnownCache {
            name: "Anthropic",
            minimum_tokens: claude_minimum(model),
            block_tokens: None,
            priced_writes: true,
        });
    }
    // platform.openai.com prompt caching, and Azure OpenAI's: automatic from 1,024 tokens,
    // hits in increments of 128 tokens (regional hosts too: eu.api.openai.com).
    if under("api.openai.com") || under("openai.azure.com") {
        return Some(KnownCache {
            name: "OpenAI",
            minimum_tokens: 1024,
            block_tokens: Some(128),
            priced_writes: false,
        });
    }
    // ai.google.dev implicit caching: 2,048 tokens for the 2.5 models, 4,096 for later.
    under("generativelanguage.googleapis.com").then(|| KnownCache {
        name: "Gemini",
        minimum_tokens: if model.contains("2.5") { 2048 } else { 4096 },
        block_tokens: None,
        priced_writes: false,
    })
}

/// The least prompt a Claude model caches, by Anthropic's prompt-caching docs (dated
/// 2026: 4,096 for Opus 4.5 and later and Haiku 4.5, 2,048 for the Haiku 3 models and, as
/// measured, Sonnet 4.6, 1,024 for the other Claude 4 and 3.7 models). A model not listed
/// gets the largest: a prefix it would not cache is a page at night.
fn claude_minimum(model: &str) -> u32 {
    let m = model.to_ascii_lowercase();
    let any = |keys: &[&str]| keys.iter().any(|k| m.contains(k));
    if any(&["opus-4-5", "opus-4-6", "opus-4-7", "haiku-4-5"]) {
        4096
    } else if any(&["haiku-3", "3-haiku", "3-5-haiku", "sonnet-4-6"]) {
        2048
    } else if any(&["sonnet-4", "opus-4", "sonnet-3-7", "3-7-sonnet"]) {
        1024
    } else {
        4096
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
            priced_writes: false,
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
        let chat = BackendKind::OpenAiChat;
        assert_eq!(
            known_cache(chat, "api.openai.com", "gpt-4o")
                .map(|k| (k.minimum_tokens, k.block_tokens)),
            Some((1024, Some(128)))
        );
        let gemini = |model| known_cache(chat, "generativelanguage.googleapis.com", model);
        assert_eq!(gemini("gemini-2.5-flash").unwrap().minimum_tokens, 2048);
        assert_eq!(gemini("gemini-3-pro").unwrap().minimum_tokens, 4096);
        assert_eq!(known_cache(chat, "vllm.internal", "m"), None);
        for host in [
            "api.openai.com.",
            "eu.api.openai.com",
            "API.OpenAI.com",
            "x.openai.azure.com",
        ] {
            assert_eq!(
                known_cache(chat, host, "gpt-4o").map(|k| k.minimum_tokens),
                Some(1024),
                "{host}"
            );
        }
        assert_eq!(known_cache(chat, "notapi.openai.com.evil", "m"), None);
        // The Messages API served by vLLM: not Claude's cache.
        assert_eq!(
            known_cache(BackendKind::Anthropic, "vllm.internal", "Qwen/Qwen3-8B"),
            None
        );
        let claude = |model| {
            known_cache(BackendKind::Anthropic, "api.anthropic.com", model)
                .unwrap()
                .minimum_tokens
        };
        assert_eq!(claude("claude-sonnet-4-5-20250929"), 1024);
        assert_eq!(claude("claude-opus-4-1"), 1024);
        assert_eq!(claude("claude-opus-4-5"), 4096);
        assert_eq!(claude("claude-3-5-haiku-latest"), 2048);
        assert_eq!(claude("claude-sonnet-4-6"), 2048);
        assert_eq!(claude("a-proxy-alias"), 4096);
    }

    #[test]
    fn anthropic_says_what_a_pair_costs() {
        let spec = PrefixCacheSpec {
            prefix_tokens: 4096,
            priced_writes: true,
            ..spec()
        };
        // 60 pairs × (1.35 × 4,096 + 28) = 333,456 against 493,200 plain.
        assert_eq!(spec.priced_tokens_per_hour(), 333_456);
        assert!(
            spec.describe(false)
                .contains("as 333456 plain input tokens"),
            "{}",
            spec.describe(false)
        );
    }
}
