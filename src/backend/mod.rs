//! Wire formats: one [`Backend`] trait, one file per format.
//!
//! A backend builds a probe's request and reads its response: event by event for streams
//! ([`StreamParser`]), or whole for non-streamed APIs. It knows nothing about time: the probe
//! stamps arrival instants and [`crate::record`] derives the measurements, so every format
//! is measured by the same rules. Each format's success rule and error events map into the
//! closed error categories here, at the edge.

mod anthropic;
mod anthropic_vertex;
mod audio;
mod bedrock;
mod bedrock_invoke;
mod embeddings;
mod gemini;
pub(crate) mod history;
mod mii;
mod openai;
mod openai_chat;
mod openai_wire;
mod responses;
pub mod sampled;
mod tgi;
mod trtllm;

use std::fmt;
use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use serde_json::Value;

pub use crate::endpoint::BackendKind;
use crate::endpoint::{Secret, Target};
use crate::error::ProbeError;
use crate::prompt::{Greedy, Prompt};
use crate::record::{Chunk, ResponseInfo, WholeBody};
use crate::sse::SseEvent;
use crate::structure::Structure;

use crate::error::snippet;
pub use audio::wav;
pub(crate) use openai_wire::error_message;

/// How a wire format's [`Backend`] is found.
impl BackendKind {
    pub fn backend(self) -> Arc<dyn Backend> {
        match self {
            Self::OpenAi => Arc::new(openai::OpenAiCompletions),
            Self::OpenAiChat => Arc::new(openai_chat::OpenAiChat),
            Self::Tgi => Arc::new(tgi::Tgi),
            Self::TgiChat => Arc::new(openai_chat::TgiChat),
            Self::TensorRtLlm => Arc::new(trtllm::TensorRtLlm),
            Self::DeepSpeedMii => Arc::new(mii::DeepSpeedMii),
            Self::OpenAiEmbeddings => Arc::new(embeddings::Embeddings),
            Self::OpenAiAudio => Arc::new(audio::Transcriptions),
            Self::Anthropic => Arc::new(anthropic::Anthropic),
            Self::OpenAiResponses => Arc::new(responses::Responses),
            Self::Bedrock => Arc::new(bedrock::Converse),
            Self::AnthropicBedrock => Arc::new(bedrock_invoke::AnthropicInvoke),
            Self::Gemini | Self::VertexGemini => Arc::new(gemini::Gemini),
            Self::AnthropicVertex => Arc::new(anthropic_vertex::AnthropicVertex),
            Self::AzureOpenAi => Arc::new(openai_chat::AzureOpenAi),
        }
    }
}

/// What one probe sends, beyond the URL and the target's own headers.
#[derive(Debug)]
pub struct RequestSpec {
    pub body: RequestBody,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

#[derive(Debug)]
pub enum RequestBody {
    Json(Value),
    Multipart(reqwest::multipart::Form),
}

impl RequestSpec {
    pub fn json(body: Value) -> Self {
        Self {
            body: RequestBody::Json(body),
            headers: Vec::new(),
        }
    }
}

/// What one event of a response stream means for the probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    /// A data event: what it carried (possibly nothing, e.g. a role-only chunk).
    Chunk(Chunk),
    /// The end of the stream (`[DONE]`, `message_stop`, `response.completed`…), with
    /// whatever the final event carried (usage, finish reason).
    Done(Chunk),
    /// A keep-alive (Anthropic's `ping`): the connection lives, the generation made no
    /// progress, so it does not push the stall deadline back.
    KeepAlive,
}

/// How a stream's bytes are cut into events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Server-Sent Events (`text/event-stream`): every API but Bedrock's.
    Sse,
    /// The AWS event stream (`application/vnd.amazon.eventstream`), read by
    /// [`crate::eventstream`] into the same events.
    EventStream,
}

impl Framing {
    /// The content type a stream in this framing arrives as.
    pub const fn content_type(self) -> &'static str {
        match self {
            Self::Sse => "text/event-stream",
            Self::EventStream => "application/vnd.amazon.eventstream",
        }
    }
}

pub trait Backend: Send + Sync + fmt::Debug {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec;

    /// How the response stream is framed.
    fn framing(&self) -> Framing {
        Framing::Sse
    }

    /// A parser for one response stream. Stateless formats return a zero-sized parser,
    /// so this costs no allocation; stateful ones keep per-stream state here.
    fn stream_parser(&self) -> Box<dyn StreamParser>;

