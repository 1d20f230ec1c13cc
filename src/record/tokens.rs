//! How many tokens each event of a stream carried: what ITL and TPOT are timed by.
//!
//! A server packs several tokens into one event under speculative decoding (EAGLE, MTP,
//! Medusa, n-gram: every accepted draft token of a step), with a stream interval (vLLM and
//! SGLang `--stream-interval N`), and on hosted APIs. Timing such a stream per event would
//! report k·ITL and a TPOT k times too large, and page for a healthy server. The rule, best
//! source first:
//!
//! 1. **Per-chunk usage** (vLLM `continuous_usage_stats`): the rise of
//!    `usage.completion_tokens` at each event. Exact.
//! 2. **One per event**, for certain, when the visible total (below) equals the number of
//!    events, or of events and the empty deltas after the first (vLLM sends one event per
//!    token, with empty text for a token that is part of a character still incomplete). A
//!    blank event carrying the finish reason counts only when the total needs it: vLLM's
//!    last token at the length limit, held back; not llama-server's bare end.
//! 3. **The configured tokenizer** on each event's own text (answer, reasoning, tool
//!    calls), when it adds up to the visible total or there is no total. When it does not
//!    (re-tokenizing text is not how it was generated: a replacement character for held-back
//!    bytes, merges across events), the total rules and the tokenizer's counts only weigh
//!    the shares, as in 4.
//! 4. **An estimate**: the visible total shared over the events in proportion to their
//!    text's bytes, by largest remainder, at least one each.
//! 5. **One per event**, when there is no total, it is below the event count, or it
//!    cannot all have been streamed (more tokens than bytes of text: hidden output the
//!    server did not account for).
//!
//! The visible total is the billed `completion_tokens` minus what was billed but never
//! streamed: reasoning the usage breaks out when the reasoning itself did not arrive
//! (OpenAI o-series, Responses, Claude's summarized thinking), and the EOS token of a
//! generation that ended on an empty `stop`/`eos_token` event (vLLM, llama.cpp and TGI
//! count it; it has no text).

use tokio::time::Instant;

use super::{MAX_PLAUSIBLE_TOKENS, RequestRecord, implausible};
use crate::error::ProbeError;
use crate::prompt::TokenCounter;

/// Where the tokens per event came from (the rule's steps, in order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimedBy {
    /// The rise of per-chunk usage.
    Usage,
    /// The configured tokenizer on each event's text.
    Tokenizer,
    /// The visible total shared over the events by their text.
    Estimate,
    /// One token per event.
    #[default]
    Event,
}

impl TimedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Usage => "usage",
            Self::Tokenizer => "tokenizer",
            Self::Estimate => "estimate",
            Self::Event => "event",
        }
    }
}

/// `(arrival, tokens it carried)` for every token-carrying event.
pub(super) type Timed = Vec<(Instant, u64)>;

