//! `backend = "tensorrt-llm"`: TensorRT-LLM behind Triton's generate extension,
//! `POST /v2/models/<model>/generate_stream`.
//!
//! Each `data:` event is a flat object whose `text_output` is the new text (the standard
//! ensemble streams deltas). There is no `[DONE]` and no finish marker: a clean end of the
//! chunked body *is* the end of the stream. Errors are `{"error": "…"}` events. Triton
//! reports no token counts, so output tokens come from a tokenizer when one is configured,
//! else from the number of events.

use serde_json::{Map, Value};

use super::{Backend, Payload, RequestSpec, StreamEvent, StreamParser, finish_body};
use crate::endpoint::Target;
use crate::error::ProbeError;
use crate::prompt::{Greedy, Prompt};
use crate::record::{Chunk, ResponseInfo};
use crate::sse::SseEvent;

#[derive(Debug)]
pub struct TensorRtLlm;

impl Backend for TensorRtLlm {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut body = Map::new();
        body.insert("text_input".into(), Value::from(prompt.text.as_str()));
        body.insert("max_tokens".into(), Value::from(prompt.max_tokens));
        body.insert("stream".into(), Value::Bool(true));
        if target.ignore_eos {
            // The ensemble input is `min_tokens` since May 2025 and `min_length` before;
            // Triton ignores keys that are not inputs of the deployed model.
            body.insert("min_tokens".into(), Value::from(prompt.max_tokens));
            body.insert("min_length".into(), Value::from(prompt.max_tokens));
        }
        RequestSpec::json(finish_body(body, target))
    }

    /// The ensemble's greedy setting is `top_k: 1`; no early-stop floor on a canary.
    fn greedy(&self, body: &mut Map<String, Value>, greedy: &Greedy) {
        for key in ["min_tokens", "min_length"] {
            body.remove(key);
        }
        if !greedy.pinned {
            return;
        }
        for key in ["top_p", "temperature"] {
            body.remove(key);
        }
        body.insert("top_k".into(), Value::from(1));
        body.insert("random_seed".into(), Value::from(greedy.seed));
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(TritonParser)
    }
}

struct TritonParser;

impl StreamParser for TritonParser {
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
        if let Some(error) = object.get("error").filter(|e| !e.is_null()) {
            return Err(super::server_error(error));
        }
        if let Some(Value::String(model)) = object.get("model_name") {
            if info.model.as_deref() != Some(model) {
                info.model = Some(model.clone());
            }
        }
        let text = match object.get("text_output") {
            Some(Value::String(text)) => text.as_str(),
            None | Some(Value::Null) => "",
            Some(other) => {
                return Err(ProbeError::InvalidResponse(format!(
                    "`text_output` is not a string: {other}"
                )));
            }
        };
        info.text.push_str(text);
        Ok(StreamEvent::Chunk(Chunk {
            has_output: !text.is_empty(),
            ..Chunk::default()
        }))
    }

    fn on_eof(&mut self) -> Option<StreamEvent> {
        Some(StreamEvent::Done(Chunk::default()))
    }
}
