//! Incremental decoder of the AWS event stream (`application/vnd.amazon.eventstream`), the
//! binary framing Amazon Bedrock streams in: each message is a prelude (total length,
//! headers length, the prelude's CRC32), typed headers, a payload, and the message's CRC32.
//!
//! It owns turning any split of response bytes into whole messages, and hands each to the
//! backends as the [`SseEvent`] its SSE twin would be, so one parser trait reads both
//! framings: an `event` message is its `:event-type` with its payload as data; an
//! `exception` message is [`EXCEPTION`] + its `:exception-type`; an `error` message is an
//! `error` event (failed as `stream_error_event` by every parser). The message itself is
//! read by AWS's own decoder (aws-smithy-eventstream) on exactly its bytes. The prelude is
//! checked here first, so a corrupted length is caught at once instead of leaving the
//! probe waiting for gigabytes that never come; a message over `max_event_bytes` is
//! `too_large`; a CRC mismatch or any other malformed frame is `invalid_response`.

use aws_smithy_eventstream::frame::read_message_from;
use aws_smithy_types::event_stream::{HeaderValue, Message};

use crate::sse::SseEvent;

/// What an exception message's event type starts with (event types never hold a `/`).
pub const EXCEPTION: &str = "exception/";

/// Prelude (two lengths and a CRC) and the trailing message CRC.
const PRELUDE: usize = 12;
const OVERHEAD: usize = PRELUDE + 4;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("an event-stream frame failed its check: {0}")]
    Corrupt(String),
    #[error("an event-stream message of {size} bytes exceeded {limit} bytes")]
    TooLarge { size: usize, limit: usize },
}

pub struct EventStreamDecoder {
    buffer: Vec<u8>,
    max_message_bytes: usize,
}

impl EventStreamDecoder {
    pub fn new(max_message_bytes: usize) -> Self {
        Self {
            buffer: Vec::new(),
            max_message_bytes,
        }
    }

    /// Feed one read; every message it completes is appended to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), FrameError> {
        self.buffer.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(length) = self.complete_message(start)? {
            let frame = &self.buffer[start..start + length];
            let message =
                read_message_from(frame).map_err(|e| FrameError::Corrupt(e.to_string()))?;
            out.push(event(&message)?);
            start += length;
        }
        self.buffer.drain(..start);
        Ok(())
    }

    /// Bytes of a message that has not ended: the stream was cut inside it.
    pub fn has_partial_message(&self) -> bool {
        !self.buffer.is_empty()
    }

    /// The length of the message at `start` once all of it is buffered; its prelude is
    /// checked as soon as it is.
    fn complete_message(&self, start: usize) -> Result<Option<usize>, FrameError> {
        let rest = &self.buffer[start..];
        let Some(prelude) = rest.get(..PRELUDE) else {
            return Ok(None);
        };
        let word = |at: usize| {
            u32::from_be_bytes([
                prelude[at],
                prelude[at + 1],
                prelude[at + 2],
                prelude[at + 3],
            ])
        };
        let (total, headers, crc) = (word(0) as usize, word(4) as usize, word(8));
        if crc32fast::hash(&prelude[..8]) != crc {
            return Err(FrameError::Corrupt(format!(
                "the prelude's CRC32 is {crc:#010x}, its bytes give {:#010x}",
                crc32fast::hash(&prelude[..8])
            )));
        }
        if total < OVERHEAD || headers > total - OVERHEAD {
            return Err(FrameError::Corrupt(format!(
                "a message of {total} bytes cannot hold {headers} bytes of headers"
            )));
        }
        if total > self.max_message_bytes {
            return Err(FrameError::TooLarge {
                size: total,
                limit: self.max_message_bytes,
            });
        }
        Ok((rest.len() >= total).then_some(total))
    }
}

fn header<'a>(message: &'a Message, name: &str) -> Option<&'a str> {
    message
        .headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| match h.value() {
            HeaderValue::String(s) => Some(s.as_str()),
            _ => None,
        })
}

/// The event a message is to the parsers.
fn event(message: &Message) -> Result<SseEvent, FrameError> {
    let payload = std::str::from_utf8(message.payload())
        .map_err(|_| FrameError::Corrupt("a payload that is not UTF-8".into()))?;
    let kind = match header(message, ":message-type") {
        Some("event") => header(message, ":event-type")
            .ok_or_else(|| FrameError::Corrupt("an event without `:event-type`".into()))?
            .to_owned(),
        Some("exception") => {
            format!(
                "{EXCEPTION}{}",
                header(message, ":exception-type").unwrap_or("unknown")
            )
        }
        Some("error") => {
            let code = header(message, ":error-code").unwrap_or("unknown");
            let text = header(message, ":error-message").unwrap_or("");
            let data = serde_json::json!({ "code": code, "message": text }).to_string();
            return Ok(sse("error".into(), data));
        }
        other => {
            return Err(FrameError::Corrupt(format!(
                "a message of type {:?}",
                other.unwrap_or("(none)")
            )));
        }
    };
    Ok(sse(kind, payload.to_owned()))
}

fn sse(kind: String, data: String) -> SseEvent {
    SseEvent {
        event: Some(kind),
        data,
        id: None,
    }
}

#[cfg(test)]
mod tests;