impl RequestRecord {
    pub(super) fn timed_tokens(
        &self,
        tokenizer: Option<&TokenCounter>,
    ) -> Result<(Timed, TimedBy), ProbeError> {
        let continuous = self
            .observations
            .iter()
            .find(|o| o.has_output)
            .is_some_and(|o| o.completion_tokens.is_some());
        if continuous {
            return Ok((self.usage_rises()?, TimedBy::Usage));
        }
        // The events that carried output, with their text; and every arrival, counting the
        // empty deltas (each a held-back token on vLLM). Those before the first output are
        // seen with it: they are its tokens.
        let mut events = Vec::with_capacity(self.observations.len());
        let mut arrivals: Timed = Vec::with_capacity(self.observations.len());
        let (mut arrived, mut held_back) = (0u64, 0u64);
        let mut finish_blank = None;
        let (mut text_at, mut other_at) = (0, 0);
        for o in &self.observations {
            let text = self.response.text.get(text_at..o.text_end).unwrap_or("");
            let other = self
                .response
                .other_text
                .get(other_at..o.other_end)
                .unwrap_or("");
            (text_at, other_at) = (o.text_end.max(text_at), o.other_end.max(other_at));
            if o.has_output {
                events.push((o.at, text, other));
            }
            if o.blank && o.finish && !events.is_empty() {
                finish_blank = Some(o.at);
                continue;
            }
            if o.has_output || o.blank {
                arrived += 1;
                if o.has_output || !events.is_empty() {
                    arrivals.push((o.at, 1 + std::mem::take(&mut held_back)));
                } else {
                    held_back += 1;
                }
            }
        }
        let one_each = || events.iter().map(|&(at, ..)| (at, 1)).collect();
        let visible = self.visible_total()?;
        // As many visible tokens as events: one each, for certain (and no tokenizing).
        if visible == Some(events.len() as u64) {
            return Ok((one_each(), TimedBy::Event));
        }
        // As many as events and empty deltas together: one each again, the empty ones
        // included (vLLM, one event per token, some of them bytes of a longer character).
        if arrived > events.len() as u64 && visible == Some(arrived) {
            return Ok((arrivals, TimedBy::Event));
        }
        // The blank finish event is a token too when that makes the count: vLLM's last
        // token, its text held back at the length limit. Not otherwise (a bare end, as
        // llama-server's completions send, with a held-back byte before it that belongs to
        // the character it completed).
        if let Some(at) = finish_blank.filter(|_| visible == Some(arrived + 1)) {
            arrivals.push((at, 1));
            return Ok((arrivals, TimedBy::Event));
        }
        let bytes: Vec<u64> = events
            .iter()
            .map(|(_, text, other)| (text.len() + other.len()) as u64)
            .collect();
        let text_bytes: u64 = bytes.iter().sum();
        // A total the events cannot carry: fewer tokens than events, or more than bytes
        // (hidden output the server did not account for).
        let shareable = visible.filter(|&v| v > events.len() as u64 && v <= text_bytes);
        if let Some(counts) = tokenizer.and_then(|t| per_event(t, &events)) {
            let counted: u64 = counts.iter().map(|&(_, k)| k).sum();
            return Ok(match (visible, shareable) {
                (None, _) => (counts, TimedBy::Tokenizer),
                (Some(v), _) if v == counted => (counts, TimedBy::Tokenizer),
                // The billed total rules; the tokenizer's counts say how it was spread.
                // They disagree when text was re-tokenized differently from how it was
                // generated (replacement characters for held-back bytes, odd merges).
                (Some(_), Some(v)) => {
                    let weights: Vec<u64> = counts.iter().map(|&(_, k)| k).collect();
                    (spread(&events, v, &weights), TimedBy::Estimate)
                }
                (Some(_), None) => (one_each(), TimedBy::Event),
            });
        }
        match shareable {
            Some(v) => Ok((spread(&events, v, &bytes), TimedBy::Estimate)),
            None => Ok((one_each(), TimedBy::Event)),
        }
    }

    /// Per-chunk usage: each event's rise of the cumulative count (a text event that
    /// raised nothing, a detokenizer flush, still ends a gap and counts one). Rises before
    /// the first visible output are tokens held back until it: they arrive with it.
    fn usage_rises(&self) -> Result<Timed, ProbeError> {
        let mut tokens = Vec::with_capacity(self.observations.len());
        let mut cumulative = 0u64;
        let mut held_back = 0u64;
        for o in &self.observations {
            let rise = match o.completion_tokens {
                Some(c) if c > MAX_PLAUSIBLE_TOKENS => return Err(implausible(c)),
                Some(c) => {
                    let rise = c.saturating_sub(cumulative);
                    cumulative = cumulative.max(c);
                    rise
                }
                None => 0,
            };
            if tokens.is_empty() && !o.has_output {
                held_back += rise;
            } else if rise > 0 || o.has_output {
                tokens.push((o.at, rise.max(1) + std::mem::take(&mut held_back)));
            }
        }
        Ok(tokens)
    }

