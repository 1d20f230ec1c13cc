//! The prefix-cache check (docs/prefix-cache.md): at its own interval, a pair of requests
//! that share a prefix no earlier request had (a nonce, then `prefix_tokens` of text drawn
//! for this pair alone, exact with the target's tokenizer, else words) and differ after
//! it. The first warms the cache; the second, sent `reuse_gap` later as a conversation's
//! next turn, is judged (`judge`). A fresh prefix per pair is what lets a pair sent through
//! a gateway say whether the second reached the replica that holds the first's prefix; the
//! gap is what lets it see a cache that forgets under load before the user comes back.
//!
//! The judgement, in order:
//! - the server reported cached tokens for the second request: `hit` when they exceed the
//!   first's (what precedes the nonce, cached for every request) by at least `hit_share`
//!   of the prefix's whole blocks, else `miss` (rule `usage`); unless the first reported
//!   most of the prefix cached, which no cache can have done (set aside, judged by TTFT);
//! - it reported nothing: `hit` when the second's TTFT is at most the first's divided by
//!   `speedup` (rule `ttft`), else `unreported`. A server that caches but does not say so
//!   is never a `miss`; one that has reported before and sends no count now reports 0.
//! - either request failed: `failed`, judged by nothing (its error is the probes' business).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use opentelemetry::KeyValue;
use tokio_util::sync::CancellationToken;

use crate::budget::Budget;
use crate::endpoint::prefix_cache::PrefixCacheSpec;
use crate::metrics::{PrefixSeries, SkipReason, TargetMetrics};
use crate::otlp::CheckTrace;
use crate::probe::{Outcome, Prober};
use crate::prompt::{Prompt, synthetic};
use crate::scheduler::Context;
use crate::status::{PrefixCheck, TargetStatus};
use crate::ticker::Ticker;
pub use judge::{Judgement, Known, Rule, SetAside, Verdict, judge};

/// What each request of a pair asks for. One first token is all the check needs, but a
/// model may spend its first on an empty piece (a partial UTF-8 byte, a stop token), which
/// is no first token and fails the probe: on vLLM with a random-weight model, one request
/// in four at 1 token (44% of pairs `failed`); four make that rare.
const MAX_TOKENS: u32 = (crate::endpoint::prefix_cache::PAIR_OUTPUT_TOKENS / 2) as u32;

mod judge;

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
    let mut ticker = Ticker::new(spec.interval);
    let spec = Arc::new(spec);
    let seen = Arc::new(Seen::default());
    while let Some((now, permit)) = ticker.tick(&stop).await {
        // Both requests' max_tokens, from the hour the target's workload spends too.
        if let Some(budget) = &sinks.budget {
            if !budget.try_spend(now, 2 * MAX_TOKENS) {
                sinks.metrics.skipped(SkipReason::Budget);
                continue;
            }
        }
        let (prober, spec, seen, series, status, abort, stop) = (
            Arc::clone(&prober),
            Arc::clone(&spec),
            Arc::clone(&seen),
            sinks.series.clone(),
            Arc::clone(&sinks.status),
            ctx.abort.clone(),
            stop.clone(),
        );
        // One sampling decision per pair: its two requests are one trace.
        let trace = CheckTrace::new(
            ctx.spans.clone(),
            ctx.sample(),
            &prober.target,
            format!("prefix_cache {}", prober.target.model),
            "inferprobe.prefix_cache.result",
        );
        ctx.probes.spawn(async move {
            let _permit = permit;
            let sinks = (&series, &*status);
            check(&prober, &spec, &seen, sinks, (&stop, &abort), trace).await;
        });
    }
}

/// What a target's pairs have shown so far, shared by its pairs.
#[derive(Debug, Default)]
struct Seen {
    /// Its server reported cached tokens for a pair's request: from then on, a response
    /// with usage and no count reports none (item 6 of issue 43: providers that send the
    /// count only on a hit). Until the daemon restarts.
    reported: AtomicBool,
    /// A pair's usage was set aside: said once in the log, then counted.
    set_aside: AtomicBool,
}

