//! The prefix-cache check (docs/prefix-cache.md): at its own interval, a pair of requests
//! that share a prefix no earlier request had (a nonce, then `prefix_tokens`, exact with
//! the target's tokenizer, else words) and differ after it. The first warms the cache; the second is
//! judged. A fresh prefix per pair is what lets a pair sent through a gateway say whether
//! the second reached the replica that holds the first's prefix.
//!
//! The judgement, in order:
//! - the server reported cached tokens for the second request: `hit` when they exceed the
//!   first's (what precedes the nonce, cached for every request) by at least `hit_share`
//!   of the prefix, else `miss` (rule `usage`);
//! - it reported nothing: `hit` when the second's TTFT is at most the first's divided by
//!   `speedup` (rule `ttft`), else `unreported`. A server that caches but does not say so
//!   is never a `miss`.
//! - either request failed: `failed`, judged by nothing (its error is the probes' business).

use std::sync::Arc;
use std::time::SystemTime;

use tokio_util::sync::CancellationToken;

use crate::budget::Budget;
use crate::endpoint::prefix_cache::PrefixCacheSpec;
pub use crate::metrics::{PrefixRule as Rule, PrefixVerdict as Verdict};
use crate::metrics::{PrefixSeries, SkipReason, TargetMetrics};
use crate::probe::{Outcome, Prober};
use crate::prompt::{Prompt, synthetic};
use crate::record::Measurement;
use crate::scheduler::Context;
use crate::status::{PrefixCheck, TargetStatus};
use crate::ticker::Ticker;

/// What each request of a pair asks for. One first token is all the check needs, but a
/// model may spend its first on an empty piece (a partial UTF-8 byte, a stop token), which
/// is no first token and fails the probe: on vLLM with a random-weight model, one request
/// in four at 1 token (44% of pairs `failed`); four make that rare.
const MAX_TOKENS: u32 = 4;

/// Where a check's outcomes go.
pub struct Sinks {
    pub series: PrefixSeries,
    /// The status page's recent pairs.
    pub status: Arc<TargetStatus>,
    /// The target's own series: a pair its budget has no room for is a skipped arrival.
    pub metrics: TargetMetrics,
    /// The target's `max_output_tokens_per_hour`, shared with its workload.
    pub budget: Option<Budget>,
}

/// Send a pair every interval until `stop`, each as a probe task of `ctx` (drained at
/// shutdown like every probe); a pair still running when the next is due delays it.
pub async fn run(
    prober: Arc<Prober>,
    spec: PrefixCacheSpec,
    sinks: Sinks,
    stop: CancellationToken,
    ctx: Context,
) {
    let prefix = prefix_text(&prober, spec.prefix_tokens).await;
    let mut ticker = Ticker::new(spec.interval);
    let (spec, prefix) = (Arc::new(spec), Arc::new(prefix));
    while let Some((now, permit)) = ticker.tick(&stop).await {
        // Both requests' max_tokens, from the hour the target's workload spends too.
        if let Some(budget) = &sinks.budget {
            if !budget.try_spend(now, 2 * MAX_TOKENS) {
                sinks.metrics.skipped(SkipReason::Budget);
                continue;
            }
        }
        let (prober, spec, prefix, series, status, abort) = (
            Arc::clone(&prober),
            Arc::clone(&spec),
            Arc::clone(&prefix),
            sinks.series.clone(),
            Arc::clone(&sinks.status),
            ctx.abort.clone(),
        );
        ctx.probes.spawn(async move {
            let _permit = permit;
            check(&prober, &spec, &prefix, (&series, &status), &abort).await;
        });
    }
}

