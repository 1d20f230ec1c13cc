//! `backend = "anthropic-bedrock"`: Anthropic's Messages API through Amazon Bedrock's
//! `InvokeModelWithResponseStream`, `POST /model/<model>/invoke-with-response-stream`,
//! SigV4-signed: the Messages body without `model` and `stream`, with
//! `anthropic_version: bedrock-2023-05-31`; each `chunk` event of the AWS event stream
//! carries one Messages event as base64 JSON, read by the Anthropic parser, so the same
//! model is measured by the same rules through either door. Bedrock's exceptions map as
//! in [`super::bedrock`].

use base64::Engine;
use serde_json::Value;

use super::anthropic::{Anthropic, MessagesParser};
use super::{Backend, Framing, RequestBody, RequestSpec, StreamEvent, StreamParser};
use crate::endpoint::Target;
use crate::error::ProbeError;
use crate::eventstream::EXCEPTION;
use crate::prompt::Prompt;
use crate::record::ResponseInfo;
use crate::sse::SseEvent;
use crate::structure::Structure;

/// The version Bedrock's Anthropic models take in the body.
pub const BEDROCK_VERSION: &str = "bedrock-2023-05-31";

#[derive(Debug)]
pub struct AnthropicInvoke;

impl Backend for AnthropicInvoke {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut spec = Anthropic.request(target, prompt);
        if let RequestBody::Json(Value::Object(body)) = &mut spec.body {
            body.remove("model");
            body.remove("stream");
            body.entry("anthropic_version")
                .or_insert_with(|| Value::from(BEDROCK_VERSION));
        }
        // The version goes in the body; Bedrock takes no `anthropic-version` header.
        spec.headers.clear();
        spec
    }

    fn framing(&self) -> Framing {
        Framing::EventStream
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(InvokeParser)
    }

    fn structure(
        &self,
        body: &mut serde_json::Map<String, Value>,
        structure: &Structure,
    ) -> Result<(), String> {
        Anthropic.structure(body, structure)
    }

    fn parallel_calls(&self, body: &mut serde_json::Map<String, Value>, allowed: bool) {
        Anthropic.parallel_calls(body, allowed);
    }

    fn status_error(&self, headers: &http::HeaderMap, body: &str) -> Option<ProbeError> {
        super::bedrock::http_error(headers, body)
    }
}

struct InvokeParser;

impl StreamParser for InvokeParser {
    fn on_event(
        &mut self,
        event: &SseEvent,
        info: &mut ResponseInfo,
    ) -> Result<StreamEvent, ProbeError> {
        if let Some(kind) = event.kind().strip_prefix(EXCEPTION) {
            return Err(super::bedrock::exception(kind, &event.data));
        }
        if event.kind() != "chunk" {
            return super::payload(event).map(|_| StreamEvent::Chunk(Default::default()));
        }
        let object = super::json_object(&event.data)?;
        let bytes = object
            .get("bytes")
            .and_then(Value::as_str)
            .ok_or_else(|| ProbeError::InvalidResponse("a `chunk` without `bytes`".into()))?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(bytes)
            .map_err(|e| {
                ProbeError::InvalidResponse(format!("a `chunk` whose bytes are not base64: {e}"))
            })?;
        let data = String::from_utf8(decoded)
            .map_err(|_| ProbeError::InvalidResponse("a `chunk` that is not UTF-8".into()))?;
        let inner: Value = serde_json::from_str(&data)
            .map_err(|e| ProbeError::InvalidResponse(format!("a `chunk` that is not JSON: {e}")))?;
        let kind = inner
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        let inner = SseEvent {
            event: Some(kind.to_owned()),
            data,
            id: None,
        };
        MessagesParser.on_event(&inner, info)
    }
}
