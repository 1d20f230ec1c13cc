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
