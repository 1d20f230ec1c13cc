//! `backend = "bedrock"`: Amazon Bedrock's `ConverseStream`,
//! `POST /model/<model>/converse-stream`, SigV4-signed ([`crate::auth::aws`]), answered in
//! the AWS event stream ([`crate::eventstream`]): one API for every model Bedrock serves.
//!
//! Events: `messageStart`, `contentBlockStart` (a tool call's name), `contentBlockDelta`
//! (text, a tool call's input, reasoning: the tokens), `contentBlockStop`, `messageStop`
//! (the stop reason), then `metadata` (usage, Bedrock's own latency): the end, since usage
//! comes after the stop. Exceptions inside the 200 stream map to the categories:
//! `throttlingException` is `rate_limited`, `serviceUnavailableException` `overloaded`,
//! the rest `stream_error_event`. A stop reason of `guardrail_intervened` or
//! `content_filtered` is `content_filtered`: the platform answered, not the model.

use serde_json::{Map, Value, json};

use super::{Backend, Framing, Payload, RequestSpec, StreamEvent, StreamParser, count_field};
use crate::endpoint::Target;
use crate::error::ProbeError;
use crate::eventstream::EXCEPTION;
use crate::prompt::{Greedy, Prompt};
use crate::record::{Chunk, ResponseInfo};
use crate::sse::SseEvent;
use crate::structure::{Structure, ToolChoice};

#[derive(Debug)]
pub struct Converse;

impl Backend for Converse {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut body = Map::new();
        // Converse caches up to an explicit `cachePoint` block: the shared part, marked.
        let shared = prompt.at_breakpoint();
        let content = match shared {
            Some((head, tail)) => json!([
                { "text": head },
                { "cachePoint": { "type": "default" } },
                { "text": tail },
            ]),
            None => json!([{ "text": prompt.text }]),
        };
        body.insert(
            "messages".into(),
            json!([{ "role": "user", "content": content }]),
        );
        let mut inference = Map::new();
        inference.insert("maxTokens".into(), Value::from(prompt.max_tokens));
        let mut additional = Map::new();
        for (key, value) in &target.sampling {
            match key.as_str() {
                "temperature" => drop(inference.insert("temperature".into(), value.clone())),
                "top_p" => drop(inference.insert("topP".into(), value.clone())),
                "stop" => drop(inference.insert("stopSequences".into(), value.clone())),
                // Not a Converse field: the model's own, passed through as the API says.
                "top_k" => drop(additional.insert(key.clone(), value.clone())),
                _ => {}
            }
        }
        body.insert("inferenceConfig".into(), Value::Object(inference));
        if !additional.is_empty() {
            body.insert(
                "additionalModelRequestFields".into(),
                Value::Object(additional),
            );
        }
        body.extend(target.extra_body.clone());
        RequestSpec::json(Value::Object(body))
    }

    fn framing(&self) -> Framing {
        Framing::EventStream
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(ConverseParser::default())
    }

    /// Greedy is `inferenceConfig.temperature` 0 (Converse has no seed).
    fn greedy(&self, body: &mut Map<String, Value>, greedy: &Greedy) {
        if !greedy.pinned {
            return;
        }
        if let Some(Value::Object(inference)) = body.get_mut("inferenceConfig") {
            inference.insert("temperature".into(), Value::from(0));
            inference.remove("topP");
        }
        if let Some(Value::Object(extra)) = body.get_mut("additionalModelRequestFields") {
            extra.remove("top_k");
        }
    }

    /// `toolConfig`: tools as `toolSpec`s with `inputSchema.json`; the choice `auto`,
    /// `any` (required) or a named `tool`. Converse has no JSON answer format: a JSON
    /// answer is asked for as a forced tool call, as with Anthropic.
    fn structure(
        &self,
        body: &mut Map<String, Value>,
        structure: &Structure,
    ) -> Result<(), String> {
        if structure.response_format.is_some() {
            return Err("Bedrock's Converse API has no `response_format`: declare the JSON as a tool's `parameters` and name it in `tool_choice`".into());
        }
        if structure.tools.is_empty() {
            return Ok(());
        }
        let tools: Vec<Value> = structure
            .tools
            .iter()
            .map(|f| json!({ "toolSpec": { "name": f.name, "inputSchema": { "json": f.parameters.json } } }))
            .collect();
        let mut config = json!({ "tools": tools });
        let choice = match &structure.tool_choice {
            Some(ToolChoice::Auto) => Some(json!({ "auto": {} })),
            Some(ToolChoice::Required) => Some(json!({ "any": {} })),
            Some(ToolChoice::Named(name)) => Some(json!({ "tool": { "name": name } })),
            Some(ToolChoice::None) => {
                return Err(
                    "Bedrock's Converse API has no `tool_choice` none: leave the tools out".into(),
                );
            }
            None => None,
        };
        if let Some(choice) = choice {
            config["toolChoice"] = choice;
        }
        body.insert("toolConfig".into(), config);
        Ok(())
    }

    /// Converse has no switch for parallel calls: the model decides.
    fn parallel_calls(&self, _: &mut Map<String, Value>, _: bool) {}

    fn status_error(&self, headers: &http::HeaderMap, body: &str) -> Option<ProbeError> {
        http_error(headers, body)
    }
}

#[derive(Default)]
struct ConverseParser {
    /// `messageStop` arrived: the generation ended, only usage is to come.
    stopped: bool,
}

