//! One session, turn by turn: build the turn on the history, wait its gap, send it, judge
//! it, count it, and feed the model's reply back (its text, its signed thinking, its calls
//! with their ids, then one result per call).

use std::sync::atomic::Ordering;
use std::time::Duration;

use http::HeaderValue;
use rand::{RngExt, SeedableRng, rngs::StdRng};
use tokio_util::sync::CancellationToken;

use super::depth::{depth_tokens, padding};
use super::pages::Shown;
use super::script::{Script, structure};
use super::trace::SessionTrace;
use super::{Expect, Reason, Seen, Turn, Verdict, judge};
use crate::endpoint::session::SessionSpec;
use crate::metrics::{Refusal, SessionSeries, TurnCache, TurnNumbers};
use crate::probe::{Outcome, Prober};
use crate::prompt::Prompt;
use crate::prompt::conversation::{Call, Conversation, Message, Reply, ToolResult};

/// Fewer prompt tokens than this left uncached on a session's first turn, whose question
/// follows a fresh id: the count is not a cache's.
const FRESH_TOKENS: u64 = 8;

/// What judges a later turn's cached tokens: the previous turn's prompt, and the most any
/// other cache could hold of this turn's prompt (`floor`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheJudge {
    pub previous_prompt: u64,
    /// What the previous turn wrote to the cache, where the server says (Anthropic): 0 is
    /// a prompt the cache took none of (below the model's minimum), nothing to read back.
    pub previous_written: Option<u64>,
    /// The API caches no prompt shorter than this (0: no minimum known).
    pub min_cacheable: u32,
    /// The most of this turn's prompt a cache could hold that never saw the previous turn:
    /// what every session shares (the template before the session's id), and each turn
    /// before the previous one's prompt and output. A replica that served one of those
    /// turns (round robin lands there as often as on the previous turn's) returns no more;
    /// only the previous turn's replica returns more.
    pub floor: u64,
    pub block: u32,
    pub hit_share: f64,
    pub reported_before: bool,
}

/// A later turn hit when what it found cached beyond the floor is at least `hit_share` of
/// the previous prompt's whole blocks beyond it (and more than none); `None`: a previous
/// turn that added no whole block beyond the floor (a hit could not be told from a cache
/// that never saw it), one below the API's minimum, or one the server said it wrote nothing
/// of.
pub fn judge_cache(j: CacheJudge, prompt: Option<u64>, cached: Option<u64>) -> Option<TurnCache> {
    if j.previous_prompt < u64::from(j.min_cacheable) || j.previous_written == Some(0) {
        return None;
    }
    let Some(cached) = cached.or((j.reported_before && prompt.is_some()).then_some(0)) else {
        return Some(TurnCache::Unreported);
    };
    let block = u64::from(j.block.max(1));
    let whole = j.previous_prompt / block * block;
    if whole <= j.floor {
        return None;
    }
    let expected = (whole - j.floor) as f64 * j.hit_share;
    let beyond = cached.saturating_sub(j.floor);
    Some(match beyond > 0 && beyond as f64 >= expected {
        true => TurnCache::Hit,
        false => TurnCache::Miss,
    })
}

/// What the turn before left for this one.
#[derive(Default)]
struct Previous {
    /// The affinity headers' values the previous response carried.
    echo: Vec<(http::HeaderName, HeaderValue)>,
    prompt_tokens: Option<u64>,
    cache_written: Option<u64>,
    output_tokens: u64,
    /// The most of a later prompt the replica that served this turn can hold: its prompt
    /// and its output (`None`: no prompt count).
    reach: Option<u64>,
    served_by: Option<String>,
    /// The reply's calls, awaiting their results.
    calls: Vec<Call>,
}

