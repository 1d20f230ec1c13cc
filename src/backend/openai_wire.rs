//! The OpenAI streaming wire format shared by `/v1/completions` and `/v1/chat/completions`:
//! request fields common to both, and the parser for `data:` chunks.
//!
//! Parsing is lenient about what servers add (vLLM's `token_ids`, llama.cpp's `timings`)
//! and strict about what the measurement relies on: a chunk must be a JSON object; usage
//! counts must be non-negative integers; an `error` object anywhere in a 2xx stream fails
//! the probe. Strings are borrowed from the event where possible: this is the per-event path.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{Payload, StreamEvent, StreamParser};
use crate::endpoint::Target;
use crate::error::{ProbeError, snippet};
use crate::prompt::{Greedy, Prompt};
use crate::record::{Chunk, ResponseInfo, ServerTimings};
use crate::sse::SseEvent;
use crate::structure::{self as structured, Structure};

mod values;

use values::{Arguments, Content};

/// Fields both OpenAI text endpoints take. The caller adds the prompt or messages, then
/// calls [`super::finish_body`].
pub(super) fn common_body(target: &Target, prompt: &Prompt) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(prompt.model.as_str()));
    let limit = target.options.max_tokens_field;
    body.insert(limit.into(), Value::from(prompt.max_tokens));
    body.insert("stream".into(), Value::Bool(true));
    if target.include_usage {
        let mut options = Map::new();
        options.insert("include_usage".into(), Value::Bool(true));
        if target.continuous_usage_stats {
            options.insert("continuous_usage_stats".into(), Value::Bool(true));
        }
        body.insert("stream_options".into(), Value::Object(options));
    }
    if target.ignore_eos && prompt.greedy.is_none() {
        // A vLLM/SGLang/llama.cpp extension; only sent when wanted, since strict APIs
        // reject unknown fields. Never on a canary: it is the model's own answer, EOS and all.
        body.insert("ignore_eos".into(), Value::Bool(true));
    }
    body
}

/// A canary's request on either OpenAI endpoint: greedy, seeded, with logprobs (`chat`:
/// `logprobs: true` and `top_logprobs: k`; completions: `logprobs: k`).
pub(super) fn greedy(body: &mut Map<String, Value>, greedy: &Greedy, chat: bool) {
    // The workload's: one answer, the model's own length.
    for key in ["ignore_eos", "min_tokens", "n", "best_of"] {
        body.remove(key);
    }
    if !greedy.pinned {
        return;
    }
    body.insert("temperature".into(), Value::from(0));
    body.insert("seed".into(), Value::from(greedy.seed));
    for key in ["top_p", "top_k", "min_p"] {
        body.remove(key);
    }
    ask_logprobs(body, greedy.top_logprobs, chat);
}

/// Ask for `k` alternatives per token (0: none) as the OpenAI endpoints spell it: chat
/// `logprobs: true` with `top_logprobs: k`, completions `logprobs: k`.
pub(super) fn ask_logprobs(body: &mut Map<String, Value>, k: u32, chat: bool) {
    match (k, chat) {
        (0, _) => {}
        (k, true) => {
            body.insert("logprobs".into(), Value::Bool(true));
            body.insert("top_logprobs".into(), Value::from(k));
        }
        (k, false) => {
            body.insert("logprobs".into(), Value::from(k));
        }
    }
}

/// A JSON answer or tools, as the OpenAI APIs spell them: chat takes all three fields;
/// completions takes `response_format` (vLLM, SGLang) but no tools.
pub(super) fn structure(
    body: &mut Map<String, Value>,
    structure: &Structure,
    chat: bool,
) -> Result<(), String> {
    if !chat && (!structure.tools.is_empty() || structure.tool_choice.is_some()) {
        return Err("the completions API takes no tools: use backend = \"openai-chat\"".into());
    }
    if let Some(format) = &structure.response_format {
        body.insert("response_format".into(), structured::openai_format(format));
    }
    if !structure.tools.is_empty() {
        body.insert("tools".into(), structured::openai_tools(&structure.tools));
    }
    if let Some(choice) = &structure.tool_choice {
        body.insert("tool_choice".into(), structured::openai_choice(choice));
    }
    Ok(())
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
    /// Absent (or null) in some servers' single-choice streams: choice 0.
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<WireDelta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
    /// Read only when a canary asked for them (`null` otherwise, and cheap).
    #[serde(default)]
    logprobs: Option<Value>,
}

