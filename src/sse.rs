//! Incremental Server-Sent Events decoder (WHATWG HTML "event stream interpretation").
//!
//! Owns turning an arbitrary split of response bytes into whole events. It must give the same
//! events for any chunking of the same bytes: a read can end inside a line, inside a CRLF
//! pair, or inside a multi-byte UTF-8 character, so bytes are buffered per line and decoded
//! only once the line is complete (a line terminator never occurs inside a UTF-8 sequence).
//!
//! Deviations from the browser algorithm, on purpose for a probe: invalid UTF-8 is an error
//! (a server bug to report as `invalid_response`), not replaced with U+FFFD; and a line or
//! event larger than `max_event_bytes` is an error (`too_large`) so memory stays bounded.
//! And an `error:` field line, which the spec ignores, is kept as an `error` event with the
//! line's value as its data: llama.cpp's server (before mid-2025) writes its in-stream
//! errors as `error: {"code": …, "message": …}`, and a probe must not drop them.

use std::sync::Arc;

use memchr::memchr2;

/// One dispatched event. `event` is `None` for the default type ("message").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
    /// The last event ID, shared (not copied) between the events it applies to: it persists
    /// across events, so a copy per event would let one long `id:` line followed by many
    /// tiny events multiply into `events × max_event_bytes` of memory.
    pub id: Option<Arc<str>>,
}