/// The pair's shared prefix: exactly `tokens` tokens with the target's tokenizer (encoded
/// off the runtime: a long prefix is milliseconds of CPU), words-as-tokens without one, or
/// when the tokenizer fails on it (said once, in the log).
async fn prefix_text(prober: &Prober, tokens: u32) -> String {
    let words = || synthetic::shared_prefix(tokens, None).unwrap_or_default();
    let Some(counter) = prober.target.prompts.tokenizer.clone() else {
        return words();
    };
    let exact =
        tokio::task::spawn_blocking(move || synthetic::shared_prefix(tokens, Some(&counter))).await;
    match exact {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => {
            tracing::warn!(target = %prober.target.id, error = %e, "prefix-cache check: the tokenizer failed on the prefix; words count as tokens");
            words()
        }
        Err(_) => words(),
    }
}

/// One pair: the cold request, then (when it succeeded) the warm one, judged and counted.
async fn check(
    prober: &Prober,
    spec: &PrefixCacheSpec,
    prefix: &str,
    (series, status): (&PrefixSeries, &TargetStatus),
    abort: &CancellationToken,
) {
    let target = &prober.target;
    let nonce: u64 = rand::random();
    let texts = pair_texts(prefix, nonce);
    let mut measured = Vec::with_capacity(2);
    let mut detail = None;
    let at = SystemTime::now();
    for (i, text) in texts.iter().enumerate() {
        let request_id = format!("{}prefix-{nonce:016x}-{i}", target.request_id_prefix);
        let prompt = Prompt {
            text: text.clone(),
            input_tokens: text.split_whitespace().count() as u32,
            input_exact: false,
            max_tokens: MAX_TOKENS,
            model: target.model.clone(),
            media: Ok(Vec::new()),
            greedy: None,
            structure: None,
        };
        let report = prober.probe(&request_id, &prompt, abort).await;
        match report.outcome {
            Outcome::Finished(Ok(m)) => measured.push(m),
            Outcome::Finished(Err(e)) => {
                tracing::debug!(target = %target.id, request_id, error = %e, "prefix-cache check failed");
                let which = if i == 0 { "cold" } else { "warm" };
                detail = Some(format!("the {which} request: {}", e.category().as_str()));
                break;
            }
            Outcome::Cut => return,
        }
    }
    let verdict = judge(spec, spec.prefix_tokens, measured.first(), measured.get(1));
    let ttfts = match (measured.first(), measured.get(1)) {
        (Some(cold), Some(warm)) => cold
            .ttft
            .zip(warm.ttft)
            .map(|(c, w)| (c.as_secs_f64(), w.as_secs_f64())),
        _ => None,
    };
    tracing::debug!(target = %target.id, result = verdict.result(), rule = verdict.rule(), "prefix-cache check");
    series.record(verdict, ttfts);
    let cold = measured.first();
    let warm = measured.get(1);
    status.push_prefix(PrefixCheck {
        at,
        request_id: format!("{}prefix-{nonce:016x}-1", target.request_id_prefix),
        result: verdict.result(),
        rule: verdict.rule(),
        cached: (
            cold.and_then(|m| m.cached_prompt_tokens),
            warm.and_then(|m| m.cached_prompt_tokens),
        ),
        ttft: (cold.and_then(|m| m.ttft), warm.and_then(|m| m.ttft)),
        detail,
    });
}

/// Judge a pair: `cold` warmed the cache with a prefix of `prefix_tokens`, `warm` shared it.
pub fn judge(
    spec: &PrefixCacheSpec,
    prefix_tokens: u32,
    cold: Option<&Measurement>,
    warm: Option<&Measurement>,
) -> Verdict {
    let (Some(cold), Some(warm)) = (cold, warm) else {
        return Verdict::Failed;
    };
    if let Some(cached) = warm.cached_prompt_tokens {
        // What the cold request already had cached is what comes before the nonce (a chat
        // template, a long default system prompt), cached for every request alike: only
        // what the warm one gained on top of it is the prefix.
        let gained = cached.saturating_sub(cold.cached_prompt_tokens.unwrap_or(0));
        return if gained as f64 >= spec.hit_share * f64::from(prefix_tokens) {
            Verdict::Hit(Rule::Usage)
        } else {
            Verdict::Miss
        };
    }
    match (cold.ttft, warm.ttft) {
        (Some(cold), Some(warm)) if warm.as_secs_f64() * spec.speedup <= cold.as_secs_f64() => {
            Verdict::Hit(Rule::Ttft)
        }
        _ => Verdict::Unreported,
    }
}

