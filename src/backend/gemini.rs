//! `backend = "gemini"`: Google's `streamGenerateContent?alt=sse`, the same wire format on
//! the Gemini API (`generativelanguage.googleapis.com`, an API key in `x-goog-api-key`)
//! and on Vertex AI (`…/publishers/google/models/<model>:streamGenerateContent`, an
//! OAuth token from Application Default Credentials, [`crate::auth::google`]).
//!
//! Each event is a whole `GenerateContentResponse`: the candidate's parts (text, thought
//! parts marked `thought: true`, whole `functionCall`s), a `finishReason` on the last, and
//! `usageMetadata` whose `candidatesTokenCount` (+ `thoughtsTokenCount`) is cumulative, so
//! a chunk of k tokens is timed as k tokens. There is no end marker: the stream ends after
//! the finish reason. A prompt blocked (`promptFeedback.blockReason`) or an answer stopped
//! by a safety system (`SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`,
//! the image ones, Vertex AI's `MODEL_ARMOR`) is `content_filtered`, a botched tool call
//! (`MALFORMED_FUNCTION_CALL`…) `invalid_response`, any other stop but `STOP` and
//! `MAX_TOKENS` (`LANGUAGE`, `OTHER`, future ones) `stream_error_event`; an `{"error": …}` in the stream is
//! `rate_limited` (`RESOURCE_EXHAUSTED`), `overloaded` (`UNAVAILABLE`) or
//! `stream_error_event`.

use http::{HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use super::{Backend, Payload, RequestSpec, StreamEvent, StreamParser, count_field};
use crate::endpoint::{Secret, Target};
use crate::error::ProbeError;
use crate::prompt::{Greedy, Prompt};
use crate::record::{Chunk, ResponseInfo};
use crate::sse::SseEvent;
use crate::structure::{Format, Structure, ToolChoice};

/// The finish reasons of an answer a safety system stopped (the Gemini API's and Vertex
/// AI's, whose Model Armor is one more).
const FILTERED: [&str; 9] = [
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "MODEL_ARMOR",
];

/// The finish reasons of a tool call the model botched.
const BROKEN_CALLS: [&str; 3] = [
    "MALFORMED_FUNCTION_CALL",
    "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS",
];

#[derive(Debug)]
pub struct Gemini;

/// The body every Gemini door takes; `prefix` is the model's turn of the conversation.
pub(super) fn body(target: &Target, prompt: &Prompt) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert(
        "contents".into(),
        json!([{ "role": "user", "parts": [{ "text": prompt.text }] }]),
    );
    let mut config = Map::new();
    config.insert("maxOutputTokens".into(), Value::from(prompt.max_tokens));
    for (key, value) in &target.sampling {
        let name = match key.as_str() {
            "temperature" => "temperature",
            "top_p" => "topP",
            "top_k" => "topK",
            "stop" => "stopSequences",
            "frequency_penalty" => "frequencyPenalty",
            "presence_penalty" => "presencePenalty",
            _ => continue,
        };
        config.insert(name.into(), value.clone());
    }
    body.insert("generationConfig".into(), Value::Object(config));
    body.extend(target.extra_body.clone());
    body
}

impl Backend for Gemini {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        RequestSpec::json(Value::Object(body(target, prompt)))
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(GeminiParser::default())
    }

    /// `generationConfig.temperature` 0 and its `seed`.
    fn greedy(&self, body: &mut Map<String, Value>, greedy: &Greedy) {
        if !greedy.pinned {
            return;
        }
        if let Some(Value::Object(config)) = body.get_mut("generationConfig") {
            config.insert("temperature".into(), Value::from(0));
            config.insert("seed".into(), Value::from(greedy.seed % (1 << 31)));
            config.remove("topP");
            config.remove("topK");
        }
    }

    /// A JSON answer is `responseMimeType: application/json` with `responseJsonSchema`;
    /// tools are `functionDeclarations`, the choice `functionCallingConfig`'s mode.
    fn structure(
        &self,
        body: &mut Map<String, Value>,
        structure: &Structure,
    ) -> Result<(), String> {
        if let Some(format) = &structure.response_format {
            let config = body.entry("generationConfig").or_insert_with(|| json!({}));
            config["responseMimeType"] = json!("application/json");
            if let Format::JsonSchema { schema, .. } = format {
                config["responseJsonSchema"] = schema.json.clone();
            }
        }
        if !structure.tools.is_empty() {
            let declarations: Vec<Value> = structure
                .tools
                .iter()
                .map(|f| {
                    f.spelled(json!({ "name": f.name, "parametersJsonSchema": f.parameters.json }))
                })
                .collect();
            body.insert(
                "tools".into(),
                json!([{ "functionDeclarations": declarations }]),
            );
        }
        if let Some(choice) = &structure.tool_choice {
            let config = match choice {
                ToolChoice::Auto => json!({ "mode": "AUTO" }),
                ToolChoice::None => json!({ "mode": "NONE" }),
                ToolChoice::Required => json!({ "mode": "ANY" }),
                ToolChoice::Named(name) => json!({ "mode": "ANY", "allowedFunctionNames": [name] }),
            };
            body.insert(
                "toolConfig".into(),
                json!({ "functionCallingConfig": config }),
            );
        }
        Ok(())
    }

    /// Gemini has no switch for parallel calls.
    fn parallel_calls(&self, _: &mut Map<String, Value>, _: bool) {}

    /// The Gemini API's key header; on Vertex AI a token comes from [`crate::auth`].
    fn authorize(&self, key: &Secret) -> Vec<(HeaderName, HeaderValue)> {
        match HeaderValue::from_str(key.expose()) {
            Ok(mut value) => {
                value.set_sensitive(true);
                vec![(HeaderName::from_static("x-goog-api-key"), value)]
            }
            Err(_) => Vec::new(),
        }
    }
}