    /// Read a non-streamed response body (only called when the kind does not stream).
    fn parse_body(
        &self,
        body: &[u8],
        target: &Target,
        info: &mut ResponseInfo,
    ) -> Result<WholeBody, ProbeError> {
        let _ = (body, target, info);
        Err(ProbeError::Other("this backend streams".into()))
    }

    /// Whether responses report each token's logprobs (and alternatives) when asked: what
    /// a correctness canary compares. Formats without them run known-answer prompts only.
    fn reports_logprobs(&self) -> bool {
        false
    }

    /// Make a built request body a canary's: greedy and reproducible when `pinned`, asking
    /// for logprobs where the format reports them. Applied after `extra_body`, so it wins;
    /// unpinned (a structured prompt), only the workload's length settings are removed.
    fn greedy(&self, body: &mut serde_json::Map<String, Value>, greedy: &Greedy) {
        if !greedy.pinned {
            return;
        }
        body.insert("temperature".into(), Value::from(0));
        body.remove("top_p");
        body.remove("top_k");
    }

    /// Spell `structure` (a JSON answer, or tools to call) in this format's request body,
    /// or say why the format cannot ask for it (`inferprobe check` refuses it then).
    fn structure(
        &self,
        body: &mut serde_json::Map<String, Value>,
        structure: &Structure,
    ) -> Result<(), String> {
        let _ = (body, structure);
        Err("this API has no way to ask for a JSON answer or a tool call".into())
    }

    /// Say whether the reply may hold several tool calls, after `structure` spelled the
    /// tools: OpenAI's `parallel_tool_calls` unless the format says otherwise.
    fn parallel_calls(&self, body: &mut serde_json::Map<String, Value>, allowed: bool) {
        body.insert("parallel_tool_calls".into(), Value::Bool(allowed));
    }

    /// A non-2xx answer this API's own error header names better than its status (Bedrock's
    /// `x-amzn-ErrorType`); `None`: the status decides.
    fn status_error(&self, headers: &http::HeaderMap, body: &str) -> Option<ProbeError> {
        let _ = (headers, body);
        None
    }

    /// Headers carrying the API key: a Bearer token unless the API says otherwise.
    fn authorize(&self, key: &Secret) -> Vec<(HeaderName, HeaderValue)> {
        match HeaderValue::from_str(&format!("Bearer {}", key.expose())) {
            Ok(mut value) => {
                value.set_sensitive(true);
                vec![(http::header::AUTHORIZATION, value)]
            }
            // Keys are checked for header-safe characters at config time.
            Err(_) => Vec::new(),
        }
    }
}

pub trait StreamParser: Send {
    /// Interpret one SSE event, appending output text and metadata to `info`. An error
    /// event or a malformed payload is an `Err` carrying its category.
    fn on_event(
        &mut self,
        event: &SseEvent,
        info: &mut ResponseInfo,
    ) -> Result<StreamEvent, ProbeError>;

    /// The body ended cleanly. Formats with no end marker (Triton) say the stream is done.
    fn on_eof(&mut self) -> Option<StreamEvent> {
        None
    }
}

/// The error class of a provider shedding load (Anthropic's, also in an OpenAI-shaped
/// `{"error": …}` from gateways in front of it): `overloaded`, not the server's failure.
const OVERLOADED: &str = "overloaded_error";

/// What an event's data is, once the steps every stream format shares have run.
pub(crate) enum Payload<'a> {
    /// The `[DONE]` sentinel (OpenAI's end marker; other formats tolerate it).
    Done,
    /// A payload that looks like a JSON object, trimmed: the format parses it.
    Json(&'a str),
}

/// The first step of every stream parser, so a rule about the framing is written once:
/// an error event (`event: error`, and llama.cpp's `error:` field lines, which the SSE
/// decoder dispatches as such) fails the probe as `stream_error_event` whatever its data
/// is; `[DONE]` ends the stream; anything else must be a JSON object.
pub(crate) fn payload(event: &SseEvent) -> Result<Payload<'_>, ProbeError> {
    if event.kind() == "error" {
        let message = match serde_json::from_str::<Value>(&event.data) {
            Ok(value) => {
                let error = value
                    .get("error")
                    .filter(|e| !e.is_null())
                    .unwrap_or(&value);
                // Anthropic's class (`overloaded_error`) says more than its message; the
                // Responses API puts it in `code`.
                if error.get("code").and_then(Value::as_str) == Some(OVERLOADED) {
                    return Err(ProbeError::Overloaded(error_message(error)));
                }
                match error.get("type").and_then(Value::as_str) {
                    Some(OVERLOADED) => return Err(ProbeError::Overloaded(error_message(error))),
                    Some(class) if class != "error" => format!("{class}: {}", error_message(error)),
                    _ => error_message(error),
                }
            }
            Err(_) => snippet(event.data.trim()),
        };
        return Err(ProbeError::StreamErrorEvent(message));
    }
    let data = event.data.trim();
    if data == "[DONE]" {
        return Ok(Payload::Done);
    }
    if !data.starts_with('{') {
        return Err(ProbeError::InvalidResponse(format!(
            "event data is not a JSON object: {}",
            snippet(data)
        )));
    }
    Ok(Payload::Json(data))
}

