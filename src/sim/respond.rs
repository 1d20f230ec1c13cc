//! The simulator's answers that are not a stream: the status faults and refusals (in
//! the dialect's error shape, worded as vLLM words them), a non-streamed body, and the
//! JSON and error helpers.

use bytes::Bytes;
use futures_util::stream;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full, StreamBody};
use serde_json::json;
use tokio::time::{Instant, sleep_until};

use super::faults::Fault;
use super::request::{Dialect, SimRequest};
use super::{Body, SimConfig, plan, render};

/// As vLLM answers when the model's chat template raises on a conversation it cannot
/// render (a Jinja `TemplateError`, its `__cause__` appended): templates without tool
/// support refuse an assistant message with `tool_calls` or a `tool` message this way.
pub const HISTORY_REJECTED: &str =
    "Conversation roles must alternate user/assistant/user/assistant/... None";

/// The response a status fault or a refusal before generation makes, if any: a
/// gateway's 429, a 500, a 401, the `context_length` fault, a rejected schema, a
/// history with tool calls the template cannot render.
pub fn refusal(
    request: &SimRequest,
    fault: Option<Fault>,
    credential: &str,
) -> Option<Response<Body>> {
    let dialect = request.dialect;
    Some(match fault? {
        Fault::Http429 => {
            let mut response = error(StatusCode::TOO_MANY_REQUESTS, "simulated rate limit");
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            response
        }
        Fault::Http500 => error(StatusCode::INTERNAL_SERVER_ERROR, "simulated server error"),
        // Anthropic's body, whatever the dialect: gateways in front of it pass it on.
        Fault::Http529 => {
            let mut response = Response::new(full(Bytes::from(super::faults::OVERLOADED)));
            *response.status_mut() =
                StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            response
        }
        Fault::Http401 => {
            let message = format!("simulated invalid API key: {credential}");
            error(StatusCode::UNAUTHORIZED, &message)
        }
        // As vLLM words a prompt over its window: a window half the prompt.
        Fault::ContextLength => {
            let window = (request.prompt_tokens / 2).max(1);
            let message = format!(
                "This model's maximum context length is {window} tokens. However, your prompt contains at least {} input tokens, which exceeds this limit even without any output tokens.",
                request.prompt_tokens
            );
            bad_request(dialect, &message)
        }
        // As xgrammar refused `minItems` (vLLM #16880).
        Fault::SchemaRejected if request.structure.is_some() => bad_request(
            dialect,
            "the JSON schema uses an unsupported keyword: minItems",
        ),
        Fault::HistoryReject if request.conversation.has_calls => {
            bad_request(dialect, HISTORY_REJECTED)
        }
        _ => return None,
    })
}

/// vLLM's 400 for a request whose prompt and `max_tokens` exceed `--max-model-len`.
pub fn beyond_window(request: &SimRequest, window: Option<u64>) -> Option<Response<Body>> {
    let window = window?;
    let (prompt, completion) = (request.prompt_tokens, request.max_tokens);
    let requested = prompt.saturating_add(completion);
    (requested > window).then(|| {
        let message = format!(
            "This model's maximum context length is {window} tokens. However, you requested {requested} tokens ({prompt} in the messages, {completion} in the completion). Please reduce the length of the messages or completion."
        );
        bad_request(request.dialect, &message)
    })
}

/// A non-streamed response (completions, chat, embeddings), faults included: an error
/// object in a 200, a reset, a stall, a truncated or empty body.
pub async fn whole(
    request: &SimRequest,
    config: &SimConfig,
    fault: Option<Fault>,
    arrival: Instant,
) -> Response<Body> {
    if !matches!(
        request.dialect,
        Dialect::Completions | Dialect::Chat | Dialect::Embeddings
    ) {
        return error(StatusCode::BAD_REQUEST, "this endpoint only streams");
    }
    let (mut delay, body) = plan::whole_response(request, config);
    if matches!(fault, Some(Fault::Stall | Fault::TtftStall)) {
        delay += config.stall;
    }
    sleep_until(arrival + delay).await;
    let bytes = match fault {
        Some(Fault::ErrorEvent) => {
            json!({"error": {"message": "simulated failure", "type": "InternalServerError", "code": 500}}).to_string()
        }
        Some(Fault::OverloadedEvent) => super::faults::OVERLOADED.to_string(),
        Some(Fault::MalformedJson) => body.to_string()[..8].to_owned(),
        Some(Fault::NoDone | Fault::Empty) => String::new(),
        Some(Fault::Reset) => {
            let failing = stream::once(async { Err(std::io::Error::other("simulated connection reset")) });
            return Response::new(BodyExt::boxed_unsync(StreamBody::new(failing)));
        }
        _ => body.to_string(),
    };
    let mut response = Response::new(full(Bytes::from(bytes)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

pub fn full(bytes: Bytes) -> Body {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

pub fn json_response(status: StatusCode, value: serde_json::Value) -> Response<Body> {
    let mut response = Response::new(full(Bytes::from(value.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// A 400 in the dialect's own error format.
pub fn bad_request(dialect: Dialect, message: &str) -> Response<Body> {
    json_response(
        StatusCode::BAD_REQUEST,
        render::bad_request(dialect, message),
    )
}

/// An OpenAI-shaped error body.
pub fn error(status: StatusCode, message: &str) -> Response<Body> {
    let body =
        json!({"error": {"message": message, "type": "SimulatedError", "code": status.as_u16()}});
    json_response(status, body)
}
