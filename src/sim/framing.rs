//! Bedrock's streams in the AWS event stream: the events the renderers write as SSE,
//! re-framed message by message by the AWS SDK's own encoder (aws-smithy-eventstream).
//! `ConverseStream` events keep their names; InvokeModelWithResponseStream wraps each
//! Messages event as a `chunk` of base64 bytes; `exception/…` events are exceptions.

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use base64::Engine;
use bytes::Bytes;
use serde_json::json;

use super::request::Dialect;
use crate::eventstream::EXCEPTION;

pub fn is_bedrock(dialect: Dialect) -> bool {
    matches!(dialect, Dialect::BedrockConverse | Dialect::BedrockInvoke)
}

/// One write's SSE-shaped events as event-stream messages. Bytes that are not UTF-8 (the
/// `corrupt_frame` fault) become a frame with a flipped payload bit: its CRC fails.
pub fn framed(dialect: Dialect, bytes: Bytes) -> Bytes {
    if !is_bedrock(dialect) {
        return bytes;
    }
    let mut out = Vec::new();
    let Ok(text) = std::str::from_utf8(&bytes) else {
        write(
            &mut out,
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"text":"x"}}"#,
        );
        let last_payload_byte = out.len() - 5;
        out[last_payload_byte] ^= 0x01;
        return Bytes::from(out);
    };
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut name = None;
        let mut data = String::new();
        for line in block.lines() {
            if let Some(value) = line.strip_prefix("event: ") {
                name = Some(value);
            } else if let Some(value) = line.strip_prefix("data: ") {
                data.push_str(value);
            }
        }
        match (dialect, name) {
            (_, Some(name)) if name.starts_with(EXCEPTION) => write(&mut out, name, &data),
            (Dialect::BedrockInvoke, _) => {
                let bytes = base64::engine::general_purpose::STANDARD.encode(&data);
                write(&mut out, "chunk", &json!({ "bytes": bytes }).to_string());
            }
            (_, name) => write(&mut out, name.unwrap_or("contentBlockDelta"), &data),
        }
    }
    Bytes::from(out)
}

/// One message: an event, or an exception when `name` says so.
fn write(out: &mut Vec<u8>, name: &str, payload: &str) {
    let text = |s: &str| HeaderValue::String(s.to_owned().into());
    let (kind, name_header, name) = match name.strip_prefix(EXCEPTION) {
        Some(exception) => ("exception", ":exception-type", exception),
        None => ("event", ":event-type", name),
    };
    let message = Message::new(Bytes::from(payload.to_owned()))
        .add_header(Header::new(":message-type", text(kind)))
        .add_header(Header::new(name_header, text(name)))
        .add_header(Header::new(":content-type", text("application/json")));
    // Writing to a Vec fails only for a message over 4 GiB.
    let _ = write_message_to(&message, out);
}
