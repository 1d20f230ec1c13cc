//! One probe's timeline and the one function that turns it into measurements.
//!
//! The probe stamps `Instant`s as bytes arrive and stores what each event carried; nothing
//! is computed while streaming. [`RequestRecord::measure`] then derives TTFT, ITL, TPOT,
//! E2EL and token counts exactly as DESIGN.md defines them, so the definitions live in one
//! place and can be tested on synthetic timelines without a network.
//!
//! Non-streamed responses (embeddings, DeepSpeed-MII) have no first token: they record
//! E2EL and token counts only, and never a made-up TTFT.
//!
//! Token attribution: a stream has *continuous usage* when its first output-carrying event
//! also carries a cumulative `usage` (vLLM `continuous_usage_stats`). Then each event's
//! token count is the rise of `usage.completion_tokens`, and a gap covering k tokens is
//! split into k ITL observations of gap/k. Otherwise each output-carrying event counts as
//! one token and one gap (vLLM bench's convention); a final usage-only chunk is never a
//! token. Every gap is attributed to some event, so the ITL sum is always last − first.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::ProbeError;
use crate::prompt::TokenCounter;

/// Usage counts above this are not a real response; bounding them also bounds the number
/// of ITL observations one probe can produce.
const MAX_PLAUSIBLE_TOKENS: u64 = 1 << 20;

/// What one parsed event contributes to the measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    /// Non-empty text, content, reasoning or tool-call delta.
    pub has_output: bool,
    /// Cumulative `usage.completion_tokens`, when the event carries usage.
    pub completion_tokens: Option<u64>,
    pub prompt_tokens: Option<u64>,
    /// A `finish_reason` was set: the generation ended normally.
    pub finished: bool,
}

#[derive(Clone, Copy, Debug)]
struct Observation {
    at: Instant,
    has_output: bool,
    completion_tokens: Option<u64>,
}

/// Output tokens and where the count came from: the server's usage, the configured
/// tokenizer on the output text, or (approximate) the number of token-carrying events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenCount {
    Usage(u64),
    Tokenizer(u64),
    Events(u64),
}

impl TokenCount {
    pub fn value(self) -> u64 {
        match self {
            Self::Usage(n) | Self::Tokenizer(n) | Self::Events(n) => n,
        }
    }

    /// Event counts undercount when a server packs several tokens per chunk.
    pub fn is_exact(self) -> bool {
        !matches!(self, Self::Events(_))
    }
}

/// What the response said beyond timing: its text and labels, for validation and logs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResponseInfo {
    /// The output text (bounded by the response size limit).
    pub text: String,
    pub model: Option<String>,
    pub finish_reason: Option<String>,
    /// The server's own account of the request, when it sends one (llama.cpp `timings`).
    pub server_timings: Option<ServerTimings>,
}

/// llama.cpp's per-request `timings`: what the server measured on its side.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Deserialize)]
pub struct ServerTimings {
    /// Prompt tokens served from the prompt cache, and those processed (cache excluded).
    #[serde(default)]
    pub cache_n: Option<u64>,
    #[serde(default)]
    pub prompt_n: Option<u64>,
    #[serde(default)]
    pub prompt_ms: Option<f64>,
    /// Tokens generated, and the mean time per generated token.
    #[serde(default)]
    pub predicted_n: Option<u64>,
    #[serde(default)]
    pub predicted_per_token_ms: Option<f64>,
}

/// What a non-streamed response body carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WholeBody {
    /// The body holds the expected output (text, or a vector of the right shape).
    pub has_output: bool,
    pub output_tokens: Option<u64>,
    pub prompt_tokens: Option<u64>,
}

/// Everything derived from one successful probe.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// `None` for non-streamed responses, where there is no first token to time.
    pub ttft: Option<Duration>,
    /// `None` when fewer than two output tokens were produced, or not streamed.
    pub tpot: Option<Duration>,
    /// `(gap, count)`: `count` ITL observations of `gap` each.
    pub itl: Vec<(Duration, u32)>,
    pub e2el: Duration,
    /// `None` when the response has no output tokens (embeddings).
    pub output_tokens: Option<TokenCount>,
    pub prompt_tokens: Option<u64>,
}