pub(super) async fn session(
    prober: &Prober,
    spec: &SessionSpec,
    seen: &Seen,
    series: &SessionSeries,
    (stop, abort): (&CancellationToken, &CancellationToken),
    mut trace: SessionTrace,
) {
    let target = &prober.target;
    let n = seen.started.fetch_add(1, Ordering::Relaxed);
    let mut rng = StdRng::seed_from_u64(rand::random());
    let script = Script::new(&mut rng);
    trace.begin(&script.id);
    let affinity = !spec.affinity_headers.is_empty() && n % 2 == 0;
    let headers = match (affinity, HeaderValue::from_str(&script.id)) {
        (true, Ok(value)) => spec
            .affinity_headers
            .iter()
            .map(|name| (name.clone(), value.clone()))
            .collect(),
        _ => Vec::new(),
    };
    let mut conversation = Conversation {
        system: script.system(),
        messages: Vec::new(),
        cache_through: None,
        headers,
        parallel_calls: None,
    };
    let (any, call) = structure(spec.force_calls);
    let mut plan = vec![
        Turn::First,
        Turn::ToolResult,
        Turn::FollowUp,
        Turn::Parallel,
        Turn::ParallelResult,
    ];
    plan.extend(spec.long_gap.map(|_| Turn::LongGap));
    let ends_deep = spec
        .depth
        .is_some_and(|d| n % u64::from(d.every) == u64::from(d.every) - 1);
    // The depth is settled before the first turn, so the window it reads and the depth it
    // pads to are exported even when a turn ends the session before its depth turn.
    let depth = match ends_deep {
        true => depth_tokens(prober, spec, series).await,
        false => None,
    };
    plan.extend(depth.map(|_| Turn::Depth));
    let mut previous = Previous::default();
    let mut base = None;
    // The most any cache but the previous turn's could hold of the next prompt
    // (`CacheJudge::floor`); `None` until the first turn, or once a turn's prompt was not
    // counted.
    let mut earlier: Option<u64> = None;
    let mut set_aside = false;
    let mut complete = true;
    let mut ended_by = None;
    let mut depth_passed = false;
    // What a pass of the history and of the window asks: a turn with tool results in its
    // history accepted, and the longest prompt accepted.
    let mut results_accepted = false;
    let mut longest = 0;
    for (index, turn) in plan.into_iter().enumerate() {
        // Calls left unanswered (a model that called again where it was to answer) get
        // their results first: a call without one is a history no API accepts.
        let results = match turn {
            Turn::ToolResult | Turn::ParallelResult if previous.calls.is_empty() => continue,
            _ => answer(&mut rng, &mut conversation, &mut previous.calls),
        };
        let (gap, expect, structure) = match turn {
            Turn::First => {
                conversation.messages.push(Message::User(script.first()));
                (Duration::ZERO, Expect::Calls(1), &call)
            }
            Turn::ToolResult | Turn::ParallelResult => {
                let (low, high) = spec.tool_gap;
                let gap = low + (high.saturating_sub(low)).mul_f64(rng.random::<f64>());
                (gap, Expect::Grounded(results), &any)
            }
            Turn::FollowUp => {
                conversation
                    .messages
                    .push(Message::User(script.follow_up()));
                (spec.human_gap, Expect::Answer, &any)
            }
            Turn::Parallel => {
                let text = script.second_lookup(spec.parallel);
                conversation.messages.push(Message::User(text));
                let wanted = if spec.parallel { 2 } else { 1 };
                (spec.human_gap, Expect::Calls(wanted), &call)
            }
            Turn::LongGap => {
                conversation.messages.push(Message::User(script.long_gap()));
                (spec.long_gap.unwrap_or_default(), Expect::Answer, &any)
            }
            Turn::Depth => {
                let depth = depth.unwrap_or_default();
                let Some(padding) = padding(
                    prober,
                    depth,
                    previous.prompt_tokens.map(|p| p + previous.output_tokens),
                    &conversation,
                )
                .await
                else {
                    tracing::debug!(target = %target.id, depth, "session check: the history already reaches the depth; no depth turn");
                    break;
                };
                conversation
                    .messages
                    .push(Message::User(script.depth(&padding)));
                (Duration::ZERO, Expect::Answer, &any)
            }
        };
        if !gap.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(gap) => {}
                // Dropped at shutdown, unjudged and uncounted, like a prefix-cache pair.
                () = stop.cancelled() => return,
            }
        }
        // An affinity header the gateway returned goes back as it came (llm-d's
        // `x-session-token`, the base64 of the pod it chose); the others carry the id.
        if affinity {
            for (name, value) in &mut conversation.headers {
                if let Some((_, echoed)) = previous.echo.iter().find(|(n, _)| n == name) {
                    value.clone_from(echoed);
                }
            }
        }
        conversation.cache_through = Some(conversation.messages.len());
        // Several calls only where asked for: a server's grammar may write more than one
        // for a forced call, and a template that renders one call a reply (Llama 3's
        // "only supports single tool-calls at once") would then refuse the next turn.
        conversation.parallel_calls = Some(turn == Turn::Parallel && spec.parallel);
        let request_id = format!("{}session-{}-{index}", target.request_id_prefix, script.id);
        let text = conversation.last_user_text().to_owned();
        let prompt = Prompt {
            input_tokens: previous.prompt_tokens.unwrap_or(0) as u32
                + text.split_whitespace().count() as u32,
            text,
            input_exact: false,
            max_tokens: spec.max_tokens,
            model: target.model.clone(),
            media: Ok(Vec::new()),
            greedy: None,
            sampled: None,
            structure: Some(std::sync::Arc::clone(structure)),
            cache_breakpoint: None,
            conversation: Some(std::sync::Arc::new(conversation.clone())),
            extra: None,
        };
        // A target stopped (removed, reloaded, the daemon shutting down) sends no more
        // turns and counts none: its series are gone, and a late count would make them
        // again, for good.
        if stop.is_cancelled() {
            return;
        }
        let report = prober
            .probe_traced(&request_id, &prompt, abort, trace.next())
            .await;
        let span = trace.turn(target, &request_id, &report, turn);
        let Outcome::Finished(result) = &report.outcome else {
            return;
        };
        if stop.is_cancelled() {
            return;
        }
        let response = &report.record.response;
        let mut verdict = judge(
            turn,
            index,
            result.as_ref().map(|_| response),
            structure,
            &expect,
        );
        if let (Some(Reason::HistoryRejected), Err(e)) = (verdict.reason, result) {
            // The control: the session's question alone, with the same tools and headers.
            // Refused too, it is the server refusing such requests, not the history.
            let control = Conversation {
                messages: vec![Message::User(script.first())],
                cache_through: Some(1),
                parallel_calls: Some(false),
                ..conversation.clone()
            };
            let prompt = Prompt {
                conversation: Some(std::sync::Arc::new(control)),
                structure: Some(std::sync::Arc::clone(&call)),
                ..prompt.clone()
            };
            let id = format!("{request_id}-control");
            let asked = prober.probe_traced(&id, &prompt, abort, trace.next()).await;
            trace.control(target, &id, &asked);
            match asked.outcome {
                Outcome::Cut => return,
                Outcome::Finished(Ok(_)) => {}
                Outcome::Finished(Err(control)) => {
                    verdict = Verdict {
                        reason: Some(Reason::Error(e.category())),
                        note: Some(format!(
                            "{e}; the session's question alone, with the same tools, was refused too ({}): not the history",
                            control.category()
                        )),
                    };
                }
            }
        }
        trace.judged(span, turn, verdict.result());
        let measured = result.as_ref().ok();
        if let Some(cached) = measured.and_then(|m| m.cached_prompt_tokens) {
            seen.reported.store(true, Ordering::Relaxed);
            if !set_aside {
                seen.saw_cached(cached);
            }
        }
        series.turn(
            turn,
            verdict.result(),
            TurnNumbers {
                ttft: measured.and_then(|m| m.ttft).map(|d| d.as_secs_f64()),
                call_first: report.record.first_is_call(),
                e2el: measured.map(|m| m.e2el.as_secs_f64()),
                prompt_tokens: measured.and_then(|m| m.prompt_tokens),
                cached_tokens: measured.and_then(|m| m.cached_prompt_tokens),
                output_tokens: measured.and_then(|m| m.output_tokens).map(|t| t.value()),
            },
        );
        if let Some(m) = measured {
            if turn == Turn::First {
                let cached = m.cached_prompt_tokens.unwrap_or(0);
                // The question after the session's fresh id (a dozen tokens and more) cannot
                // be in any cache: a first turn that reports all but a few tokens cached is
                // a prefill/decode split's decode side (vLLM reports `prompt − 1`) or a
                // double count. No later turn of the session can be judged by such counts.
                if m.prompt_tokens
                    .is_some_and(|p| p > 0 && p.saturating_sub(cached) < FRESH_TOKENS)
                {
                    set_aside = true;
                    if !seen.set_aside.swap(true, Ordering::Relaxed) {
                        tracing::warn!(target = %target.id, cached, prompt = m.prompt_tokens.unwrap_or(0), "session check: the first turn, whose prompt no cache can hold, reported most of it cached (a prefill/decode split's decode side, or a double count): later turns are counted unreported (docs/sessions.md)");
                    }
                }
                base = Some(cached);
            }
            let judged = match (turn.cached(), previous.prompt_tokens, earlier) {
                (true, Some(_), _) if set_aside => Some(TurnCache::Unreported),
                (true, Some(previous_prompt), Some(floor)) => judge_cache(
                    CacheJudge {
                        previous_prompt,
                        previous_written: previous.cache_written,
                        min_cacheable: spec.min_cacheable,
                        floor,
                        block: spec.block_tokens.unwrap_or_else(|| seen.inferred_block()),
                        hit_share: spec.hit_share,
                        reported_before: seen.reported.load(Ordering::Relaxed),
                    },
                    m.prompt_tokens,
                    m.cached_prompt_tokens,
                ),
                _ => None,
            };
            if let Some(cache) = judged {
                series.cache(turn, cache, affinity);
            }
            tracing::debug!(target = %target.id, request_id, turn = turn.as_str(), previous = ?previous.prompt_tokens, floor = ?earlier, prompt = ?m.prompt_tokens, cached = ?m.cached_prompt_tokens, verdict = ?judged, served_by = ?response.served_by, previous_served_by = ?previous.served_by, "session turn's cache");
            if let (Some(before), Some(now)) = (&previous.served_by, &response.served_by) {
                series.routed(before != now);
                if let Some(verdict @ (TurnCache::Hit | TurnCache::Miss)) = judged {
                    series.routed_cache(verdict, before == now);
                }
            }
        }
        // The previous turn's prompt and output: what a refused prompt was built on (the log
        // line says it; a window refusal's page closes only on sessions as long).
        let history = previous.prompt_tokens.map(|p| p + previous.output_tokens);
        match &verdict.reason {
            None => {
                tracing::debug!(target = %target.id, request_id, turn = turn.as_str(), "session turn")
            }
            // What pages (a refused history, a window below the depth) is said louder.
            Some(reason @ (Reason::HistoryRejected | Reason::ContextLength)) => {
                let note = verdict.note.as_deref().unwrap_or("");
                tracing::warn!(target = %target.id, request_id, turn = turn.as_str(), result = reason.as_str(), history_tokens = ?history, note, "session turn refused");
            }
            Some(reason) => {
                let note = verdict.note.as_deref().unwrap_or("");
                tracing::info!(target = %target.id, request_id, turn = turn.as_str(), result = reason.as_str(), note, "session turn failed");
            }
        }
        let refused = Shown::Refused { tokens: history };
        match (turn, verdict.reason) {
            (Turn::First, Some(Reason::Error(crate::error::ErrorCategory::Http4xx))) => {
                page(seen, series, Refusal::Tools, refused);
            }
            (Turn::First, Some(Reason::Error(_) | Reason::ContextLength)) => {}
            (Turn::First, _) => page(seen, series, Refusal::Tools, Shown::Passed { tokens: 0 }),
            _ => {}
        }
        match (turn, verdict.reason) {
            (_, Some(Reason::HistoryRejected)) => page(seen, series, Refusal::History, refused),
            (Turn::Depth, Some(Reason::ContextLength)) => {
                page(seen, series, Refusal::Depth, refused);
            }
            (_, Some(Reason::ContextLength)) => page(seen, series, Refusal::Window, refused),
            (Turn::Depth, reason) => depth_passed = !matches!(reason, Some(Reason::Error(_))),
            (Turn::ToolResult | Turn::ParallelResult, reason) => {
                results_accepted |= !matches!(reason, Some(Reason::Error(_)));
            }
            _ => {}
        }
        if !verdict.ends_session() {
            longest = longest.max(measured.and_then(|m| m.prompt_tokens).unwrap_or(0));
        }
        if verdict.ends_session() {
            complete = false;
            ended_by = Some(turn);
            break;
        }
        let calls = reply_calls(response, &mut rng);
        conversation.messages.push(Message::Assistant(Reply {
            text: response.text.clone(),
            thinking: response.thinking.clone(),
            reasoning: response.reasoning.clone(),
            calls: calls.clone(),
        }));
        let prompt_tokens = measured.and_then(|m| m.prompt_tokens);
        earlier = match turn {
            // Every session shares what comes before its id, which the first turn's
            // question follows: at most its prompt less the question's fewest tokens.
            Turn::First => {
                prompt_tokens.map(|p| p.saturating_sub(FRESH_TOKENS).max(base.unwrap_or(0)))
            }
            _ => earlier.zip(previous.reach).map(|(a, b)| a.max(b)),
        };
        previous = Previous {
            echo: response.echo.clone(),
            prompt_tokens,
            // An output count that is not the server's may be short: the turn's limit
            // bounds it.
            reach: prompt_tokens.map(|p| {
                p + measured
                    .and_then(|m| m.output_tokens)
                    .filter(|t| t.is_exact())
                    .map_or(u64::from(spec.max_tokens), |t| t.value())
            }),
            cache_written: response.cache_written,
            output_tokens: measured
                .and_then(|m| m.output_tokens)
                .map_or(0, |t| t.value()),
            served_by: response.served_by.clone(),
            calls,
        };
    }
    // Passed where a refusal stops sessions: every turn before the depth turn sent and
    // accepted (the history and the window), the depth turn accepted.
    if complete || ended_by == Some(Turn::Depth) {
        let passed = Shown::Passed { tokens: longest };
        if results_accepted {
            page(seen, series, Refusal::History, passed);
        }
        page(seen, series, Refusal::Window, passed);
    }
    if depth_passed {
        page(seen, series, Refusal::Depth, Shown::Passed { tokens: 0 });
    }
    series.session(complete);
    trace.finish(complete);
}

