//! `backend = "anthropic"`: the Anthropic Messages API, `POST /v1/messages`, streamed.
//!
//! Events: `message_start` (input tokens, cached and not, and the model),
//! `content_block_start` (a `tool_use` block's name is output, like chat's first tool-call
//! delta), `content_block_delta` (text, thinking or tool-input deltas: the tokens),
//! `message_delta` (stop reason and the cumulative `output_tokens`), `message_stop` (the
//! end), `ping` (a keep-alive: no progress), and `event: error`. The placeholder
//! `output_tokens` in `message_start` is ignored: reporting it would look like a token.
//! The key goes in `x-api-key` with an `anthropic-version` header.

use http::{HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use super::{
    Backend, Payload, RequestSpec, StreamEvent, StreamParser, count_field, error_message,
    tool_call_header,
};
use crate::endpoint::{Secret, Target};
use crate::error::ProbeError;
use crate::media::body::{Slice, placeholder};
use crate::prompt::Prompt;
use crate::record::{Chunk, ResponseInfo};
use crate::sse::SseEvent;
use crate::structure::{Structure, ToolChoice};

#[derive(Debug)]
pub struct Anthropic;

impl Backend for Anthropic {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut body = Map::new();
        body.insert("model".into(), Value::from(prompt.model.as_str()));
        body.insert("max_tokens".into(), Value::from(prompt.max_tokens));
        // Images go before the text, as Anthropic recommends.
        let shared = prompt.at_breakpoint();
        let content = match (prompt.media(), shared) {
            // Anthropic caches only up to a block marked `cache_control`: the shared part
            // is one block, marked, and the rest another.
            ([], Some((head, tail))) => json!([
                { "type": "text", "text": head, "cache_control": { "type": "ephemeral" } },
                { "type": "text", "text": tail },
            ]),
            ([], None) => Value::from(prompt.text.as_str()),
            (media, _) => {
                let mut blocks: Vec<Value> = media
                    .iter()
                    .enumerate()
                    .map(|(i, m)| {
                        // Placeholders, spliced with the media's own buffers when sent.
                        let source = match m.inline {
                            Some((mime, _)) => json!({ "type": "base64", "media_type": mime,
                                                       "data": placeholder(i, Slice::Base64) }),
                            None => json!({ "type": "url", "url": placeholder(i, Slice::Url) }),
                        };
                        json!({ "type": "image", "source": source })
                    })
                    .collect();
                blocks.push(json!({ "type": "text", "text": prompt.text }));
                Value::Array(blocks)
            }
        };
        match &prompt.conversation {
            Some(conversation) => {
                let (system, messages) = super::history::anthropic(conversation);
                if system.as_str().is_some_and(|s| !s.is_empty()) {
                    body.insert("system".into(), system);
                }
                body.insert("messages".into(), messages);
            }
            None => {
                body.insert(
                    "messages".into(),
                    json!([{ "role": "user", "content": content }]),
                );
            }
        }
        body.insert("stream".into(), Value::Bool(true));
        for (key, value) in &target.sampling {
            match key.as_str() {
                "temperature" | "top_p" | "top_k" => {
                    body.insert(key.clone(), value.clone());
                }
                "stop" => {
                    body.insert("stop_sequences".into(), value.clone());
                }
                _ => {} // not Messages API parameters
            }
        }
        body.extend(target.extra_body.clone());
        if shared.is_some() || prompt.conversation.is_some() {
            // Automatic caching would put a second breakpoint on the last block, which
            // differs between a pair's requests: a cache write paid on each, never read.
            body.remove("cache_control");
        }
        let mut spec = RequestSpec::json(Value::Object(body));
        if let Ok(version) = HeaderValue::from_str(&target.options.anthropic_version) {
            spec.headers
                .push((HeaderName::from_static("anthropic-version"), version));
        }
        spec
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(MessagesParser)
    }

    /// Tools with `input_schema`; `tool_choice` `{"type": "tool", "name": …}` for a named
    /// one and `{"type": "any"}` for `required`. The Messages API has no `response_format`:
    /// a JSON answer is asked for as a forced tool call.
    fn structure(
        &self,
        body: &mut Map<String, Value>,
        structure: &Structure,
    ) -> Result<(), String> {
        if structure.response_format.is_some() {
            return Err("Anthropic's Messages API has no `response_format`: declare the JSON as a tool's `parameters` and name it in `tool_choice`".into());
        }
        let thinking = body
            .get("thinking")
            .and_then(|t| t.get("type"))
            .and_then(Value::as_str)
            .is_some_and(|t| t != "disabled");
        if thinking && structure.requires_tool_call() {
            return Err("Claude's extended thinking (`thinking` in `extra_body`) refuses a forced `tool_choice` (HTTP 400): use `tool_choice` \"auto\", or no thinking".into());
        }
        if !structure.tools.is_empty() {
            let tools = structure
                .tools
                .iter()
                .map(|f| f.spelled(json!({ "name": f.name, "input_schema": f.parameters.json })));
            body.insert("tools".into(), tools.collect());
        }
        if let Some(choice) = &structure.tool_choice {
            let choice = match choice {
                ToolChoice::Auto => json!({ "type": "auto" }),
                ToolChoice::None => json!({ "type": "none" }),
                ToolChoice::Required => json!({ "type": "any" }),
                ToolChoice::Named(name) => json!({ "type": "tool", "name": name }),
            };
            body.insert("tool_choice".into(), choice);
        }
        Ok(())
    }

    /// `tool_choice.disable_parallel_tool_use`, on the choice `structure` spelled (`auto`
    /// where it spelled none).
    fn parallel_calls(&self, body: &mut Map<String, Value>, allowed: bool) {
        let choice = body
            .entry("tool_choice")
            .or_insert_with(|| json!({ "type": "auto" }));
        if let Value::Object(choice) = choice {
            // `none` takes no such field.
            if choice.get("type").and_then(Value::as_str) != Some("none") {
                choice.insert("disable_parallel_tool_use".into(), Value::Bool(!allowed));
            }
        }
    }

    fn authorize(&self, key: &Secret) -> Vec<(HeaderName, HeaderValue)> {
        match HeaderValue::from_str(key.expose()) {
            Ok(mut value) => {
                value.set_sensitive(true);
                vec![(HeaderName::from_static("x-api-key"), value)]
            }
            Err(_) => Vec::new(),
        }
    }
}

