//! A target's validated prefix-cache check (docs/prefix-cache.md): how often a pair is
//! sent, how long the prefix is, and the rules that judge the second request.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub struct PrefixCacheSpec {
    /// One pair per interval.
    pub interval: Duration,
    /// Words-as-tokens of the shared prefix (exact with the target's tokenizer).
    pub prefix_tokens: u32,
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

impl PrefixCacheSpec {
    /// Prompt tokens an hour the check sends, both requests of every pair, before the chat
    /// template: what `inferprobe check` prints so its cost is seen before it runs.
    pub fn prompt_tokens_per_hour(&self) -> u64 {
        let pairs = 3600.0 / self.interval.as_secs_f64();
        (pairs * 2.0 * (u64::from(self.prefix_tokens) + PAIR_OVERHEAD_TOKENS) as f64).round() as u64
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
        format!(
            "prefix-cache check every {}, a {}-token prefix ({tokens}): about {} prompt tokens an hour; {alert}",
            humantime::format_duration(self.interval),
            self.prefix_tokens,
            self.prompt_tokens_per_hour()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_cost_what_the_docs_say() {
        let spec = PrefixCacheSpec {
            interval: Duration::from_secs(60),
            prefix_tokens: 1024,
            hit_share: 0.5,
            speedup: 1.5,
            objective: Some(0.9),
        };
        // docs/prefix-cache.md: about 125k prompt tokens an hour at the defaults.
        assert_eq!(spec.prompt_tokens_per_hour(), 124_560);
        assert_eq!(
            spec.describe(false),
            "prefix-cache check every 1m, a 1024-token prefix (words as tokens): about 124560 prompt tokens an hour; InferprobePrefixCacheMisses tickets below 90% hits"
        );
        let cheap = PrefixCacheSpec {
            interval: Duration::from_secs(300),
            prefix_tokens: 256,
            objective: None,
            ..spec
        };
        assert_eq!(cheap.prompt_tokens_per_hour(), 6_480);
        assert!(cheap.describe(true).ends_with("no objective: no alert"));
    }
}
