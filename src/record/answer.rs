//! What a reasoning model's answer adds to a measurement: its reasoning tokens, however
//! the server says or streams them, the time to the answer's first visible token, and the
//! answer that never came because reasoning took the whole budget. Also the prompt-cache
//! writes a caching API reports. The counts are bounded by what the answer billed.

use std::time::Duration;

use super::{MAX_PLAUSIBLE_TOKENS, Measurement, RequestRecord, TokenCount};
use crate::error::ProbeError;
use crate::prompt::TokenCounter;

/// What a reasoning model's or a caching API's answer adds to the measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AnswerParts {
    /// Output tokens that were reasoning: usage's breakdown, else the configured tokenizer
    /// on the streamed reasoning, else (approximate) the events that carried only
    /// reasoning. `None` when the answer had no reasoning that was said or seen.
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens the server wrote to its prompt cache (Anthropic's
    /// `cache_creation_input_tokens`), when it says.
    pub cache_write_tokens: Option<u64>,
    /// Time to the first event carrying the answer's text, after any reasoning: what a
    /// reasoning model's user waits for. `None` when no answer text was streamed.
    pub ttft: Option<Duration>,
    /// Reasoning came before the answer: streamed, or billed as reasoning.
    pub reasoned: bool,
}

impl RequestRecord {
    /// The generation stopped at its token limit (chat's `length`, Anthropic's
    /// `max_tokens`, Responses' `max_output_tokens`).
    pub(super) fn at_limit(&self) -> bool {
        matches!(
            self.response.finish_reason.as_deref(),
            Some("length" | "max_tokens" | "max_output_tokens")
        )
    }

    /// Reasoning, cache writes and the answer's first token ([`AnswerParts`]).
    pub(super) fn answer_parts(&self, tokenizer: Option<&TokenCounter>) -> AnswerParts {
        let response = &self.response;
        // Chat's reasoning field, Anthropic's thinking blocks, or (Responses) the output
        // beside the answer when it is only reasoning (no calls, no refusal).
        let thinking: String;
        let reasoning_text = if let Some((_, text)) = &response.reasoning {
            Some(text.as_str())
        } else if !response.thinking.is_empty() {
            thinking = response.thinking.iter().map(|t| t.text.as_str()).collect();
            Some(thinking.as_str())
        } else if response.reasoning_streamed
            && response.tool_calls.is_empty()
            && response.refusal.is_empty()
        {
            Some(response.other_text.as_str())
        } else {
            None
        };
        let streamed = reasoning_text.is_some_and(|text| !text.is_empty());
        // Output beside the answer is reasoning alone when there are no calls or refusal.
        let only_reasoning = response.tool_calls.is_empty() && response.refusal.is_empty();
        let reasoning_tokens = self
            .reasoning_tokens
            .or_else(|| {
                let text = reasoning_text.filter(|text| !text.is_empty())?;
                tokenizer.and_then(|t| t.count(text)).or_else(|| {
                    // The events whose output went beside the answer, not into it.
                    only_reasoning.then(|| self.reasoning_events())
                })
            })
            // OpenAI and Responses say 0 for every model: no reasoning, no series.
            .filter(|&n| n > 0 || streamed)
            // Never more than the answer billed, nor an implausible count.
            .map(|n| {
                n.min(self.billed().unwrap_or(MAX_PLAUSIBLE_TOKENS))
                    .min(MAX_PLAUSIBLE_TOKENS)
            });
        // The answer's first visible character: a blank separator (R1's "\n\n" after
        // `</think>`) is not it.
        let mut previous = 0;
        let ttft = self
            .observations
            .iter()
            .find(|o| {
                let piece = response.text.get(previous..o.text_end).unwrap_or("");
                previous = previous.max(o.text_end);
                o.has_output && piece.chars().any(|c| !c.is_whitespace())
            })
            .map(|o| o.at - self.start);
        let cache_write_tokens = response.cache_written.map(|n| n.min(MAX_PLAUSIBLE_TOKENS));
        AnswerParts {
            reasoning_tokens,
            cache_write_tokens,
            ttft,
            reasoned: streamed || reasoning_tokens.is_some_and(|n| n > 0),
        }
    }

    /// Events whose output went beside the answer, not into it (approximate reasoning
    /// tokens when nothing else counts them).
    fn reasoning_events(&self) -> u64 {
        let mut previous = (0, 0);
        let mut events = 0;
        for o in self.observations.iter().filter(|o| o.has_output) {
            if o.text_end == previous.0 && o.other_end > previous.1 {
                events += 1;
            }
            previous = (o.text_end, o.other_end);
        }
        events
    }

    /// A reasoning model that hit its token limit with nothing to show but reasoning: no
    /// answer text, no tool call, no refusal ([`ProbeError::ReasoningExhausted`]).
    pub fn reasoning_exhausted(&self, measured: &Measurement) -> Option<ProbeError> {
        let response = &self.response;
        let limit = self.at_limit();
        let nothing = response.text.trim().is_empty()
            && response.tool_calls.is_empty()
            && response.refusal.is_empty();
        (limit && nothing && measured.answer.reasoned).then(|| {
            let tokens = measured.output_tokens.map(TokenCount::value);
            let reasoning = measured.answer.reasoning_tokens;
            ProbeError::ReasoningExhausted(match (tokens, reasoning) {
                (Some(all), Some(reasoning)) => {
                    format!("{reasoning} of {all} tokens reasoning, finish_reason length")
                }
                _ => "finish_reason length with reasoning and no answer".into(),
            })
        })
    }
}