#[derive(Default)]
struct GeminiParser {
    /// A finish reason arrived: the stream may end.
    finished: bool,
    /// Calls seen, each its own slot.
    calls: u64,
}

impl StreamParser for GeminiParser {
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
        if let Some(error) = object.get("error") {
            return Err(stream_error(error));
        }
        if let Some(reason) = object
            .get("promptFeedback")
            .and_then(|f| f.get("blockReason"))
            .and_then(Value::as_str)
        {
            return Err(ProbeError::ContentFiltered(format!(
                "the prompt was blocked: {reason}"
            )));
        }
        if let Some(version) = object.get("modelVersion").and_then(Value::as_str) {
            info.model = Some(version.to_owned());
        }
        let candidate = object
            .get("candidates")
            .and_then(|c| c.get(0))
            .unwrap_or(&Value::Null);
        let mut has_output = false;
        let parts = candidate
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            if let Some(call) = part.get("functionCall") {
                let name = call.get("name").and_then(Value::as_str).unwrap_or("");
                let args = call
                    .get("args")
                    .map_or_else(|| "{}".to_owned(), Value::to_string);
                info.other_text.push_str(name);
                info.other_text.push_str(&args);
                let slot = self.calls;
                self.calls += 1;
                let entry = info.tool_call(slot);
                entry.name.push_str(name);
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    entry.id = Some(id.to_owned());
                }
                info.tool_arguments(slot, &args);
                has_output = true;
                continue;
            }
            let text = part.get("text").and_then(Value::as_str).unwrap_or("");
            has_output |= !text.is_empty();
            if part.get("thought").and_then(Value::as_bool) == Some(true) {
                info.thinking_at(0).text.push_str(text);
                info.other_text.push_str(text);
            } else {
                info.text.push_str(text);
            }
        }
        let reason = candidate.get("finishReason").and_then(Value::as_str);
        if let Some(reason) = reason {
            let said = || format!("Gemini's finish reason `{reason}`");
            // Only a stop and the limit are a generation that ended well; anything else,
            // future values included, is not the answer the user asked for.
            match reason {
                "STOP" | "MAX_TOKENS" | "FINISH_REASON_UNSPECIFIED" => {}
                r if FILTERED.contains(&r) => return Err(ProbeError::ContentFiltered(said())),
                r if BROKEN_CALLS.contains(&r) => return Err(ProbeError::InvalidResponse(said())),
                _ => return Err(ProbeError::StreamErrorEvent(said())),
            }
            // Gemini's `MAX_TOKENS` is the same stop as chat's `length`.
            info.finish_reason = Some(match reason {
                "MAX_TOKENS" => "length".to_owned(),
                other => other.to_ascii_lowercase(),
            });
            self.finished = true;
        }
        let usage = object.get("usageMetadata");
        let field = |name: &str| count_field(usage.and_then(|u| u.get(name)), name);
        let thoughts = field("thoughtsTokenCount")?;
        let candidates = field("candidatesTokenCount")?;
        let completion = match (candidates, thoughts) {
            (None, None) => None,
            (c, t) => Some(c.unwrap_or(0).saturating_add(t.unwrap_or(0))),
        };
        Ok(StreamEvent::Chunk(Chunk {
            has_output,
            completion_tokens: completion,
            prompt_tokens: field("promptTokenCount")?,
            cached_prompt_tokens: field("cachedContentTokenCount")?,
            reasoning_tokens: thoughts,
            finished: reason.is_some(),
            ..Chunk::default()
        }))
    }

    /// No end marker: a stream that ended after its finish reason is done.
    fn on_eof(&mut self) -> Option<StreamEvent> {
        self.finished.then(|| StreamEvent::Done(Chunk::default()))
    }
}

/// Google's error object (`code`, `message`, `status`) inside a 200 stream.
fn stream_error(error: &Value) -> ProbeError {
    let status = error.get("status").and_then(Value::as_str).unwrap_or("");
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    let detail = format!("{status}: {}", crate::error::snippet(message));
    match status {
        "RESOURCE_EXHAUSTED" => ProbeError::Throttled(detail),
        "UNAVAILABLE" => ProbeError::Overloaded(detail),
        _ => ProbeError::StreamErrorEvent(detail),
    }
}