/// The pair's two prompt texts: the nonce, the shared prefix, then a different question
/// each (so the second is not the first sent again, which a response cache could answer).
pub fn pair_texts(prefix: &str, nonce: u64) -> [String; 2] {
    let head = format!("{} {prefix}", synthetic::nonce(nonce));
    [
        format!("{head} Question one: say yes."),
        format!("{head} Question two: say no."),
    ]
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::record::{TimedBy, TokenCount};

    fn spec() -> PrefixCacheSpec {
        PrefixCacheSpec {
            interval: Duration::from_secs(60),
            prefix_tokens: 1024,
            hit_share: 0.5,
            speedup: 1.5,
            objective: None,
        }
    }

    fn measured(ttft_ms: u64, cached: Option<u64>) -> Measurement {
        Measurement {
            ttft: Some(Duration::from_millis(ttft_ms)),
            tpot: None,
            itl: Vec::new(),
            timed_by: TimedBy::Event,
            buffered: false,
            e2el: Duration::from_millis(ttft_ms + 5),
            output_tokens: Some(TokenCount::Usage(1)),
            prompt_tokens: Some(1040),
            cached_prompt_tokens: cached,
        }
    }

    #[test]
    fn usage_judges_where_the_server_reports_it() {
        let cold = measured(63, Some(0));
        // vLLM: whole 16-token blocks of a 1,024-token prefix after an 8-token nonce.
        let warm = measured(60, Some(1024));
        assert_eq!(
            judge(&spec(), 1024, Some(&cold), Some(&warm)),
            Verdict::Hit(Rule::Usage)
        );
        // Reported and short: a miss, however fast (a warm GPU is not a cache hit).
        let short = measured(10, Some(16));
        assert_eq!(
            judge(&spec(), 1024, Some(&cold), Some(&short)),
            Verdict::Miss
        );
        assert_eq!(
            judge(&spec(), 1024, Some(&cold), Some(&measured(10, Some(0)))),
            Verdict::Miss
        );
    }

    #[test]
    fn what_every_request_has_cached_is_not_the_prefix() {
        // A template with a 600-token system prompt before the nonce: cached for the cold
        // request too, so 600 on the warm one is a miss, and 600 + 1,024 a hit.
        let cold = measured(63, Some(600));
        assert_eq!(
            judge(&spec(), 1024, Some(&cold), Some(&measured(60, Some(600)))),
            Verdict::Miss
        );
        assert_eq!(
            judge(&spec(), 1024, Some(&cold), Some(&measured(20, Some(1616)))),
            Verdict::Hit(Rule::Usage)
        );
    }

    #[test]
    fn ttft_judges_where_the_server_says_nothing_and_never_calls_a_miss() {
        let cold = measured(63, None);
        assert_eq!(
            judge(&spec(), 1024, Some(&cold), Some(&measured(17, None))),
            Verdict::Hit(Rule::Ttft)
        );
        // Not faster by 1.5×: cannot tell, so not a miss.
        let unclear = judge(&spec(), 1024, Some(&cold), Some(&measured(50, None)));
        assert_eq!(unclear, Verdict::Unreported);
        assert_eq!((unclear.result(), unclear.rule()), ("unreported", "ttft"));
        assert_eq!(judge(&spec(), 1024, None, Some(&cold)), Verdict::Failed);
        assert_eq!(Verdict::Failed.rule(), "none");
    }

    #[test]
    fn the_pair_shares_everything_but_its_question() {
        let [a, b] = pair_texts("alpha beta gamma", 7);
        let shared = a.split(" Question").next().unwrap();
        assert!(b.starts_with(shared) && a != b, "{a} / {b}");
        assert!(a.starts_with(&synthetic::nonce(7)));
        let [c, _] = pair_texts("alpha beta gamma", 8);
        assert_ne!(a.split_whitespace().next(), c.split_whitespace().next());
    }
}