#[derive(Deserialize)]
struct WireDelta<'a> {
    /// Set on the first chat chunk only (with empty content): a header, not a token.
    #[serde(default, borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    content: Option<Content<'a>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    /// OpenAI: the model declined; the refusal text is generated output.
    #[serde(default, borrow)]
    refusal: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<WireToolCall<'a>>>,
    #[serde(default, borrow)]
    function_call: Option<WireFunction<'a>>,
}

#[derive(Deserialize)]
struct WireToolCall<'a> {
    /// Which call a fragment belongs to (several calls may stream interleaved).
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<WireFunction<'a>>,
}

#[derive(Deserialize)]
struct WireFunction<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Arguments<'a>>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens_details: Option<WireUsageDetails>,
    /// OpenAI, vLLM (`--enable-prompt-tokens-details`), SGLang: the prompt's cached part.
    /// Lenient: a value that is not a count is ignored, not a failed probe.
    #[serde(default)]
    prompt_tokens_details: Option<Value>,
    /// DeepSeek's count of the prompt read from its context cache (beside
    /// `prompt_cache_miss_tokens`). Lenient like the details.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsageDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// The text of content parts: `text` parts are the answer, `thinking` parts (a string or
/// nested text parts) are reasoning; other part types carry no generated text.
fn part_texts(parts: &[Value], answer: &mut String, reasoning: &mut String) {
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("text") => answer.push_str(part.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("thinking") => match part.get("thinking") {
                Some(Value::String(text)) => reasoning.push_str(text),
                Some(Value::Array(inner)) => part_texts(inner, reasoning, &mut String::new()),
                _ => {}
            },
            _ => {}
        }
    }
}

/// Finish reasons with which a server says it did *not* finish the answer: vLLM and SGLang
/// end an aborted request (`abort`) or an engine failure (`error`) this way, then `[DONE]`.
const ABORTED: [&str; 2] = ["abort", "error"];

impl WireChoice<'_> {
    /// `"text": ""` or `"delta": {"content": ""}`: vLLM's event for a token whose text it
    /// holds back. Not the role-only first chat chunk (`"role": "assistant", "content":
    /// ""`): that one is a header, sent before any token.
    fn has_empty_text(&self) -> bool {
        if self.delta.as_ref().is_some_and(|d| d.role.is_some()) {
            return false;
        }
        let content = self.delta.as_ref().and_then(|d| d.content.as_ref());
        self.text.as_deref() == Some("")
            || matches!(content, Some(Content::Text(t)) if t.is_empty())
    }

    /// Append this choice's generated text to `info`: the answer to `text`, reasoning,
    /// refusals and tool calls to `other_text`. Whether any was non-empty: a token arrived.
    fn read_output(&self, info: &mut ResponseInfo) -> bool {
        let (before, other_before) = (info.text.len(), info.other_text.len());
        if let Some(text) = &self.text {
            info.text.push_str(text);
        }
        let mut tool_call = false;
        if let Some(delta) = &self.delta {
            match &delta.content {
                Some(Content::Text(text)) => info.text.push_str(text),
                Some(Content::Parts(parts)) => {
                    let reasoning_before = info.other_text.len();
                    part_texts(parts, &mut info.text, &mut info.other_text);
                    info.reasoning_streamed |= info.other_text.len() > reasoning_before;
                }
                None => {}
            }
            let reasoning_before = info.other_text.len();
            // One of the two: vLLM 0.11 to 0.14 (and mlx-vlm) send the same text in both.
            let fields = [
                ("reasoning_content", &delta.reasoning_content),
                ("reasoning", &delta.reasoning),
            ];
            let said = fields
                .iter()
                .find(|(_, text)| text.as_deref().is_some_and(|t| !t.is_empty()));
            if let Some((field, Some(text))) = said {
                info.other_text.push_str(text);
                // Kept apart, under the server's own name: a session sends it back on a
                // reply with tool calls (DeepSeek's thinking mode refuses the history
                // without it).
                let reasoning = info.reasoning.get_or_insert_with(|| (field, String::new()));
                reasoning.1.push_str(text);
            }
            info.reasoning_streamed |= info.other_text.len() > reasoning_before;
            if let Some(refusal) = &delta.refusal {
                info.other_text.push_str(refusal);
                info.refusal.push_str(refusal);
            }
            let calls = delta.tool_calls.iter().flatten().map(|c| {
                let slot = info.chat_call_slot(c.index, c.id.as_deref());
                (slot, c.id.as_deref(), c.function.as_ref())
            });
            let calls: Vec<_> = calls.collect();
            let legacy = delta.function_call.as_ref().map(|f| (0, None, Some(f)));
            for (slot, id, function) in calls.into_iter().chain(legacy) {
                let call = info.tool_call(slot);
                if call.id.is_none() {
                    call.id = id.map(str::to_owned);
                }
                let Some(function) = function else { continue };
                if let Some(name) = &function.name {
                    call.name.push_str(name);
                    info.other_text.push_str(name);
                }
                match &function.arguments {
                    Some(Arguments::Text(text)) => {
                        info.other_text.push_str(text);
                        info.tool_arguments(slot, text);
                    }
                    Some(Arguments::Json(value)) => {
                        let text = value.to_string();
                        info.other_text.push_str(&text);
                        info.tool_arguments(slot, &text);
                        info.tool_call(slot).object_arguments = true;
                    }
                    None => {}
                }
            }
            // A tool call's first delta (id and type, no text yet) starts generated output.
            tool_call = delta.tool_calls.as_ref().is_some_and(|c| !c.is_empty())
                || delta.function_call.is_some();
        }
        tool_call || info.text.len() > before || info.other_text.len() > other_before
    }
}