/// The server's error, when a JSON body or event *is* one: `{"error": …}` (OpenAI, vLLM,
/// TGI, Triton) or vLLM's older bare `{"object": "error", "message": …}`. The same error
/// is the same category whether it came as an event or as a whole 200 body.
pub(crate) fn json_error(value: &Value) -> Option<ProbeError> {
    let map = value.as_object()?;
    match map.get("error") {
        Some(error) if !error.is_null() => Some(server_error(error)),
        _ if map.get("object").and_then(Value::as_str) == Some("error") => {
            Some(ProbeError::StreamErrorEvent(error_message(value)))
        }
        _ => None,
    }
}

/// The server's error object (the value of `{"error": …}`) inside a 2xx response:
/// `overloaded` where its type says the provider is shedding load, else the server's own
/// error event.
pub(crate) fn server_error(error: &Value) -> ProbeError {
    // Its `type` (OpenAI's and Anthropic's shape), or its `code` (the Responses API's).
    let said = |key: &str| error.get(key).and_then(Value::as_str) == Some(OVERLOADED);
    match said("type") || said("code") {
        true => ProbeError::Overloaded(error_message(error)),
        false => ProbeError::StreamErrorEvent(error_message(error)),
    }
}

/// Parse an event's data as a JSON object, or fail as `invalid_response`.
pub(crate) fn json_object(data: &str) -> Result<serde_json::Map<String, Value>, ProbeError> {
    match serde_json::from_str::<Value>(data) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ProbeError::InvalidResponse(format!(
            "event data is not a JSON object: {}",
            snippet(data)
        ))),
        Err(e) => Err(ProbeError::InvalidResponse(format!("bad event JSON: {e}"))),
    }
}

/// A non-negative integer field, `None` when absent or null, an error when malformed.
pub(crate) fn count_field(value: Option<&Value>, name: &str) -> Result<Option<u64>, ProbeError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            ProbeError::InvalidResponse(format!("`{name}` is not a token count: {v}"))
        }),
    }
}

/// A tool call's header (Anthropic's `tool_use` content block, a Responses
/// `function_call` item): `item` of type `kind` names the function, and that name is
/// generated output, as chat's first `tool_calls` delta is; the arguments follow as
/// deltas, for the call at `slot` (the block's or item's index). Whether `item` was one
/// (its name then goes to `info.other_text` and a call opens at `slot`).
pub(crate) fn tool_call_header(
    item: Option<&Value>,
    kind: &str,
    slot: Option<&Value>,
    info: &mut ResponseInfo,
) -> bool {
    let Some(item) = item.filter(|i| i.get("type").and_then(Value::as_str) == Some(kind)) else {
        return false;
    };
    let name = item.get("name").and_then(Value::as_str).unwrap_or("");
    info.other_text.push_str(name);
    let call = info.tool_call(slot.and_then(Value::as_u64).unwrap_or(0));
    call.name.push_str(name);
    // What the result must name: a Responses item's `call_id` (its `id` is the item's),
    // an Anthropic block's `id`.
    let id = item.get("call_id").or_else(|| item.get("id"));
    if let (None, Some(id)) = (&call.id, id.and_then(Value::as_str)) {
        call.id = Some(id.to_owned());
    }
    // Anthropic's block carries `input: {}` (the deltas replace it), a Responses item
    // `arguments: ""`: a call that streams no argument delta keeps what the header said.
    match item.get("input").or_else(|| item.get("arguments")) {
        Some(Value::String(args)) => call.arguments.push_str(args),
        Some(input @ Value::Object(_)) => {
            call.arguments = input.to_string();
            call.provisional = true;
        }
        _ => {}
    }
    true
}

/// Sampling parameters and `extra_body`, the parts every JSON body shares.
pub(crate) fn finish_body(mut body: serde_json::Map<String, Value>, target: &Target) -> Value {
    body.extend(target.sampling.clone());
    body.extend(target.extra_body.clone());
    Value::Object(body)
}

#[cfg(test)]
mod tests;
