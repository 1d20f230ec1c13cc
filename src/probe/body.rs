//! Response bodies the probe reads but does not measure: an error response's body (for the
//! log line), a 2xx that is not an event stream, and the tail after `[DONE]` (read only so
//! the connection can be reused). Each is bounded in size and time.

use tokio::time::{Instant, timeout_at};

use crate::error::ProbeError;

/// Error bodies and non-SSE bodies are read up to this size, for the log line.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Read up to [`MAX_ERROR_BODY`] bytes before `deadline`; whatever arrived is returned.
pub(super) async fn read_capped(mut response: reqwest::Response, deadline: Instant) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        match timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(bytes))) => body.extend_from_slice(&bytes),
            _ => break,
        }
    }
    body.truncate(MAX_ERROR_BODY);
    body
}

pub(super) async fn drain(response: &mut reqwest::Response) {
    let mut seen = 0;
    while seen < MAX_ERROR_BODY {
        match response.chunk().await {
            Ok(Some(bytes)) => seen += bytes.len(),
            _ => return,
        }
    }
}

/// A 2xx that is not an event stream: an error object (some servers answer errors with
/// 200 JSON) or a response the probe cannot use.
pub(super) fn non_stream_error(expected: &str, content_type: &str, body: &[u8]) -> ProbeError {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) {
        if let Some(error) = crate::backend::json_error(&json) {
            return error;
        }
    }
    ProbeError::InvalidResponse(format!(
        "expected {expected}, got content-type `{content_type}`"
    ))
}

/// The error message of an error response body, or a snippet of it.
/// Understands `{"error": …}` (OpenAI, vLLM, Anthropic), `{"message": …}` (MII) and
/// SSE-framed errors (Triton's first-response failures).
pub(super) fn describe_body(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let json = text.trim().strip_prefix("data:").unwrap_or(&text);
    match serde_json::from_str::<serde_json::Value>(json.trim()) {
        Ok(json) => crate::backend::error_message(json.get("error").unwrap_or(&json)),
        Err(_) => crate::error::snippet(&text),
    }
}
