//! What a probe does with each read of a streamed response: decode SSE, enforce the byte and
//! event limits, let the backend's parser read each event, and stamp the record. Kept apart
//! from the network loop in [`super::Prober`] so the fuzz drivers run this exact code on
//! bytes they make up, rather than a copy of it.

use tokio::time::Instant;

use crate::backend::{Backend, Framing, StreamEvent, StreamParser};
use crate::endpoint::Limits;
use crate::error::ProbeError;
use crate::eventstream::{EventStreamDecoder, FrameError};
use crate::record::RequestRecord;
use crate::sse::{SseDecoder, SseError, SseEvent};

pub struct StreamReader {
    limits: Limits,
    decoder: Decoder,
    parser: Box<dyn StreamParser>,
    events: Vec<SseEvent>,
    /// The body's first bytes until an event is dispatched: what to quote when a body sent
    /// as `text/event-stream` holds none.
    head: Vec<u8>,
}

/// The framing's decoder: both give [`SseEvent`]s.
enum Decoder {
    Sse(SseDecoder),
    EventStream(EventStreamDecoder),
}

impl Decoder {
    fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ProbeError> {
        match self {
            Self::Sse(d) => d.push(bytes, out).map_err(|e| match e {
                SseError::InvalidUtf8 { .. } => ProbeError::InvalidResponse(e.to_string()),
                SseError::TooLarge { .. } => ProbeError::TooLarge(e.to_string()),
            }),
            Self::EventStream(d) => d.push(bytes, out).map_err(|e| match e {
                FrameError::Corrupt(_) => ProbeError::InvalidResponse(e.to_string()),
                FrameError::TooLarge { .. } => ProbeError::TooLarge(e.to_string()),
            }),
        }
    }

    fn has_partial_event(&self) -> bool {
        match self {
            Self::Sse(d) => d.has_partial_event(),
            Self::EventStream(d) => d.has_partial_message(),
        }
    }
}

/// How much of a body's start is kept to quote.
const HEAD_BYTES: usize = 256;

impl StreamReader {
    pub fn new(backend: &dyn Backend, limits: Limits) -> Self {
        Self {
            limits,
            decoder: match backend.framing() {
                Framing::Sse => Decoder::Sse(SseDecoder::new(limits.max_event_bytes)),
                Framing::EventStream => {
                    Decoder::EventStream(EventStreamDecoder::new(limits.max_event_bytes))
                }
            },
            parser: backend.stream_parser(),
            events: Vec::new(),
            head: Vec::new(),
        }
    }

    /// One read that arrived at `now`; every event it completes shares that instant.
    /// `Ok(true)` once the stream's terminal event arrived: the measurement is final.
    pub fn read(
        &mut self,
        now: Instant,
        bytes: &[u8],
        record: &mut RequestRecord,
    ) -> Result<bool, ProbeError> {
        record.bytes += bytes.len() as u64;
        if record.events == 0 && self.head.len() < HEAD_BYTES {
            let room = HEAD_BYTES - self.head.len();
            self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        if record.bytes > self.limits.max_response_bytes {
            let max = self.limits.max_response_bytes;
            return Err(ProbeError::TooLarge(format!(
                "response exceeded {max} bytes"
            )));
        }
        self.decoder.push(bytes, &mut self.events)?;
        if record.events + self.events.len() as u64 > self.limits.max_events {
            let max = self.limits.max_events;
            return Err(ProbeError::TooLarge(format!(
                "response exceeded {max} events"
            )));
        }
        for event in self.events.drain(..) {
            record.events += 1;
            match self.parser.on_event(&event, &mut record.response)? {
                StreamEvent::KeepAlive => {}
                StreamEvent::Chunk(chunk) => {
                    record.progress += 1;
                    record.on_chunk(now, chunk);
                }
                StreamEvent::Done(chunk) => {
                    record.on_chunk(now, chunk);
                    record.done = true;
                    record.end = Some(now);
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The body ended at `now`. An unterminated trailing event is dropped (as the SSE spec
    /// says), and the stream was cut inside it: whatever was dispatched before, it did not
    /// end properly. A body that held no SSE at all (an HTML error page a proxy sent as
    /// `text/event-stream` with a 200) is an invalid response, not an interrupted stream.
    pub fn end(mut self, now: Instant, record: &mut RequestRecord) -> Result<(), ProbeError> {
        record.end = Some(now);
        let sse = matches!(self.decoder, Decoder::Sse(_));
        if sse && record.events == 0 && !looks_like_sse(&self.head) {
            let head = String::from_utf8_lossy(&self.head);
            return Err(ProbeError::InvalidResponse(format!(
                "a text/event-stream body that is not SSE: {:?}",
                crate::error::snippet(head.trim())
            )));
        }
        if self.decoder.has_partial_event() {
            record.cut_mid_event = true;
            return Ok(());
        }
        if let Some(StreamEvent::Done(chunk)) = self.parser.on_eof() {
            record.on_chunk(now, chunk);
            record.done = true;
        }
        Ok(())
    }
}

/// Whether a body's start reads as SSE: empty, or its first line a comment or a field
/// (`data`, `event`, `id`, `retry`, and llama.cpp's `error`), with or without a value.
fn looks_like_sse(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let Some(line) = text.lines().map(str::trim_end).find(|l| !l.is_empty()) else {
        return true;
    };
    let line = line.trim_start_matches('\u{feff}');
    let field = line.split(':').next().unwrap_or("");
    line.starts_with(':') || matches!(field, "data" | "event" | "id" | "retry" | "error")
}