    /// Billed output minus what was billed but never streamed; `None` without usage.
    fn visible_total(&self) -> Result<Option<u64>, ProbeError> {
        let Some(billed) = self.billed() else {
            return Ok(None);
        };
        if billed > MAX_PLAUSIBLE_TOKENS {
            return Err(implausible(billed));
        }
        let hidden_reasoning = match self.reasoning_tokens {
            Some(r) if !self.response.reasoning_streamed => r,
            _ => 0,
        };
        let eos = u64::from(self.eos_event);
        Ok(Some(
            billed.saturating_sub(hidden_reasoning).saturating_sub(eos),
        ))
    }
}

/// Adjacent arrivals at the same instant (events decoded from one read) as one: they
/// arrived together, and timing them apart would invent gaps of zero.
pub(super) fn merge_arrivals(tokens: Timed) -> Timed {
    let mut merged: Timed = Vec::with_capacity(tokens.len());
    for (at, k) in tokens {
        match merged.last_mut() {
            Some((last, n)) if *last == at => *n += k,
            _ => merged.push((at, k)),
        }
    }
    merged
}

/// The tokenizer's count of each event's text, at least one per event; `None` if it fails.
fn per_event(tokenizer: &TokenCounter, events: &[(Instant, &str, &str)]) -> Option<Timed> {
    events
        .iter()
        .map(|&(at, text, other)| {
            let count = |s: &str| {
                if s.is_empty() {
                    Some(0)
                } else {
                    tokenizer.count(s)
                }
            };
            Some((at, (count(text)? + count(other)?).max(1)))
        })
        .collect()
}

/// `total` tokens over the events, in proportion to `weights`.
fn spread(events: &[(Instant, &str, &str)], total: u64, weights: &[u64]) -> Timed {
    let shares = share(total, weights);
    events
        .iter()
        .zip(shares)
        .map(|(&(at, ..), k)| (at, k))
        .collect()
}

/// `total` shared over events in proportion to `weights` (largest remainder), at least one
/// each, summing to `total`. Exact when each token is the same number of bytes. Needs
/// `total >= weights.len()`; a zero weight counts as one.
fn share(total: u64, weights: &[u64]) -> Vec<u64> {
    let weights: Vec<u64> = weights.iter().map(|&w| w.max(1)).collect();
    let sum = u128::from(weights.iter().sum::<u64>());
    let quota = |w: u64| u128::from(total) * u128::from(w);
    let mut shares: Vec<u64> = weights
        .iter()
        .map(|&w| ((quota(w) / sum) as u64).max(1))
        .collect();
    let given: u64 = shares.iter().sum();
    if given < total {
        let mut order: Vec<usize> = (0..weights.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(quota(weights[i]) % sum));
        for &i in order.iter().take((total - given) as usize) {
            shares[i] += 1;
        }
    } else {
        // Raising small events to one took tokens from nobody: take them back from the
        // largest shares.
        let mut excess = given - total;
        let mut order: Vec<usize> = (0..weights.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(shares[i]));
        for i in order {
            let take = excess.min(shares[i] - 1);
            shares[i] -= take;
            excess -= take;
        }
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn shares_sum_to_the_total_and_follow_the_weights() {
        assert_eq!(share(8, &[4, 4]), vec![4, 4]);
        assert_eq!(share(3, &[0, 0, 0]), vec![1, 1, 1]);
        let s = share(
            64,
            &[
                27, 26, 25, 27, 24, 26, 25, 26, 27, 26, 25, 26, 27, 26, 25, 26,
            ],
        );
        assert_eq!(s.iter().sum::<u64>(), 64);
        assert!(s.iter().all(|&k| (3..=5).contains(&k)), "{s:?}");
        assert_eq!(share(8, &[2, 1, 3, 2]), vec![2, 1, 3, 2]);
        assert_eq!(share(10, &[100, 1, 1]), vec![8, 1, 1]);
        assert_eq!(share(4, &[1000, 1, 1, 1]), vec![1, 1, 1, 1]);
    }
}