/// What a session showed of `refusal`, to its page's state and series.
fn page(seen: &Seen, series: &SessionSeries, refusal: Refusal, shown: Shown) {
    let open = seen
        .pages
        .record(refusal, shown, tokio::time::Instant::now());
    series.refusal_open(refusal, open);
}

/// The reply's calls as the history sends them back, each with the id the server gave
/// it or (a server that sent none, or an empty or repeated one) one of the session's own:
/// nine alphanumerics, the shape Mistral's tokenizer demands. Arguments that are no JSON
/// object (a stray call on a turn judged for its text) go back as `{}`: a history the
/// probe broke would be refused, and counted as the server's `history_rejected`.
fn reply_calls(response: &crate::record::ResponseInfo, rng: &mut StdRng) -> Vec<Call> {
    let mut calls: Vec<Call> = Vec::with_capacity(response.tool_calls.len());
    for c in &response.tool_calls {
        let object =
            serde_json::from_str::<serde_json::Value>(&c.arguments).is_ok_and(|v| v.is_object());
        let given =
            c.id.clone()
                .filter(|id| !id.trim().is_empty() && !calls.iter().any(|k| &k.id == id));
        let id = given.unwrap_or_else(|| {
            (0..9)
                .map(|_| char::from(rng.sample(rand::distr::Alphanumeric)))
                .collect()
        });
        calls.push(Call {
            id,
            name: c.name.clone(),
            arguments: if object {
                c.arguments.clone()
            } else {
                "{}".into()
            },
        });
    }
    calls
}