impl Measurement {
    pub fn itl_observations(&self) -> u64 {
        self.itl.iter().map(|&(_, n)| u64::from(n)).sum()
    }
}

#[derive(Debug)]
pub struct RequestRecord {
    /// t0: just before the request was handed to the HTTP client.
    pub start: Instant,
    /// Response head received.
    pub response_at: Option<Instant>,
    /// End of the response: the `[DONE]` event, or the end of the body.
    pub end: Option<Instant>,
    /// `[DONE]` was received.
    pub done: bool,
    /// A `finish_reason` was received.
    pub finished: bool,
    pub events: u64,
    pub bytes: u64,
    pub response: ResponseInfo,
    /// Set for non-streamed responses.
    pub whole: Option<WholeBody>,
    first_token_at: Option<Instant>,
    observations: Vec<Observation>,
    prompt_tokens: Option<u64>,
    /// Highest `usage.completion_tokens` seen so far.
    usage_so_far: u64,
}

impl RequestRecord {
    pub fn new(start: Instant) -> Self {
        Self {
            start,
            response_at: None,
            end: None,
            done: false,
            finished: false,
            events: 0,
            bytes: 0,
            response: ResponseInfo::default(),
            whole: None,
            first_token_at: None,
            observations: Vec::new(),
            prompt_tokens: None,
            usage_so_far: 0,
        }
    }

    /// Record an event that arrived at `at`.
    pub fn on_chunk(&mut self, at: Instant, chunk: Chunk) {
        self.finished |= chunk.finished;
        if chunk.prompt_tokens.is_some() {
            self.prompt_tokens = chunk.prompt_tokens;
        }
        let rose = chunk
            .completion_tokens
            .is_some_and(|c| c > self.usage_so_far);
        self.usage_so_far = self.usage_so_far.max(chunk.completion_tokens.unwrap_or(0));
        if chunk.has_output || chunk.completion_tokens.is_some() {
            self.observations.push(Observation {
                at,
                has_output: chunk.has_output,
                completion_tokens: chunk.completion_tokens,
            });
        }
        if self.first_token_at.is_none() && (chunk.has_output || rose) {
            self.first_token_at = Some(at);
        }
    }

    /// Whether a token arrived yet: selects the TTFT deadline before it, the stall deadline
    /// after it. The measured TTFT itself comes from [`Self::measure`].
    pub fn has_token(&self) -> bool {
        self.first_token_at.is_some()
    }

    /// Derive the measurement, or the failure the timeline shows (DESIGN.md success rule,
    /// the parts that depend on the whole stream). `tokenizer` counts output tokens when
    /// the server reported none.
    pub fn measure(&self, tokenizer: Option<&TokenCounter>) -> Result<Measurement, ProbeError> {
        let end = self.end.ok_or_else(|| {
            ProbeError::StreamInterrupted("the response did not reach its end".into())
        })?;
        if let Some(whole) = self.whole {
            return self.measure_whole(whole, end, tokenizer);
        }
        let continuous = self
            .observations
            .iter()
            .find(|o| o.has_output)
            .is_some_and(|o| o.completion_tokens.is_some());

        // (arrival, tokens this event carried) for every token-carrying event.
        let mut tokens: Vec<(Instant, u64)> = Vec::with_capacity(self.observations.len());
        let mut cumulative = 0u64;
        for o in &self.observations {
            let rise = match o.completion_tokens {
                Some(c) if continuous => {
                    if c > MAX_PLAUSIBLE_TOKENS {
                        return Err(implausible(c));
                    }
                    let rise = c.saturating_sub(cumulative);
                    cumulative = cumulative.max(c);
                    rise
                }
                _ => 0,
            };
            if rise > 0 || o.has_output {
                tokens.push((o.at, rise.max(1)));
            }
        }
        let (Some(&(first, _)), Some(&(last, _))) = (tokens.first(), tokens.last()) else {
            return Err(ProbeError::EmptyResponse);
        };
        if !(self.done || self.finished) {
            return Err(ProbeError::StreamInterrupted(
                "the stream ended without [DONE] or a finish_reason".into(),
            ));
        }

        let usage = self
            .observations
            .iter()
            .rev()
            .find_map(|o| o.completion_tokens);
        let output_tokens = match usage {
            Some(c) if c > MAX_PLAUSIBLE_TOKENS => return Err(implausible(c)),
            Some(c) => TokenCount::Usage(c),
            None => self
                .count_text(tokenizer)
                .unwrap_or(TokenCount::Events(tokens.len() as u64)),
        };
        let n = output_tokens.value();
        let itl = tokens
            .windows(2)
            .map(|pair| {
                let (prev, (at, k)) = (pair[0].0, pair[1]);
                let k = u32::try_from(k).unwrap_or(u32::MAX);
                ((at - prev) / k, k)
            })
            .collect();
        let tpot = (n > 1).then(|| (last - first).div_f64((n - 1) as f64));
        Ok(Measurement {
            ttft: Some(first - self.start),
            tpot,
            itl,
            e2el: end - self.start,
            output_tokens: Some(output_tokens),
            prompt_tokens: self.prompt_tokens,
        })
    }

