//! The OpenAI streaming wire format shared by `/v1/completions` and `/v1/chat/completions`:
//! request fields common to both, and the parser for `data:` chunks.
//!
//! Parsing is lenient about what servers add (vLLM's `token_ids`, llama.cpp's `timings`)
//! and strict about what the measurement relies on: a chunk must be a JSON object; usage
//! counts must be non-negative integers; an `error` object anywhere in a 2xx stream fails
//! the probe. Strings are borrowed from the event where possible: this is the per-event path.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

use super::{StreamEvent, StreamParser};
use crate::config::Target;
use crate::error::ProbeError;
use crate::prompt::Prompt;
use crate::record::{Chunk, ResponseInfo, ServerTimings};
use crate::sse::SseEvent;

/// Fields both OpenAI text endpoints take. The caller adds the prompt or messages, then
/// calls [`super::finish_body`].
pub(super) fn common_body(target: &Target, prompt: &Prompt) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(prompt.model.as_str()));
    body.insert("max_tokens".into(), Value::from(prompt.max_tokens));
    body.insert("stream".into(), Value::Bool(true));
    if target.include_usage {
        let mut options = Map::new();
        options.insert("include_usage".into(), Value::Bool(true));
        if target.continuous_usage_stats {
            options.insert("continuous_usage_stats".into(), Value::Bool(true));
        }
        body.insert("stream_options".into(), Value::Object(options));
    }
    if target.ignore_eos {
        // A vLLM/SGLang/llama.cpp extension; only sent when wanted, since strict APIs
        // reject unknown fields.
        body.insert("ignore_eos".into(), Value::Bool(true));
    }
    body
}

#[derive(Deserialize)]
struct WireChunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<WireChoice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, borrow)]
    object: Option<Cow<'a, str>>,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    timings: Option<ServerTimings>,
}

#[derive(Deserialize)]
struct WireChoice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<WireDelta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireDelta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Vec<IgnoredAny>>,
    #[serde(default)]
    function_call: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

fn non_empty(s: &Option<Cow<'_, str>>) -> bool {
    s.as_deref().is_some_and(|s| !s.is_empty())
}

impl WireChoice<'_> {
    /// Visible text of this choice (completions `text`, chat `content`).
    fn text(&self) -> Option<&str> {
        self.text
            .as_deref()
            .or_else(|| self.delta.as_ref().and_then(|d| d.content.as_deref()))
    }

    fn has_output(&self) -> bool {
        non_empty(&self.text)
            || self.delta.as_ref().is_some_and(|d| {
                non_empty(&d.content)
                    || non_empty(&d.reasoning_content)
                    || non_empty(&d.reasoning)
                    || d.tool_calls.as_ref().is_some_and(|calls| !calls.is_empty())
                    || d.function_call.is_some()
            })
    }
}

/// The parser for both OpenAI streaming endpoints (they differ only in the choice shape,
/// and reading both shapes costs nothing).
#[derive(Debug, Default)]
pub(super) struct OpenAiStreamParser;

impl StreamParser for OpenAiStreamParser {
    fn on_event(
        &mut self,
        event: &SseEvent,
        info: &mut ResponseInfo,
    ) -> Result<StreamEvent, ProbeError> {
        if let Some(error) = super::error_event(event) {
            return Err(error);
        }
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(StreamEvent::Done(Chunk::default()));
        }
        if !data.starts_with('{') {
            return Err(ProbeError::InvalidResponse(format!(
                "event data is not a JSON object: {}",
                snippet(data)
            )));
        }
        let chunk: WireChunk<'_> = serde_json::from_str(data)
            .map_err(|e| ProbeError::InvalidResponse(format!("bad chunk JSON: {e}")))?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(ProbeError::StreamErrorEvent(error_message(&error)));
        }
        if chunk.object.as_deref() == Some("error") {
            // Older vLLM sends the error object itself rather than {"error": {...}}.
            let message = chunk.message.map(|m| error_message(&m)).unwrap_or_default();
            return Err(ProbeError::StreamErrorEvent(message));
        }
        if let Some(model) = chunk.model {
            if info.model.as_deref() != Some(&*model) {
                info.model = Some(model.into_owned());
            }
        }
        if chunk.timings.is_some() {
            info.server_timings = chunk.timings;
        }
        for choice in &chunk.choices {
            info.text.push_str(choice.text().unwrap_or(""));
            if let Some(reason) = choice.finish_reason.as_deref().filter(|r| !r.is_empty()) {
                info.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(StreamEvent::Chunk(Chunk {
            has_output: chunk.choices.iter().any(WireChoice::has_output),
            completion_tokens: chunk.usage.as_ref().and_then(|u| u.completion_tokens),
            prompt_tokens: chunk.usage.as_ref().and_then(|u| u.prompt_tokens),
            finished: chunk.choices.iter().any(|c| non_empty(&c.finish_reason)),
        }))
    }
}

/// The human-readable part of an error payload, bounded for logs.
pub(crate) fn error_message(error: &Value) -> String {
    let text = match error {
        Value::String(s) => s.clone(),
        Value::Object(map) => match map.get("message") {
            Some(Value::String(s)) => s.clone(),
            _ => error.to_string(),
        },
        other => other.to_string(),
    };
    snippet(&text)
}

/// At most 200 characters, for log lines.
pub(crate) fn snippet(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
