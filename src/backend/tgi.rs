//! `backend = "tgi"`: Hugging Face Text Generation Inference, `POST /generate_stream`.
//!
//! One `data:` event per generated token (`token.text`, `token.special`); the last one also
//! carries `generated_text` and, since we ask for `details`, the exact `generated_tokens`
//! and `finish_reason`. There is no `[DONE]`: the stream ends after that final event. Every
//! error after the request parsed arrives *inside* the 200 stream as
//! `{"error": …, "error_type": …}`. TGI rejects temperature 0 and top_p 1 and has no
//! ignore-EOS option, so greedy decoding is sent as `do_sample: false` and EOS is honoured.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{Backend, Payload, RequestSpec, StreamEvent, StreamParser, error_message};
use crate::endpoint::Target;
use crate::error::ProbeError;
use crate::prompt::{Greedy, Prompt};
use crate::record::{Chunk, ResponseInfo};
use crate::sse::SseEvent;
use crate::structure::{Format, Structure};

#[derive(Debug)]
pub struct Tgi;

impl Backend for Tgi {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut parameters = Map::new();
        parameters.insert("max_new_tokens".into(), Value::from(prompt.max_tokens));
        parameters.insert("details".into(), Value::Bool(true));
        for (key, value) in &target.sampling {
            match (key.as_str(), value.as_f64()) {
                ("temperature", Some(t)) if t <= 0.0 => {
                    parameters.insert("do_sample".into(), Value::Bool(false));
                }
                ("top_p", Some(p)) if p >= 1.0 => {}
                (
                    "temperature" | "top_p" | "top_k" | "repetition_penalty" | "frequency_penalty",
                    _,
                ) => {
                    parameters.insert(key.clone(), value.clone());
                }
                ("stop", _) => {
                    parameters.insert("stop".into(), value.clone());
                }
                _ => {} // min_p, presence_penalty: not TGI parameters
            }
        }
        let mut body = Map::new();
        body.insert("inputs".into(), Value::from(prompt.text.as_str()));
        body.insert("parameters".into(), Value::Object(parameters));
        body.extend(target.extra_body.clone());
        RequestSpec::json(Value::Object(body))
    }

    /// TGI's `grammar` (`{"type": "json", "value": schema}`) in the parameters; its
    /// `/generate_stream` takes no tools (its OpenAI chat route does: `openai-chat`).
    fn structure(
        &self,
        body: &mut Map<String, Value>,
        structure: &Structure,
    ) -> Result<(), String> {
        if !structure.tools.is_empty() || structure.tool_choice.is_some() {
            return Err("TGI's /generate_stream takes no tools: use backend = \"tgi-chat\" (its /v1/chat/completions)".into());
        }
        let schema = match &structure.response_format {
            None => return Ok(()),
            Some(Format::JsonObject) => serde_json::json!({ "type": "object" }),
            Some(Format::JsonSchema { schema, .. }) => schema.json.clone(),
        };
        if let Some(Value::Object(parameters)) = body.get_mut("parameters") {
            parameters.insert(
                "grammar".into(),
                serde_json::json!({ "type": "json", "value": schema }),
            );
        }
        Ok(())
    }

    /// TGI rejects `temperature: 0`: greedy is `do_sample: false`, its default.
    fn greedy(&self, body: &mut Map<String, Value>, greedy: &Greedy) {
        if !greedy.pinned {
            return;
        }
        if let Some(Value::Object(parameters)) = body.get_mut("parameters") {
            for key in ["temperature", "top_p", "top_k", "typical_p"] {
                parameters.remove(key);
            }
            parameters.insert("do_sample".into(), Value::Bool(false));
            parameters.insert("seed".into(), Value::from(greedy.seed));
        }
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(TgiParser)
    }
}

#[derive(Deserialize)]
struct WireEvent {
    #[serde(default)]
    token: Option<WireToken>,
    #[serde(default)]
    generated_text: Option<String>,
    #[serde(default)]
    details: Option<WireDetails>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    error_type: Option<String>,
}

#[derive(Deserialize)]
struct WireToken {
    #[serde(default)]
    text: String,
    #[serde(default)]
    special: bool,
}

#[derive(Deserialize)]
struct WireDetails {
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    generated_tokens: Option<u64>,
    #[serde(default)]
    input_length: Option<u64>,
}

struct TgiParser;

impl StreamParser for TgiParser {
    fn on_event(
        &mut self,
        event: &SseEvent,
        info: &mut ResponseInfo,
    ) -> Result<StreamEvent, ProbeError> {
        let data = match super::payload(event)? {
            Payload::Done => return Ok(StreamEvent::Done(Chunk::default())),
            Payload::Json(data) => data,
        };
        let wire: WireEvent = serde_json::from_str(data)
            .map_err(|e| ProbeError::InvalidResponse(format!("bad TGI event: {e}")))?;
        if let Some(error) = wire.error.filter(|e| !e.is_null()) {
            let kind = wire.error_type.unwrap_or_else(|| "error".into());
            return Err(ProbeError::StreamErrorEvent(format!(
                "{kind}: {}",
                error_message(&error)
            )));
        }
        // Each event is one generated token; the EOS token is marked special. A token with
        // empty text is one whose bytes TGI holds back (part of a character): it arrived,
        // but nothing is visible yet, so it is no first token.
        let token = wire.token.filter(|t| !t.special);
        let has_output = token.as_ref().is_some_and(|t| !t.text.is_empty());
        let empty_delta = token.as_ref().is_some_and(|t| t.text.is_empty());
        if let Some(token) = token {
            info.text.push_str(&token.text);
        }
        let finished = wire.generated_text.is_some();
        let details = wire.details.unwrap_or(WireDetails {
            finish_reason: None,
            generated_tokens: None,
            input_length: None,
        });
        if let Some(reason) = details.finish_reason {
            info.finish_reason = Some(reason);
        } else if finished && info.finish_reason.is_none() {
            info.finish_reason = Some("unknown".into());
        }
        Ok(StreamEvent::Chunk(Chunk {
            has_output,
            empty_delta,
            completion_tokens: details.generated_tokens,
            prompt_tokens: details.input_length,
            finished,
            ..Chunk::default()
        }))
    }
}
