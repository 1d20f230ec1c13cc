//! The verdict on a pair (docs/prefix-cache.md, "The check"), from what the server
//! reported and how fast it answered. Apart from the check's I/O so every rule is a unit
//! test.
//!
//! The usage rule trusts a server's cached-token count only where it can mean a cache:
//! the cold request's prefix follows a fresh nonce, so no prefix cache can serve it, and a
//! cold request that reports it cached is counting something else: the KV a
//! prefill/decode split transferred (vLLM's decode side reports `prompt_tokens − 1`),
//! chunks reused at shifted positions (llama.cpp's `--cache-reuse`), a double count. Such a
//! pair is judged by TTFT, never a miss, and the reason is counted.

use crate::endpoint::prefix_cache::PrefixCacheSpec;
pub use crate::metrics::{
    PrefixRule as Rule, PrefixSetAside as SetAside, PrefixVerdict as Verdict,
};
use crate::record::Measurement;

/// A verdict, and why the server's count was not used when it was set aside.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub set_aside: Option<SetAside>,
}

impl From<Verdict> for Judgement {
    fn from(verdict: Verdict) -> Self {
        Self {
            verdict,
            set_aside: None,
        }
    }
}

/// What else is known of a pair than its two measurements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Known {
    /// This target's server has reported cached tokens before, so a response with usage
    /// and no count is one reporting none (providers that send the field only on a hit).
    pub reported_before: bool,
    /// Prompt tokens the cold request wrote to the cache, where the server says
    /// (Anthropic): 0 is a cache that took none of the prefix, so the warm request's 0
    /// read is no miss (a prefix below the model's minimum, or no caching for it).
    pub cold_written: Option<u64>,
}

/// Judge a pair: `cold` warmed the cache with the spec's prefix, `warm` shared it.
pub fn judge(
    spec: &PrefixCacheSpec,
    cold: Option<&Measurement>,
    warm: Option<&Measurement>,
    known: Known,
) -> Judgement {
    let (Some(cold), Some(warm)) = (cold, warm) else {
        return Verdict::Failed.into();
    };
    let reported_before = known.reported_before;
    let cached = |m: &Measurement| {
        m.cached_prompt_tokens
            .or_else(|| (reported_before && m.prompt_tokens.is_some()).then_some(0))
    };
    let ttft_hit = match (cold.ttft, warm.ttft) {
        (Some(cold), Some(warm)) => warm.as_secs_f64() * spec.speedup <= cold.as_secs_f64(),
        _ => false,
    };
    let mut set_aside = None;
    if let Some(warm_cached) = cached(warm) {
        let cold_cached = cached(cold).unwrap_or(0);
        // The cold request claims at least half the prefix cached and left less than half
        // of it uncached: no prefix cache can have served it. Half, whatever `hit_share`
        // asks of a hit; words count fewer tokens than any tokenizer makes of them, so this
        // errs towards trusting the count.
        let prefix = u64::from(spec.prefix_tokens);
        let fresh = cold.prompt_tokens.map(|p| p.saturating_sub(cold_cached));
        if 2 * cold_cached >= prefix && fresh.is_some_and(|fresh| 2 * fresh < prefix) {
            set_aside = Some(SetAside::ColdCached);
        } else if known.cold_written == Some(0) && warm_cached == cold_cached {
            set_aside = Some(SetAside::NotWritten);
        } else {
            // What the cold request already had cached is what comes before the nonce (a
            // chat template, a long default system prompt), cached for every request
            // alike: only what the warm one gained on top of it is the prefix.
            let gained = warm_cached.saturating_sub(cold_cached);
            let expected = spec.hit_share * f64::from(spec.cacheable_tokens());
            let verdict = match gained as f64 >= expected {
                true => Verdict::Hit(Rule::Usage),
                // A count read as 0 only because it is missing, where the TTFT shows the
                // prefill saved: the server stopped reporting (a flag dropped in a
                // rollout, a gateway to a replica that does not say), not a cold cache.
                false if warm.cached_prompt_tokens.is_none() && ttft_hit => {
                    Verdict::Hit(Rule::Ttft)
                }
                false => Verdict::Miss,
            };
            return verdict.into();
        }
    }
    let verdict = match ttft_hit {
        true => Verdict::Hit(Rule::Ttft),
        false => Verdict::Unreported,
    };
    Judgement { verdict, set_aside }
}

#[cfg(test)]
mod tests;
