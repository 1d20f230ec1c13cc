//! `backend = "openai-responses"`: the OpenAI Responses API, `POST /v1/responses`, streamed.
//!
//! Every event is named in its data's `type`. Tokens are the `*.delta` events with a
//! non-empty `delta` (output text, reasoning, tool-call arguments, refusals);
//! `response.completed` (or `response.incomplete`, e.g. at `max_output_tokens`) ends the
//! stream with usage; `response.failed` and `error` (flat or nested) fail it. There is no
//! `[DONE]`, though one is tolerated.

use serde_json::{Map, Value, json};

use super::{Backend, Payload, RequestSpec, StreamEvent, StreamParser, count_field};
use crate::endpoint::Target;
use crate::error::ProbeError;
use crate::media::body::{Slice, placeholder};
use crate::prompt::Prompt;
use crate::record::{Chunk, ResponseInfo};
use crate::sse::SseEvent;
use crate::structure::{self as structured, Format, Structure, ToolChoice};

#[derive(Debug)]
pub struct Responses;

impl Backend for Responses {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut body = Map::new();
        body.insert("model".into(), Value::from(prompt.model.as_str()));
        let input = match prompt.media() {
            [] => Value::from(prompt.text.as_str()),
            media => {
                let mut content = vec![json!({ "type": "input_text", "text": prompt.text })];
                // Placeholders, spliced with the media's own buffers when sent.
                content.extend((0..media.len()).map(
                    |i| json!({ "type": "input_image", "image_url": placeholder(i, Slice::Url) }),
                ));
                json!([{ "role": "user", "content": content }])
            }
        };
        match &prompt.conversation {
            Some(conversation) => {
                let (instructions, input) = super::history::responses(conversation);
                if instructions.as_str().is_some_and(|s| !s.is_empty()) {
                    body.insert("instructions".into(), instructions);
                }
                body.insert("input".into(), input);
            }
            None => {
                body.insert("input".into(), input);
            }
        }
        body.insert("max_output_tokens".into(), Value::from(prompt.max_tokens));
        body.insert("stream".into(), Value::Bool(true));
        // A probe's responses need not be kept (and vLLM rejects storing by default).
        body.insert("store".into(), Value::Bool(false));
        for (key, value) in &target.sampling {
            if matches!(key.as_str(), "temperature" | "top_p") {
                body.insert(key.clone(), value.clone());
            }
        }
        body.extend(target.extra_body.clone());
        RequestSpec::json(Value::Object(body))
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(ResponsesParser)
    }

    /// `text.format` holds the schema flat (`name`, `schema`, `strict` beside `type`);
    /// tools are flat too (`name`, `parameters` beside `type`).
    fn structure(
        &self,
        body: &mut Map<String, Value>,
        structure: &Structure,
    ) -> Result<(), String> {
        if let Some(format) = &structure.response_format {
            let format = match format {
                Format::JsonObject => json!({ "type": "json_object" }),
                Format::JsonSchema {
                    name,
                    schema,
                    strict,
                } => {
                    let mut format =
                        json!({ "type": "json_schema", "name": name, "schema": schema.json });
                    if let Some(strict) = strict {
                        format["strict"] = Value::Bool(*strict);
                    }
                    format
                }
            };
            body.insert("text".into(), json!({ "format": format }));
        }
        if !structure.tools.is_empty() {
            let tools = structure.tools.iter().map(|f| {
                f.spelled_strict(
                    json!({ "type": "function", "name": f.name, "parameters": f.parameters.json }),
                )
            });
            body.insert("tools".into(), tools.collect());
        }
        if let Some(choice) = &structure.tool_choice {
            let choice = match choice {
                ToolChoice::Named(name) => json!({ "type": "function", "name": name }),
                other => structured::openai_choice(other),
            };
            body.insert("tool_choice".into(), choice);
        }
        Ok(())
    }
}

struct ResponsesParser;

impl StreamParser for ResponsesParser {
    fn on_event(
        &mut self,
        event: &SseEvent,
        info: &mut ResponseInfo,
    ) -> Result<StreamEvent, ProbeError> {
        let data = match super::payload(event)? {
            Payload::Done => return Ok(StreamEvent::Done(Chunk::default())),
            Payload::Json(data) => data,
        };
        let object = super::json_object(data)?;
        let kind = object
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.kind());
        let response = object.get("response");
        if let Some(model) = response
            .and_then(|r| r.get("model"))
            .and_then(Value::as_str)
        {
            info.model = Some(model.to_owned());
        }
        match kind {
            "error" => {
                let error = object
                    .get("error")
                    .filter(|e| !e.is_null())
                    .unwrap_or(&Value::Null);
                // Overloaded (`overloaded_error` as its type or code) is load shed, as
                // HTTP 529 is; anything else the stream's error.
                Err(match error {
                    Value::Null => super::server_error(&Value::Object(object.clone())),
                    nested => super::server_error(nested),
                })
            }
            "response.failed" => {
                let error = response
                    .and_then(|r| r.get("error"))
                    .unwrap_or(&Value::Null);
                Err(super::server_error(error))
            }
            "response.completed" | "response.incomplete" => {
                let response = response.unwrap_or(&Value::Null);
                let reason = response
                    .get("incomplete_details")
                    .and_then(|d| d.get("reason"))
                    .and_then(Value::as_str)
                    .or_else(|| response.get("status").and_then(Value::as_str))
                    .unwrap_or("completed");
                info.finish_reason = Some(reason.to_owned());
                let usage = response.get("usage");
                Ok(StreamEvent::Done(Chunk {
                    completion_tokens: count_field(
                        usage.and_then(|u| u.get("output_tokens")),
                        "output_tokens",
                    )?,
                    prompt_tokens: count_field(
                        usage.and_then(|u| u.get("input_tokens")),
                        "input_tokens",
                    )?,
                    cached_prompt_tokens: usage
                        .and_then(|u| u.get("input_tokens_details"))
                        .and_then(|d| d.get("cached_tokens"))
                        .and_then(Value::as_u64),
                    reasoning_tokens: count_field(
                        usage
                            .and_then(|u| u.get("output_tokens_details"))
                            .and_then(|d| d.get("reasoning_tokens")),
                        "output_tokens_details.reasoning_tokens",
                    )?,
                    finished: true,
                    ..Chunk::default()
                }))
            }
            delta if delta.ends_with(".delta") => {
                let text = object.get("delta").and_then(Value::as_str).unwrap_or("");
                match delta {
                    "response.output_text.delta" => info.text.push_str(text),
                    // The reasoning itself (open-weight models); a summary is not it.
                    "response.reasoning_text.delta" => {
                        info.reasoning_streamed |= !text.is_empty();
                        info.other_text.push_str(text);
                    }
                    "response.function_call_arguments.delta" => {
                        info.other_text.push_str(text);
                        let slot = object.get("output_index").and_then(Value::as_u64);
                        info.tool_arguments(slot.unwrap_or(0), text);
                    }
                    "response.refusal.delta" => {
                        info.other_text.push_str(text);
                        info.refusal.push_str(text);
                    }
                    _ => info.other_text.push_str(text),
                }
                Ok(StreamEvent::Chunk(Chunk {
                    has_output: !text.is_empty(),
                    ..Chunk::default()
                }))
            }
            "response.output_item.added" => Ok(StreamEvent::Chunk(Chunk {
                has_output: super::tool_call_header(
                    object.get("item"),
                    "function_call",
                    object.get("output_index"),
                    info,
                ),
                ..Chunk::default()
            })),
            _ => Ok(StreamEvent::Chunk(Chunk::default())),
        }
    }
}