impl SseEvent {
    /// The event type, with the SSE default applied.
    pub fn kind(&self) -> &str {
        self.event.as_deref().unwrap_or("message")
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    #[error("invalid UTF-8 in the event stream at byte {offset}")]
    InvalidUtf8 { offset: u64 },
    #[error("an event line or event exceeded {limit} bytes")]
    TooLarge { limit: usize },
}

/// Default bound on one event: far above any real chunk (a few hundred bytes) yet small
/// enough that a hostile endless line cannot exhaust memory.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1 << 20;

#[derive(Debug)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: String,
    event_type: Option<String>,
    last_id: Option<Arc<str>>,
    /// The previous chunk ended in CR: a LF starting the next chunk belongs to that CR.
    after_cr: bool,
    /// The UTF-8 BOM may only appear at the very start of the stream.
    at_stream_start: bool,
    /// Bytes consumed so far, for error offsets.
    offset: u64,
    max_event_bytes: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseDecoder {
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            line: Vec::new(),
            data: String::new(),
            event_type: None,
            last_id: None,
            after_cr: false,
            at_stream_start: true,
            offset: 0,
            max_event_bytes,
        }
    }

    /// Feed the next bytes of the stream; complete events are appended to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
                self.offset += 1;
            }
        }
        while !chunk.is_empty() {
            let Some(pos) = memchr2(b'\n', b'\r', chunk) else {
                self.extend_line(chunk)?;
                self.offset += chunk.len() as u64;
                return Ok(());
            };
            self.extend_line(&chunk[..pos])?;
            let mut consumed = pos + 1;
            if chunk[pos] == b'\r' {
                match chunk.get(pos + 1) {
                    Some(b'\n') => consumed += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            let line_end = self.offset + pos as u64;
            self.finish_line(line_end, out)?;
            self.offset += consumed as u64;
            chunk = &chunk[consumed..];
        }
        Ok(())
    }

    /// Whether bytes of an undispatched event are pending. At end of stream the spec drops
    /// them; the caller can report the truncation.
    pub fn has_partial_event(&self) -> bool {
        !self.line.is_empty() || !self.data.is_empty()
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + self.data.len() + bytes.len() > self.max_event_bytes {
            return Err(SseError::TooLarge {
                limit: self.max_event_bytes,
            });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// `line_end` is the stream offset of the terminator, for error reporting.
    fn finish_line(&mut self, line_end: u64, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut bytes = self.line.as_slice();
        if self.at_stream_start {
            self.at_stream_start = false;
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        let line = std::str::from_utf8(bytes).map_err(|e| SseError::InvalidUtf8 {
            offset: line_end - bytes.len() as u64 + e.valid_up_to() as u64,
        })?;
        if line.is_empty() {
            self.dispatch(out);
        } else if !line.starts_with(':') {
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line, ""),
            };
            match field {
                "data" => {
                    self.data.push_str(value);
                    self.data.push('\n');
                }
                "event" => self.event_type = Some(value.to_owned()),
                "error" => {
                    self.event_type = Some("error".to_owned());
                    self.data.push_str(value);
                    self.data.push('\n');
                }
                "id" if !value.contains('\0') => self.last_id = Some(value.into()),
                _ => {} // `retry` and unknown fields do not affect events
            }
        }
        self.line.clear();
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event_type.take();
        if self.data.is_empty() {
            return; // the spec dispatches nothing for an event without data
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the trailing LF added after the last data line
        out.push(SseEvent {
            event: event.filter(|e| !e.is_empty()),
            data,
            id: self.last_id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.push(chunk, &mut out)?;
        }
        Ok(out)
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn lf_crlf_and_cr_line_endings_are_equivalent() {
        for stream in [
            &b"data: a\n\ndata: b\n\n"[..],
            b"data: a\r\n\r\ndata: b\r\n\r\n",
            b"data: a\r\rdata: b\r\r",
        ] {
            assert_eq!(data(&decode(&[stream]).unwrap()), ["a", "b"]);
        }
    }

    #[test]
    fn crlf_split_across_reads_is_one_line_ending() {
        let events = decode(&[b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]).unwrap();
        assert_eq!(data(&events), ["a", "b"]);
    }

    #[test]
    fn comments_multiline_data_and_missing_space() {
        let stream = b": ping\n\ndata:x\ndata: y\n\n:\ndata:  two spaces\n\n";
        let events = decode(&[stream]).unwrap();
        assert_eq!(data(&events), ["x\ny", " two spaces"]);
    }

    #[test]
    fn event_type_and_id_fields() {
        let events = decode(&[b"event: error\nid: 7\ndata: {}\n\ndata: next\n\n"]).unwrap();
        assert_eq!(events[0].kind(), "error");
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert_eq!(events[1].kind(), "message");
        assert_eq!(events[1].id.as_deref(), Some("7"), "last event id persists");
    }

    #[test]
    fn a_long_last_event_id_is_shared_not_copied_per_event() {
        // Found while writing the fuzz drivers; tests/fuzz_alloc.rs guards it too. With a
        // String per event, a 32 KiB `id:` line then 1000 empty events (7 bytes each)
        // held 32 MB, and one 64 KiB read of them 9000 copies.
        let mut stream = format!("id: {}\n", "i".repeat(32 << 10)).into_bytes();
        stream.extend(b"data:\n\n".repeat(1000));
        let events = decode(&[&stream]).unwrap();
        assert_eq!(events.len(), 1000);
        let first = events[0].id.as_ref().unwrap();
        assert!(
            events
                .iter()
                .all(|e| Arc::ptr_eq(e.id.as_ref().unwrap(), first))
        );
    }

    #[test]
    fn an_error_field_line_is_an_error_event() {
        // llama.cpp's server before mid-2025: no `data:` prefix.
        let stream = b"data: {\"a\":1}\n\nerror: {\"code\":500,\"message\":\"boom\"}\n\n";
        let events = decode(&[stream]).unwrap();
        assert_eq!(
            data(&events),
            ["{\"a\":1}", "{\"code\":500,\"message\":\"boom\"}"]
        );
        assert_eq!(events[0].kind(), "message");
        assert_eq!(events[1].kind(), "error");
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        let events = decode(&[b"event: ping\n\nretry: 10\n\ndata: [DONE]\n\n"]).unwrap();
        assert_eq!(data(&events), ["[DONE]"]);
        assert_eq!(
            events[0].kind(),
            "message",
            "event type resets after dispatch"
        );
    }

    #[test]
    fn utf8_character_split_across_reads() {
        let bytes = "data: héllo 🌍\n\n".as_bytes();
        for split in 0..bytes.len() {
            let events = decode(&[&bytes[..split], &bytes[split..]]).unwrap();
            assert_eq!(data(&events), ["héllo 🌍"], "split at {split}");
        }
    }

    #[test]
    fn leading_bom_is_skipped_only_at_stream_start() {
        let events = decode(&[b"\xEF\xBB", b"\xBFdata: a\n\n"]).unwrap();
        assert_eq!(data(&events), ["a"]);
    }

    #[test]
    fn invalid_utf8_is_an_error_with_offset() {
        let err = decode(&[b"data: ok\n\ndata: \xff\n\n"]).unwrap_err();
        assert_eq!(err, SseError::InvalidUtf8 { offset: 16 });
    }

    #[test]
    fn oversized_line_is_rejected_without_buffering_it() {
        let mut decoder = SseDecoder::new(64);
        let mut out = Vec::new();
        let long = vec![b'x'; 40];
        decoder.push(b"data: ", &mut out).unwrap();
        decoder.push(&long, &mut out).unwrap();
        let err = decoder.push(&long, &mut out).unwrap_err();
        assert_eq!(err, SseError::TooLarge { limit: 64 });
    }

    #[test]
    fn oversized_multiline_event_is_rejected() {
        let mut decoder = SseDecoder::new(32);
        let mut out = Vec::new();
        let err = (0..10)
            .map(|_| decoder.push(b"data: 0123456789\n", &mut out))
            .find_map(Result::err);
        assert_eq!(err, Some(SseError::TooLarge { limit: 32 }));
    }

    #[test]
    fn partial_event_at_end_is_reported_not_dispatched() {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        decoder.push(b"data: [DONE]\n", &mut out).unwrap();
        assert!(out.is_empty());
        assert!(decoder.has_partial_event());
    }
}