pub(super) struct MessagesParser;

impl StreamParser for MessagesParser {
    fn on_event(
        &mut self,
        event: &SseEvent,
        info: &mut ResponseInfo,
    ) -> Result<StreamEvent, ProbeError> {
        if event.kind() == "ping" && event.data.trim().is_empty() {
            return Ok(StreamEvent::KeepAlive);
        }
        let data = match super::payload(event)? {
            // vLLM's Messages endpoint adds a [DONE].
            Payload::Done => return Ok(StreamEvent::Done(Chunk::default())),
            Payload::Json(data) => data,
        };
        let object = super::json_object(data)?;
        let kind = object
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.kind());
        let none = Chunk::default();
        Ok(match kind {
            "error" => {
                let error = object.get("error").unwrap_or(&Value::Null);
                let class = error.get("type").and_then(Value::as_str).unwrap_or("error");
                if class == "overloaded_error" {
                    return Err(super::server_error(error));
                }
                return Err(ProbeError::StreamErrorEvent(format!(
                    "{class}: {}",
                    error_message(error)
                )));
            }
            "message_start" => {
                let message = object.get("message");
                info.model = message
                    .and_then(|m| m.get("model"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let usage = message.and_then(|m| m.get("usage"));
                info.cache_written = usage
                    .and_then(|u| u.get("cache_creation_input_tokens"))
                    .and_then(Value::as_u64);
                StreamEvent::Chunk(Chunk {
                    prompt_tokens: prompt_tokens(usage)?,
                    // Read from the prompt cache (an explicit `cache_control` breakpoint).
                    cached_prompt_tokens: usage
                        .and_then(|u| u.get("cache_read_input_tokens"))
                        .and_then(Value::as_u64),
                    ..none
                })
            }
            "content_block_start" => {
                let block = object.get("content_block");
                let slot = object.get("index").and_then(Value::as_u64).unwrap_or(0);
                let text = |key: &str| {
                    block
                        .and_then(|b| b.get(key))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                match block.and_then(|b| b.get("type")).and_then(Value::as_str) {
                    Some("thinking") => {
                        let thinking = info.thinking_at(slot);
                        thinking.text.push_str(&text("thinking"));
                        thinking.signature.push_str(&text("signature"));
                    }
                    Some("redacted_thinking") => {
                        info.thinking_at(slot).redacted = Some(text("data"));
                    }
                    _ => {}
                }
                StreamEvent::Chunk(Chunk {
                    has_output: tool_call_header(block, "tool_use", object.get("index"), info),
                    ..none
                })
            }
            "content_block_delta" => {
                let delta = object.get("delta").unwrap_or(&Value::Null);
                let field = match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => "text",
                    Some("thinking_delta") => "thinking",
                    Some("input_json_delta") => "partial_json",
                    _ => "", // signature and citation deltas are not generated tokens
                };
                let text = delta.get(field).and_then(Value::as_str).unwrap_or("");
                let slot = object.get("index").and_then(Value::as_u64).unwrap_or(0);
                if let Some(signature) = delta.get("signature").and_then(Value::as_str) {
                    info.thinking_at(slot).signature.push_str(signature);
                }
                if field == "thinking" {
                    info.thinking_at(slot).text.push_str(text);
                }
                match field {
                    "text" => info.text.push_str(text),
                    "partial_json" => {
                        info.other_text.push_str(text);
                        info.tool_arguments(slot, text);
                    }
                    _ => info.other_text.push_str(text),
                }
                StreamEvent::Chunk(Chunk {
                    has_output: !text.is_empty(),
                    ..none
                })
            }
            "message_delta" => {
                let reason = object
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str);
                match reason {
                    // Claude's streaming safety classifiers stopped the answer.
                    Some("refusal") => {
                        return Err(ProbeError::ContentFiltered("stop_reason `refusal`".into()));
                    }
                    Some("model_context_window_exceeded") => {
                        return Err(ProbeError::ContextWindow(
                            "stop_reason `model_context_window_exceeded`".into(),
                        ));
                    }
                    Some(reason) => info.finish_reason = Some(reason.to_owned()),
                    None => {}
                }
                let usage = object.get("usage");
                StreamEvent::Chunk(Chunk {
                    completion_tokens: count_field(
                        usage.and_then(|u| u.get("output_tokens")),
                        "output_tokens",
                    )?,
                    // Claude streams a summary of its thinking and bills all of it.
                    reasoning_tokens: count_field(
                        usage
                            .and_then(|u| u.get("output_tokens_details"))
                            .and_then(|d| d.get("thinking_tokens")),
                        "output_tokens_details.thinking_tokens",
                    )?,
                    finished: reason.is_some(),
                    ..none
                })
            }
            "message_stop" => StreamEvent::Done(none),
            "ping" => StreamEvent::KeepAlive,
            _ => StreamEvent::Chunk(none), // block stop, and future event types
        })
    }
}

/// The prompt's tokens: `input_tokens` counts only those after the last cache breakpoint;
/// the ones read from the prompt cache and the ones written to it are input too.
fn prompt_tokens(usage: Option<&Value>) -> Result<Option<u64>, ProbeError> {
    let field = |name: &str| count_field(usage.and_then(|u| u.get(name)), name);
    let parts = [
        field("input_tokens")?,
        field("cache_read_input_tokens")?,
        field("cache_creation_input_tokens")?,
    ];
    Ok(parts.iter().flatten().copied().reduce(u64::saturating_add))
}