    fn count_text(&self, tokenizer: Option<&TokenCounter>) -> Option<TokenCount> {
        let count = tokenizer?.count(&self.response.text)?;
        Some(TokenCount::Tokenizer(count))
    }

    fn measure_whole(
        &self,
        whole: WholeBody,
        end: Instant,
        tokenizer: Option<&TokenCounter>,
    ) -> Result<Measurement, ProbeError> {
        if !whole.has_output {
            return Err(ProbeError::EmptyResponse);
        }
        let output_tokens = match whole.output_tokens {
            Some(c) if c > MAX_PLAUSIBLE_TOKENS => return Err(implausible(c)),
            Some(c) => Some(TokenCount::Usage(c)),
            None if self.response.text.is_empty() => None,
            None => self.count_text(tokenizer),
        };
        Ok(Measurement {
            ttft: None,
            tpot: None,
            itl: Vec::new(),
            e2el: end - self.start,
            output_tokens,
            prompt_tokens: whole.prompt_tokens.or(self.prompt_tokens),
        })
    }
}

fn implausible(tokens: u64) -> ProbeError {
    ProbeError::InvalidResponse(format!("implausible usage.completion_tokens {tokens}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCategory;

    const MS: Duration = Duration::from_millis(1);

    fn output() -> Chunk {
        Chunk {
            has_output: true,
            ..Chunk::default()
        }
    }

    fn with_usage(has_output: bool, completion: u64) -> Chunk {
        Chunk {
            has_output,
            completion_tokens: Some(completion),
            ..Chunk::default()
        }
    }

    /// A record whose events arrive at the given millisecond offsets from t0.
    fn timeline(events: &[(u64, Chunk)], end_ms: u64, done: bool) -> RequestRecord {
        let t0 = Instant::now();
        let mut r = RequestRecord::new(t0);
        for &(ms, chunk) in events {
            r.on_chunk(t0 + MS * ms as u32, chunk);
        }
        r.end = Some(t0 + MS * end_ms as u32);
        r.done = done;
        r
    }

    #[test]
    fn role_only_chunk_is_not_the_first_token() {
        let role = Chunk::default(); // {"delta":{"role":"assistant","content":""}}
        let r = timeline(&[(5, role), (100, output()), (110, output())], 120, true);
        assert!(r.has_token());
        let m = r.measure(None).unwrap();
        assert_eq!(m.ttft, Some(MS * 100));
        assert_eq!(m.e2el, MS * 120);
    }

    #[test]
    fn one_gap_per_chunk_without_continuous_usage() {
        let final_usage = with_usage(false, 6);
        let events = [
            (10, output()),
            (30, output()),
            (60, output()),
            (61, final_usage),
        ];
        let m = timeline(&events, 62, true).measure(None).unwrap();
        assert_eq!(m.itl, vec![(MS * 20, 1), (MS * 30, 1)]);
        assert_eq!(
            m.output_tokens,
            Some(TokenCount::Usage(6)),
            "final usage wins over events"
        );
        assert_eq!(m.tpot, Some(MS * 50 / 5));
    }

    #[test]
    fn continuous_usage_splits_a_k_token_gap_into_k_observations() {
        let events = [
            (1, with_usage(false, 0)), // role chunk with usage
            (10, with_usage(true, 3)),
            (40, with_usage(true, 6)),
            (70, with_usage(true, 9)),
            (71, with_usage(false, 9)), // final usage-only chunk: not a token
        ];
        let m = timeline(&events, 72, true).measure(None).unwrap();
        assert_eq!(m.ttft, Some(MS * 10));
        assert_eq!(m.itl, vec![(MS * 10, 3), (MS * 10, 3)]);
        assert_eq!(m.itl_observations(), 6);
        assert_eq!(m.output_tokens, Some(TokenCount::Usage(9)));
        assert_eq!(m.tpot, Some(MS * 60 / 8));
    }

    #[test]
    fn itl_time_is_conserved_when_a_text_chunk_carries_no_new_token() {
        let events = [
            (10, with_usage(true, 1)),
            (20, with_usage(true, 1)), // detokenizer flush: text, no new token
            (40, with_usage(true, 2)),
        ];
        let m = timeline(&events, 41, true).measure(None).unwrap();
        let total: Duration = m.itl.iter().map(|&(gap, n)| gap * n).sum();
        assert_eq!(total, MS * 30);
    }

    #[test]
    fn event_count_is_the_fallback_token_count() {
        let m = timeline(&[(10, output()), (20, output())], 21, true)
            .measure(None)
            .unwrap();
        assert_eq!(m.output_tokens, Some(TokenCount::Events(2)));
        assert_eq!(m.tpot, Some(MS * 10));
    }

    #[test]
    fn single_token_has_no_tpot_and_no_itl() {
        let m = timeline(&[(10, output())], 11, true).measure(None).unwrap();
        assert_eq!(m.tpot, None);
        assert!(m.itl.is_empty());
    }

    #[test]
    fn no_token_is_empty_response_even_with_done() {
        let err = timeline(&[(1, Chunk::default())], 2, true)
            .measure(None)
            .unwrap_err();
        assert_eq!(err.category(), ErrorCategory::EmptyResponse);
    }

    #[test]
    fn finish_reason_without_done_is_a_proper_end() {
        let finish = Chunk {
            finished: true,
            ..output()
        };
        assert!(
            timeline(&[(1, output()), (2, finish)], 3, false)
                .measure(None)
                .is_ok()
        );
    }

    #[test]
    fn tokens_without_any_end_marker_are_interrupted() {
        let err = timeline(&[(1, output()), (2, output())], 3, false)
            .measure(None)
            .unwrap_err();
        assert_eq!(err.category(), ErrorCategory::StreamInterrupted);
    }

    #[test]
    fn whole_bodies_have_no_ttft_and_count_tokens() {
        let t0 = Instant::now();
        let mut r = RequestRecord::new(t0);
        r.end = Some(t0 + MS * 40);
        r.whole = Some(WholeBody {
            has_output: true,
            output_tokens: Some(12),
            prompt_tokens: Some(5),
        });
        let m = r.measure(None).unwrap();
        assert_eq!((m.ttft, m.tpot, m.e2el), (None, None, MS * 40));
        assert!(m.itl.is_empty());
        assert_eq!(m.output_tokens, Some(TokenCount::Usage(12)));
        assert_eq!(m.prompt_tokens, Some(5));

        r.whole = Some(WholeBody {
            has_output: true,
            ..WholeBody::default()
        });
        assert_eq!(
            r.measure(None).unwrap().output_tokens,
            None,
            "embeddings: no output tokens"
        );
        r.whole = Some(WholeBody::default());
        let err = r.measure(None).unwrap_err();
        assert_eq!(err.category(), ErrorCategory::EmptyResponse);
    }

    #[test]
    fn implausible_usage_is_invalid_not_a_billion_observations() {
        let err = timeline(&[(1, with_usage(true, u64::MAX))], 2, true)
            .measure(None)
            .unwrap_err();
        assert_eq!(err.category(), ErrorCategory::InvalidResponse);
    }
}
