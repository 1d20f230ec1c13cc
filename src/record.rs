//! One probe's timeline and the one function that turns it into measurements.
//!
//! The probe stamps `Instant`s as bytes arrive and stores what each event carried; nothing
//! is computed while streaming. [`RequestRecord::measure`] then derives TTFT, ITL, TPOT,
//! E2EL and token counts exactly as docs/measurement.md defines them, so the definitions live in one
//! place and can be tested on synthetic timelines without a network.
//!
//! Non-streamed responses (embeddings, DeepSpeed-MII) have no first token: they record
//! E2EL and token counts only, and never a made-up TTFT.
//!
//! Timing is per token, not per event: a speculative-decoding server or one with a stream
//! interval packs several tokens into one event, and each event's gap is shared over the
//! tokens it carried ([`tokens`] says how many, and from what). So the ITL observations
//! are one per token after the first event, their sum is last − first, and TPOT (that span
//! over those tokens) is their mean. Tokens billed but never streamed (hidden reasoning, an
//! EOS) are in the output token count and nowhere in the timing.
//!
//! A stream is judged in this order: it must have ended with its end marker (else it was
//! cut, token or not: `stream_interrupted`), then carried a token (else `empty_response`).

use std::time::Duration;

use tokio::time::Instant;

use crate::error::ProbeError;
use crate::prompt::TokenCounter;

mod answer;
mod response;
mod tokens;

pub use answer::AnswerParts;
pub use response::{Logprobs, ResponseInfo, ServerTimings, Thinking, ToolCall, WholeBody};
pub use tokens::TimedBy;

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
    /// Of the prompt, the tokens the server served from its prefix cache, when usage says
    /// (`prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`,
    /// Responses' `input_tokens_details.cached_tokens`).
    pub cached_prompt_tokens: Option<u64>,
    /// A `finish_reason` was set: the generation ended normally.
    pub finished: bool,
    /// The part of `completion_tokens` that was reasoning, when usage breaks it out
    /// (`completion_tokens_details.reasoning_tokens`, Responses' `output_tokens_details`).
    pub reasoning_tokens: Option<u64>,
    /// The answer's choice was there with empty text. vLLM sends one for every token whose
    /// text its detokenizer holds back (a byte of a character that spans tokens: CJK, emoji,
    /// a random model's output), so after the first output it may be a token's arrival
    /// ([`tokens`] decides).
    pub empty_delta: bool,
}

/// An event that carried output or usage, and where its generated text ends in
/// `response.text` and `response.other_text` (it starts where the previous one's ended).
#[derive(Clone, Copy, Debug)]
struct Observation {
    at: Instant,
    has_output: bool,
    /// An empty delta (not a header) that did not end the generation with EOS: a token
    /// whose text the server held back.
    blank: bool,
    /// It carried the finish reason: blank, it may be the last token's arrival (vLLM sends
    /// one event per token, the last one's text held back) or a bare end (llama-server's
    /// completions, a chat `"content": ""` beside `finish_reason`). The counts decide.
    finish: bool,
    completion_tokens: Option<u64>,
    text_end: usize,
    other_end: usize,
}

/// What one request's connection cost it, as the HTTP client measured: the setup of a
/// connection it waited for (`None` phases: not measured, or no such phase) and the wait
/// for its response headers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionTimes {
    pub resolve: Option<Duration>,
    pub connect: Option<Duration>,
    pub tls: Option<Duration>,
    pub processing: Duration,
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