/// The parser for both OpenAI streaming endpoints (they differ only in the choice shape,
/// and reading both shapes costs nothing).
///
/// Only choice 0 is measured: a probe times one stream, and `n > 1` (choices interleaved in
/// one stream) is refused at configuration time. Choices of a higher index are ignored.
#[derive(Debug, Default)]
pub(super) struct OpenAiStreamParser;

impl StreamParser for OpenAiStreamParser {
    fn on_event(
        &mut self,
        event: &SseEvent,
        info: &mut ResponseInfo,
    ) -> Result<StreamEvent, ProbeError> {
        let data = match super::payload(event)? {
            Payload::Done => return Ok(StreamEvent::Done(Chunk::default())),
            Payload::Json(data) => data,
        };
        let chunk: WireChunk<'_> = serde_json::from_str(data)
            .map_err(|e| ProbeError::InvalidResponse(format!("bad chunk JSON: {e}")))?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(super::server_error(&error));
        }
        if chunk.object.as_deref() == Some("error") {
            // Older vLLM sends the error object itself rather than {"error": {...}}.
            let message = chunk.message.map(|m| error_message(&m)).unwrap_or_default();
            return Err(ProbeError::StreamErrorEvent(message));
        }
        // Azure's content-filter annotations after the answer say `"model": ""`.
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            if info.model.as_deref() != Some(&*model) {
                info.model = Some(model.into_owned());
            }
        }
        if chunk.timings.is_some() {
            info.server_timings = chunk.timings;
        }
        let (mut has_output, mut empty_delta) = (false, false);
        let mut finished = false;
        for choice in chunk.choices.iter().filter(|c| c.index.unwrap_or(0) == 0) {
            let output = choice.read_output(info);
            has_output |= output;
            empty_delta |= !output && choice.has_empty_text();
            if let (Some(logprobs), Some(value)) = (&mut info.logprobs, &choice.logprobs) {
                logprobs.read(value);
            }
            if let Some(reason) = choice.finish_reason.as_deref().filter(|r| !r.is_empty()) {
                // OpenAI's and Azure's content filter withheld the rest of the answer.
                if reason == "content_filter" {
                    return Err(ProbeError::ContentFiltered(
                        "finish_reason \"content_filter\"".into(),
                    ));
                }
                if ABORTED.contains(&reason) {
                    return Err(ProbeError::StreamErrorEvent(format!(
                        "the server ended the generation with finish_reason \"{reason}\""
                    )));
                }
                info.finish_reason = Some(reason.to_owned());
                finished = true;
            }
        }
        Ok(StreamEvent::Chunk(Chunk {
            has_output,
            empty_delta,
            completion_tokens: chunk.usage.as_ref().and_then(|u| u.completion_tokens),
            prompt_tokens: chunk.usage.as_ref().and_then(|u| u.prompt_tokens),
            cached_prompt_tokens: chunk
                .usage
                .as_ref()
                .and_then(|u| {
                    u.prompt_tokens_details
                        .as_ref()
                        .and_then(|d| d.get("cached_tokens"))
                        .or(u.prompt_cache_hit_tokens.as_ref())
                })
                .and_then(Value::as_u64),
            finished,
            reasoning_tokens: chunk
                .usage
                .as_ref()
                .and_then(|u| u.completion_tokens_details.as_ref())
                .and_then(|d| d.reasoning_tokens),
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