impl StreamParser for ConverseParser {
    fn on_event(
        &mut self,
        event: &SseEvent,
        info: &mut ResponseInfo,
    ) -> Result<StreamEvent, ProbeError> {
        if let Some(kind) = event.kind().strip_prefix(EXCEPTION) {
            return Err(exception(kind, &event.data));
        }
        let data = match super::payload(event)? {
            Payload::Done => {
                return Err(ProbeError::InvalidResponse(
                    "`[DONE]` in an event stream".into(),
                ));
            }
            Payload::Json(data) => data,
        };
        let object = super::json_object(data)?;
        let none = Chunk::default();
        let slot = object
            .get("contentBlockIndex")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        Ok(match event.kind() {
            "contentBlockStart" => {
                let tool = object.get("start").and_then(|s| s.get("toolUse"));
                let Some(tool) = tool else {
                    return Ok(StreamEvent::Chunk(none));
                };
                let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
                info.other_text.push_str(name);
                let call = info.tool_call(slot);
                call.name.push_str(name);
                if let Some(id) = tool.get("toolUseId").and_then(Value::as_str) {
                    call.id.get_or_insert_with(|| id.to_owned());
                }
                StreamEvent::Chunk(Chunk {
                    has_output: true,
                    ..none
                })
            }
            "contentBlockDelta" => {
                let delta = object.get("delta").unwrap_or(&Value::Null);
                let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
                let mut output = String::new();
                if let Some(t) = delta.get("text") {
                    output = text(Some(t));
                    info.text.push_str(&output);
                } else if let Some(tool) = delta.get("toolUse") {
                    output = text(tool.get("input"));
                    info.other_text.push_str(&output);
                    info.tool_arguments(slot, &output);
                } else if let Some(reasoning) = delta.get("reasoningContent") {
                    output = text(reasoning.get("text"));
                    let thinking = info.thinking_at(slot);
                    thinking.text.push_str(&output);
                    thinking
                        .signature
                        .push_str(&text(reasoning.get("signature")));
                    info.other_text.push_str(&output);
                }
                StreamEvent::Chunk(Chunk {
                    has_output: !output.is_empty(),
                    ..none
                })
            }
            "messageStop" => {
                let reason = object
                    .get("stopReason")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let said = || format!("Bedrock's stop reason `{reason}`");
                match reason {
                    "guardrail_intervened" | "content_filtered" => {
                        return Err(ProbeError::ContentFiltered(said()));
                    }
                    // The model's output could not be parsed (text or a tool call): broken.
                    "malformed_model_output" | "malformed_tool_use" => {
                        return Err(ProbeError::InvalidResponse(said()));
                    }
                    "model_context_window_exceeded" => {
                        return Err(ProbeError::ContextWindow(said()));
                    }
                    _ => {}
                }
                // Converse's `max_tokens` is the same stop as chat's `length`.
                info.finish_reason = Some(reason.to_owned());
                self.stopped = true;
                StreamEvent::Chunk(Chunk {
                    finished: !reason.is_empty(),
                    ..none
                })
            }
            "metadata" => {
                let usage = object.get("usage");
                let field = |name: &str| count_field(usage.and_then(|u| u.get(name)), name);
                let cached = field("cacheReadInputTokens")?;
                let written = field("cacheWriteInputTokens")?;
                info.cache_written = written;
                // `inputTokens` is the prompt after the cache, as Anthropic's is.
                let prompt = [field("inputTokens")?, cached, written]
                    .iter()
                    .flatten()
                    .copied()
                    .reduce(u64::saturating_add);
                StreamEvent::Done(Chunk {
                    prompt_tokens: prompt,
                    completion_tokens: field("outputTokens")?,
                    cached_prompt_tokens: cached,
                    ..none
                })
            }
            _ => StreamEvent::Chunk(none), // messageStart, contentBlockStop, future events
        })
    }

    /// Usage comes after the stop: a stream that stopped and ended without it is done.
    fn on_eof(&mut self) -> Option<StreamEvent> {
        self.stopped.then(|| StreamEvent::Done(Chunk::default()))
    }
}

/// An exception message inside a 200 stream, in its category.
pub(super) fn exception(kind: &str, data: &str) -> ProbeError {
    let message = serde_json::from_str::<Value>(data)
        .ok()
        .and_then(|v| Some(v.get("message")?.as_str()?.to_owned()))
        .unwrap_or_default();
    let detail = format!("{kind}: {}", crate::error::snippet(&message));
    match kind {
        "throttlingException" => ProbeError::Throttled(detail),
        "serviceUnavailableException" => ProbeError::Overloaded(detail),
        "validationException" if crate::error::over_context(&message) => {
            ProbeError::ContextWindow(detail)
        }
        _ => ProbeError::StreamErrorEvent(detail),
    }
}

/// A Bedrock refusal by its `x-amzn-ErrorType` (`ThrottlingException:http://…`), where its
/// status alone would mislead: a 503 `ServiceUnavailableException` is load shed
/// (`overloaded`, as in the stream), a 400 `ServiceQuotaExceededException` a quota
/// (`rate_limited`), a 429 `ModelNotReadyException` a cold model (`overloaded`), a 424
/// `ModelErrorException` and a 408 `ModelTimeoutException` the model's own failure
/// (`http_5xx`). Others go by their status.
pub(super) fn http_error(headers: &http::HeaderMap, body: &str) -> Option<ProbeError> {
    let kind = headers.get("x-amzn-errortype")?.to_str().ok()?;
    let kind = kind.split(':').next().unwrap_or(kind);
    let detail = format!("{kind}: {}", crate::error::snippet(body));
    Some(match kind {
        "ServiceUnavailableException" | "ModelNotReadyException" => ProbeError::Overloaded(detail),
        "ServiceQuotaExceededException" => ProbeError::Throttled(detail),
        "ModelErrorException" | "ModelTimeoutException" => ProbeError::ProviderFailed(detail),
        _ => return None,
    })
}