/// Append one result per pending call, and return the secrets the next answer must quote.
fn answer(rng: &mut StdRng, conversation: &mut Conversation, calls: &mut Vec<Call>) -> Vec<String> {
    if calls.is_empty() {
        return Vec::new();
    }
    let mut secrets = Vec::new();
    let results = calls
        .drain(..)
        .map(|call| {
            let lookup = Script::lookup(rng, &call.arguments);
            secrets.push(lookup.secret);
            ToolResult {
                call_id: call.id,
                content: lookup.content,
            }
        })
        .collect();
    conversation.messages.push(Message::ToolResults(results));
    secrets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(
        previous_prompt: u64,
        floor: u64,
        block: u32,
        cached: Option<u64>,
    ) -> Option<TurnCache> {
        let j = CacheJudge {
            previous_prompt,
            previous_written: None,
            min_cacheable: 0,
            floor,
            block,
            hit_share: 0.5,
            reported_before: false,
        };
        judge_cache(j, Some(previous_prompt + 50), cached)
    }

    #[test]
    fn a_later_turn_hits_when_the_previous_prompt_came_back() {
        assert_eq!(judge(400, 0, 16, Some(384)), Some(TurnCache::Hit));
        assert_eq!(judge(400, 0, 16, Some(0)), Some(TurnCache::Miss));
        // What every session shares (the template) is no hit.
        assert_eq!(judge(400, 32, 16, Some(32)), Some(TurnCache::Miss));
        assert_eq!(judge(400, 32, 16, Some(400)), Some(TurnCache::Hit));
        // Whole blocks only: a 128-token block cache holds 384 of 400.
        assert_eq!(judge(400, 0, 128, Some(256)), Some(TurnCache::Hit));
        assert_eq!(judge(400, 0, 128, Some(128)), Some(TurnCache::Miss));
        // A history shorter than one block beyond the floor: nothing to judge.
        assert_eq!(judge(200, 128, 128, Some(128)), None);
        assert_eq!(judge(400, 0, 16, None), Some(TurnCache::Unreported));
        // A server that has reported before and sends no count now reports none.
        let j = CacheJudge {
            previous_prompt: 400,
            previous_written: None,
            min_cacheable: 0,
            floor: 0,
            block: 16,
            hit_share: 0.5,
            reported_before: true,
        };
        assert_eq!(judge_cache(j, Some(450), None), Some(TurnCache::Miss));
        assert_eq!(judge_cache(j, None, None), Some(TurnCache::Unreported));
        // A hosted API's minimum (OpenAI's 1,024): a shorter history is not judged.
        let hosted = CacheJudge {
            min_cacheable: 1024,
            ..j
        };
        assert_eq!(judge_cache(hosted, Some(450), Some(0)), None);
        let longer = CacheJudge {
            previous_prompt: 1100,
            ..hosted
        };
        assert_eq!(
            judge_cache(longer, Some(1150), Some(1024)),
            Some(TurnCache::Hit)
        );
        // Anthropic said the previous turn wrote nothing: nothing to read back.
        let unwritten = CacheJudge {
            previous_written: Some(0),
            ..j
        };
        assert_eq!(judge_cache(unwritten, Some(450), Some(0)), None);
    }

    /// Issue 61's round robin over two vLLM replicas (128-token blocks): the
    /// parallel_result turn (previous prompt 1,169) landing on the replica of the
    /// follow_up turn (prompt 879, output at most 128) got back 768 tokens, half the
    /// previous prompt's blocks, and was judged a hit. What turns before the previous one
    /// could leave is the floor: only the previous turn's replica returns more.
    #[test]
    fn a_replica_that_served_an_earlier_turn_is_no_hit() {
        let floor = 879 + 128;
        assert_eq!(judge(1169, floor, 128, Some(768)), Some(TurnCache::Miss));
        assert_eq!(judge(1169, floor, 128, Some(1024)), Some(TurnCache::Miss));
        assert_eq!(judge(1169, floor, 128, Some(1152)), Some(TurnCache::Hit));
        // The previous turn added no whole block beyond the floor: a hit would look like
        // the earlier replica's answer, so the turn is not judged.
        assert_eq!(judge(1000, floor, 128, Some(896)), None);
        // Without blocks, a hit is more than the floor, by half of what the previous turn
        // added.
        assert_eq!(judge(1100, 1000, 1, Some(1000)), Some(TurnCache::Miss));
        assert_eq!(judge(1100, 1000, 1, Some(1049)), Some(TurnCache::Miss));
        assert_eq!(judge(1100, 1000, 1, Some(1050)), Some(TurnCache::Hit));
    }
}