/// A pair's shared prefix, drawn from its nonce: exactly `tokens` tokens with the target's
/// tokenizer (encoded off the runtime: a long prefix is milliseconds of CPU),
/// words-as-tokens without one, or when the tokenizer fails on it (said in the log).
async fn prefix_text(prober: &Prober, tokens: u32, nonce: u64) -> String {
    let words = || synthetic::pair_prefix(tokens, nonce, None).unwrap_or_default();
    let Some(counter) = prober.target.prompts.tokenizer.clone() else {
        return words();
    };
    let exact =
        tokio::task::spawn_blocking(move || synthetic::pair_prefix(tokens, nonce, Some(&counter)))
            .await;
    match exact {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => {
            tracing::warn!(target = %prober.target.id, error = %e, "prefix-cache check: the tokenizer failed on the prefix; words count as tokens");
            words()
        }
        Err(_) => words(),
    }
}

/// One pair: the cold request, then (when it succeeded) the warm one `reuse_gap` later,
/// judged and counted.
async fn check(
    prober: &Prober,
    spec: &PrefixCacheSpec,
    seen: &Seen,
    (series, status): (&PrefixSeries, &TargetStatus),
    (stop, abort): (&CancellationToken, &CancellationToken),
    mut trace: CheckTrace,
) {
    let target = &prober.target;
    let nonce: u64 = rand::random();
    let prefix = prefix_text(prober, spec.prefix_tokens, nonce).await;
    let (texts, shared) = pair_texts(&prefix, nonce);
    let mut measured = Vec::with_capacity(2);
    let mut cold_written = None;
    let mut detail = None;
    let at = SystemTime::now();
    let mut cold_answer = String::new();
    for (i, text) in texts.iter().enumerate() {
        let request_id = format!("{}prefix-{nonce:016x}-{i}", target.request_id_prefix);
        let (text, conversation) = match i {
            0 => (text.clone(), None),
            _ => next_turn(target.backend, &texts[0], &cold_answer, text),
        };
        let prompt = Prompt {
            input_tokens: text.split_whitespace().count() as u32,
            text,
            input_exact: false,
            max_tokens: MAX_TOKENS,
            model: target.model.clone(),
            media: Ok(Vec::new()),
            greedy: None,
            sampled: None,
            structure: None,
            cache_breakpoint: Some(shared),
            conversation,
            extra: None,
        };
        // A pair waiting out its gap at shutdown is dropped, unjudged: its warm request
        // would go out after the daemon was told to stop, and hold the drain for the gap.
        if i == 1 && !spec.reuse_gap.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(spec.reuse_gap) => {}
                () = stop.cancelled() => return,
            }
        }
        let report = prober
            .probe_traced(&request_id, &prompt, abort, trace.next())
            .await;
        let which = KeyValue::new("inferprobe.prefix_cache.request", ["cold", "warm"][i]);
        trace.sent(target, &request_id, &report, vec![which]);
        match report.outcome {
            Outcome::Finished(Ok(m)) => {
                if i == 0 {
                    cold_written = report.record.response.cache_written;
                    cold_answer.clone_from(&report.record.response.text);
                }
                measured.push(m);
            }
            Outcome::Finished(Err(e)) => {
                tracing::debug!(target = %target.id, request_id, error = %e, "prefix-cache check failed");
                let which = if i == 0 { "cold" } else { "warm" };
                detail = Some(format!("the {which} request: {}", e.category().as_str()));
                break;
            }
            Outcome::Cut => return,
        }
    }
    let (cold, warm) = (measured.first(), measured.get(1));
    if measured.iter().any(|m| m.cached_prompt_tokens.is_some()) {
        seen.reported.store(true, Ordering::Relaxed);
    }
    let known = Known {
        reported_before: seen.reported.load(Ordering::Relaxed),
        cold_written,
    };
    let Judgement { verdict, set_aside } = judge(spec, cold, warm, known);
    if let (Some(reason), Some(cold)) = (set_aside, cold) {
        let said = match reason {
            SetAside::ColdCached => format!(
                "the cold request reported {} of {} prompt tokens cached, before any cache could hold its prefix: judged by TTFT",
                tokens(cold.cached_prompt_tokens),
                tokens(cold.prompt_tokens),
            ),
            SetAside::NotWritten => {
                "the server wrote none of the cold request's prefix to its cache: judged by TTFT"
                    .to_owned()
            }
        };
        if !seen.set_aside.swap(true, Ordering::Relaxed) {
            let why = match reason {
                SetAside::ColdCached => {
                    "a prefill/decode split (its decode side reports the KV it received) or a double count"
                }
                SetAside::NotWritten => {
                    "a prefix below the model's minimum cacheable length, or no caching for the model"
                }
            };
            tracing::warn!(target = %target.id, "prefix-cache check: {said}; {why} (docs/prefix-cache.md)");
        }
        detail.get_or_insert(said);
    }
    let ttfts = match (cold, warm) {
        (Some(cold), Some(warm)) => cold
            .ttft
            .zip(warm.ttft)
            .map(|(c, w)| (c.as_secs_f64(), w.as_secs_f64())),
        _ => None,
    };
    tracing::debug!(target = %target.id, result = verdict.result(), rule = verdict.rule(), "prefix-cache check");
    series.record(verdict, set_aside, ttfts);
    trace.set(KeyValue::new(
        "inferprobe.prefix_cache.rule",
        verdict.rule(),
    ));
    trace.finish(verdict.result(), None);
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

