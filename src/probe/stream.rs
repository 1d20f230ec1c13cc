//! What a probe does with each read of a streamed response: decode SSE, enforce the byte and
//! event limits, let the backend's parser read each event, and stamp the record. Kept apart
//! from the network loop in [`super::Prober`] so the fuzz drivers run this exact code on
//! bytes they make up, rather than a copy of it.

use tokio::time::Instant;

use crate::backend::{Backend, StreamEvent, StreamParser};
use crate::error::ProbeError;
use crate::record::RequestRecord;
use crate::sse::{SseDecoder, SseError, SseEvent};
use crate::target::Limits;

pub struct StreamReader {
    limits: Limits,
    decoder: SseDecoder,
    parser: Box<dyn StreamParser>,
    events: Vec<SseEvent>,
}

impl StreamReader {
    pub fn new(backend: &dyn Backend, limits: Limits) -> Self {
        Self {
            limits,
            decoder: SseDecoder::new(limits.max_event_bytes),
            parser: backend.stream_parser(),
            events: Vec::new(),
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
        if record.bytes > self.limits.max_response_bytes {
            let max = self.limits.max_response_bytes;
            return Err(ProbeError::TooLarge(format!(
                "response exceeded {max} bytes"
            )));
        }
        self.decoder
            .push(bytes, &mut self.events)
            .map_err(|e| match e {
                SseError::InvalidUtf8 { .. } => ProbeError::InvalidResponse(e.to_string()),
                SseError::TooLarge { .. } => ProbeError::TooLarge(e.to_string()),
            })?;
        if record.events + self.events.len() as u64 > self.limits.max_events {
            let max = self.limits.max_events;
            return Err(ProbeError::TooLarge(format!(
                "response exceeded {max} events"
            )));
        }
        for event in self.events.drain(..) {
            record.events += 1;
            match self.parser.on_event(&event, &mut record.response)? {
                StreamEvent::Chunk(chunk) => record.on_chunk(now, chunk),
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
    /// says); whether the stream ended properly is decided from what was dispatched.
    pub fn end(mut self, now: Instant, record: &mut RequestRecord) {
        record.end = Some(now);
        if let Some(StreamEvent::Done(chunk)) = self.parser.on_eof() {
            record.on_chunk(now, chunk);
            record.done = true;
        }
    }
}