/// Everything derived from one successful probe.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// `None` for non-streamed responses, where there is no first token to time.
    pub ttft: Option<Duration>,
    /// `None` when fewer than two output tokens were produced, or not streamed.
    pub tpot: Option<Duration>,
    /// `(gap, count)`: `count` ITL observations of `gap` each.
    pub itl: Vec<(Duration, u32)>,
    /// Where the tokens per event that ITL and TPOT are timed by came from.
    pub timed_by: TimedBy,
    /// Every token-carrying event arrived in one read, several of them: something between
    /// the server and the probe buffered the stream (a proxy, a compressing hop), and the
    /// user saw nothing until the end. TTFT is then the whole answer's time; TPOT and ITL
    /// are not observed.
    pub buffered: bool,
    pub e2el: Duration,
    /// `None` when the response has no output tokens (embeddings).
    pub output_tokens: Option<TokenCount>,
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens served from the server's prefix cache, when the server says (usage, or
    /// llama.cpp's `timings.cache_n`); `None` when it says nothing, never a made-up 0.
    pub cached_prompt_tokens: Option<u64>,
    /// Reasoning, cache writes and the visible answer's first token.
    pub answer: AnswerParts,
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
    /// Events other than keep-alives: what the stall deadline counts as progress.
    pub progress: u64,
    /// The body ended inside an event: the stream was cut, whatever came before.
    pub cut_mid_event: bool,
    pub bytes: u64,
    pub response: ResponseInfo,
    /// Set for non-streamed responses.
    pub whole: Option<WholeBody>,
    /// The trace this probe started (its `traceparent`), unless the target opted out.
    pub trace: Option<crate::trace_context::TraceIds>,
    /// Its connection's setup (if it waited for a new one) and the wait for its headers.
    pub connection: Option<ConnectionTimes>,
    first_token_at: Option<Instant>,
    /// The first output was a tool call's delta, with no text, reasoning or refusal before
    /// it: the TTFT is the time to the call (a server's tool parser holds the stream back
    /// until it has the function's name).
    first_is_call: bool,
    observations: Vec<Observation>,
    prompt_tokens: Option<u64>,
    cached_prompt_tokens: Option<u64>,
    /// Highest `usage.completion_tokens` seen so far.
    usage_so_far: u64,
    reasoning_tokens: Option<u64>,
    /// The generation ended on an event with no text and an end-of-sequence reason: the
    /// EOS token, counted in usage by vLLM, llama.cpp and TGI, but never streamed as text.
    eos_event: bool,
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
            progress: 0,
            cut_mid_event: false,
            bytes: 0,
            response: ResponseInfo::default(),
            whole: None,
            trace: None,
            connection: None,
            first_token_at: None,
            first_is_call: false,
            observations: Vec::new(),
            prompt_tokens: None,
            cached_prompt_tokens: None,
            usage_so_far: 0,
            reasoning_tokens: None,
            eos_event: false,
        }
    }

    /// Record an event that arrived at `at`.
    pub fn on_chunk(&mut self, at: Instant, chunk: Chunk) {
        self.finished |= chunk.finished;
        if chunk.prompt_tokens.is_some() {
            self.prompt_tokens = chunk.prompt_tokens;
        }
        if chunk.cached_prompt_tokens.is_some() {
            self.cached_prompt_tokens = chunk.cached_prompt_tokens;
        }
        if chunk.reasoning_tokens.is_some() {
            self.reasoning_tokens = chunk.reasoning_tokens;
        }
        let mut eos = false;
        if chunk.finished && !chunk.has_output {
            let reason = self.response.finish_reason.as_deref();
            eos = matches!(reason, Some("stop" | "eos_token"));
            self.eos_event = eos;
        }
        let blank = chunk.empty_delta && !chunk.has_output && !eos;
        self.usage_so_far = self.usage_so_far.max(chunk.completion_tokens.unwrap_or(0));
        if chunk.has_output || chunk.completion_tokens.is_some() || blank {
            self.observations.push(Observation {
                at,
                has_output: chunk.has_output,
                blank,
                finish: chunk.finished,
                completion_tokens: chunk.completion_tokens,
                text_end: self.response.text.len(),
                other_end: self.response.other_text.len(),
            });
        }
        // The first token is the first the user sees: never an event without visible output
        // (a held-back byte, a usage rise), whose tokens arrive with the next visible one.
        if self.first_token_at.is_none() && chunk.has_output {
            self.first_token_at = Some(at);
            let r = &self.response;
            self.first_is_call = !r.tool_calls.is_empty()
                && r.text.is_empty()
                && r.refusal.is_empty()
                && r.reasoning.as_ref().is_none_or(|(_, text)| text.is_empty())
                && r.thinking.is_empty();
        }
    }

    /// Whether a token arrived yet: selects the TTFT deadline before it, the stall deadline
    /// after it. The measured TTFT itself comes from [`Self::measure`].
    pub fn has_token(&self) -> bool {
        self.first_token_at.is_some()
    }

    /// Whether the first output was a tool call (see `first_is_call`).
    pub fn first_is_call(&self) -> bool {
        self.first_is_call
    }

    /// Derive the measurement, or the failure the timeline shows (docs/measurement.md success rule,
    /// the parts that depend on the whole stream). `tokenizer` counts output tokens when
    /// the server reported none.
    pub fn measure(&self, tokenizer: Option<&TokenCounter>) -> Result<Measurement, ProbeError> {
        let end = self.end.ok_or_else(|| {
            ProbeError::StreamInterrupted("the response did not reach its end".into())
        })?;
        if let Some(whole) = self.whole {
            return self.measure_whole(whole, end, tokenizer);
        }
        // A stream without its end marker was cut, whether or not a token had arrived:
        // "empty" is for a stream that ended properly with nothing in it.
        if self.cut_mid_event {
            return Err(ProbeError::StreamInterrupted(
                "the body ended inside an event".into(),
            ));
        }
        if !(self.done || self.finished) {
            let when = if self.has_token() {
                "after its first token"
            } else {
                "before its first token"
            };
            return Err(ProbeError::StreamInterrupted(format!(
                "the stream ended without [DONE] or a finish_reason, {when}"
            )));
        }
        let (tokens, timed_by) = self.timed_tokens(tokenizer)?;
        let events = tokens.len();
        // Events read together arrived together: one arrival, not gaps of zero.
        let tokens = tokens::merge_arrivals(tokens);
        let (Some(&(first, _)), Some(&(last, _))) = (tokens.first(), tokens.last()) else {
            // Reasoning billed but never streamed (o-series, gpt-5, redacted thinking) that
            // ran into the limit: nothing was answered because it all went on thinking.
            let hidden =
                self.reasoning_tokens.is_some_and(|n| n > 0) || !self.response.thinking.is_empty();
            if hidden && self.at_limit() {
                return Err(ProbeError::ReasoningExhausted(
                    "reasoning billed, nothing streamed".into(),
                ));
            }
            return Err(ProbeError::EmptyResponse);
        };
        let buffered = tokens.len() == 1 && events > 1;

        let output_tokens = match self.billed() {
            Some(c) if c > MAX_PLAUSIBLE_TOKENS => return Err(implausible(c)),
            Some(c) => TokenCount::Usage(c),
            None => self
                .count_text(tokenizer)
                .unwrap_or(TokenCount::Events(tokens.len() as u64)),
        };
        // One observation per token after the first event: an event's gap is shared over
        // the tokens it carried.
        let itl = tokens
            .windows(2)
            .map(|pair| {
                let (prev, (at, k)) = (pair[0].0, pair[1]);
                let k = u32::try_from(k).unwrap_or(u32::MAX);
                ((at - prev) / k, k)
            })
            .collect();
        // The first event's tokens arrived at once, with no gap to time them by.
        let after_first: u64 = tokens.iter().skip(1).map(|&(_, k)| k).sum();
        let tpot = (after_first > 0).then(|| (last - first).div_f64(after_first as f64));
        Ok(Measurement {
            ttft: Some(first - self.start),
            tpot,
            itl,
            timed_by,
            buffered,
            e2el: end - self.start,
            output_tokens: Some(output_tokens),
            prompt_tokens: self.prompt_tokens,
            cached_prompt_tokens: self.cached_prompt_tokens(),
            answer: self.answer_parts(tokenizer),
        })
    }

    /// What the server billed, and the part of it that was reasoning (when usage breaks it
    /// out): where a structured answer's budget went.
    pub fn spent(&self) -> (Option<u64>, Option<u64>) {
        (self.billed(), self.reasoning_tokens)
    }

    /// The last `usage.completion_tokens` the stream carried: what the server billed.
    fn billed(&self) -> Option<u64> {
        self.observations
            .iter()
            .rev()
            .find_map(|o| o.completion_tokens)
    }

    /// Every generated text counts: the answer, and reasoning and tool calls (timed like it).
    fn count_text(&self, tokenizer: Option<&TokenCounter>) -> Option<TokenCount> {
        let tokenizer = tokenizer?;
        let response = &self.response;
        let mut count = tokenizer.count(&response.text)?;
        if !response.other_text.is_empty() {
            count += tokenizer.count(&response.other_text)?;
        }
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
            timed_by: TimedBy::Event,
            buffered: false,
            e2el: end - self.start,
            output_tokens,
            prompt_tokens: whole.prompt_tokens.or(self.prompt_tokens),
            cached_prompt_tokens: whole
                .cached_prompt_tokens
                .or_else(|| self.cached_prompt_tokens()),
            answer: AnswerParts {
                cache_write_tokens: self.response.cache_written,
                ..AnswerParts::default()
            },
        })
    }

    /// What usage said was cached, else llama.cpp's own account (`timings.cache_n`); never
    /// more than the prompt (a server's slip must not count more cached tokens than it read).
    fn cached_prompt_tokens(&self) -> Option<u64> {
        let cached = self.cached_prompt_tokens.or_else(|| {
            self.response
                .server_timings
                .and_then(|timings| timings.cache_n)
        })?;
        Some(
            self.prompt_tokens
                .map_or(cached, |prompt| cached.min(prompt)),
        )
    }
}

fn implausible(tokens: u64) -> ProbeError {
    ProbeError::InvalidResponse(format!("implausible usage.completion_tokens {tokens}"))
}

#[cfg(test)]
mod tests;