fn tokens(n: Option<u64>) -> String {
    n.map_or_else(|| "no".into(), |n| n.to_string())
}

/// The pair's two prompt texts: the nonce, the shared prefix, then a different question
/// each (so the second is not the first sent again, which a response cache could answer);
/// and where their shared part ends, for an API that caches only at a breakpoint.
pub fn pair_texts(prefix: &str, nonce: u64) -> ([String; 2], usize) {
    let head = format!("{} {prefix}", synthetic::nonce(nonce));
    let texts = [
        format!("{head} Question one: say yes."),
        format!("{head} Question two: say no."),
    ];
    (texts, head.len())
}

/// The warm request as the cold one's next turn: its message, its answer, then the second
/// question, as a conversation goes on. A cache that stores units at the end of each
/// request's input and output (DeepSeek: "A+B then A+C cannot hit") serves only this; every
/// prefix cache serves it. The completion APIs get the same as one text. The Messages API
/// keeps the pair's two requests: it caches up to the explicit breakpoint both carry, and a
/// next turn's blocks would end elsewhere.
fn next_turn(
    backend: crate::endpoint::BackendKind,
    cold: &str,
    answer: &str,
    warm: &str,
) -> (
    String,
    Option<Arc<crate::prompt::conversation::Conversation>>,
) {
    use crate::endpoint::BackendKind as B;
    use crate::prompt::conversation::{Conversation, Message, Reply};
    let question = warm.rsplit_once(" Question").map_or(warm, |(_, q)| q);
    let question = format!("Question{question}");
    match backend {
        B::Anthropic => (warm.to_owned(), None),
        B::OpenAiChat | B::TgiChat | B::OpenAiResponses => {
            let conversation = Conversation {
                system: String::new(),
                messages: vec![
                    Message::User(cold.to_owned()),
                    Message::Assistant(Reply {
                        text: answer.to_owned(),
                        ..Reply::default()
                    }),
                    Message::User(question.clone()),
                ],
                cache_through: None,
                headers: Vec::new(),
                parallel_calls: None,
            };
            (question, Some(Arc::new(conversation)))
        }
        _ => (format!("{cold}{answer}\n{question}"), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pair_shares_everything_but_its_question() {
        let ([a, b], at) = pair_texts("alpha beta gamma", 7);
        let shared = a.split(" Question").next().unwrap();
        assert!(b.starts_with(shared) && a != b, "{a} / {b}");
        assert_eq!(&a[..at], shared);
        assert!(a.starts_with(&synthetic::nonce(7)));
        let ([c, _], _) = pair_texts("alpha beta gamma", 8);
        assert_ne!(a.split_whitespace().next(), c.split_whitespace().next());
    }

    #[test]
    fn the_warm_request_is_the_cold_ones_next_turn() {
        use crate::endpoint::BackendKind as B;
        let ([cold, warm], _) = pair_texts("alpha beta gamma", 7);
        // Chat: the cold request's one message, its answer, the second question.
        let (text, conversation) = next_turn(B::OpenAiChat, &cold, "Yes.", &warm);
        assert_eq!(text, "Question two: say no.");
        let messages = crate::backend::history::chat(&conversation.unwrap());
        assert_eq!(
            messages,
            serde_json::json!([
                { "role": "user", "content": cold },
                { "role": "assistant", "content": "Yes." },
                { "role": "user", "content": "Question two: say no." },
            ])
        );
        // Completions: one text that begins with the cold prompt and its answer.
        let (text, conversation) = next_turn(B::OpenAi, &cold, " yes", &warm);
        assert!(conversation.is_none());
        assert!(text.starts_with(&format!("{cold} yes")));
        assert!(text.ends_with("Question two: say no."));
        // The Messages API keeps the pair: both requests carry the same breakpoint.
        assert_eq!(next_turn(B::Anthropic, &cold, "Yes.", &warm), (warm, None));
    }
}
