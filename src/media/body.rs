//! A JSON request body with its media spliced in, without copying them.
//!
//! A 4K image is ~11 MB of base64. Put into a `serde_json::Value` and serialized, it was
//! copied twice per attempt, on the runtime thread that timestamps other probes' chunks.
//! Backends write a short placeholder where a part's URL (or base64 data) goes; this
//! module serializes the small JSON, cuts it at the placeholders, and sends the pieces and
//! the media's own shared buffers one after another as one body of known length.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use serde_json::Value;

use super::MediaPart;

/// Marks a placeholder: a control character no prompt sends, which JSON escapes as
/// `\u0001`, so the serialized body is searched for that escape.
const MARK: char = '\u{1}';
const ESCAPED_MARK: &[u8] = b"\\u0001";

/// Which text of a part a placeholder stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slice {
    /// The whole URL (a data URL or an http(s) URL).
    Url,
    /// The base64 data of an inline part, after `data:<mime>;base64,`.
    Base64,
}

/// What a backend writes where part `index`'s `slice` goes (inside a JSON string).
pub fn placeholder(index: usize, slice: Slice) -> String {
    let tag = match slice {
        Slice::Url => 'u',
        Slice::Base64 => 'b',
    };
    format!("{MARK}media:{index}:{tag}{MARK}")
}

/// `body` serialized, with each placeholder replaced by its part's text.
pub fn splice(body: &Value, media: &[MediaPart]) -> SplicedBody {
    let mut chunks = VecDeque::new();
    let mut rest = Bytes::from(body.to_string());
    while let Some(at) = memchr::memmem::find(&rest, ESCAPED_MARK) {
        let after = at + ESCAPED_MARK.len();
        let Some(len) = memchr::memmem::find(&rest[after..], ESCAPED_MARK) else {
            break;
        };
        let Some(text) = part_text(&rest[after..after + len], media) else {
            // Not one of ours (a prompt that happens to hold the mark): sent as written.
            chunks.push_back(rest.split_to(after));
            continue;
        };
        chunks.push_back(rest.split_to(at));
        let _ = rest.split_to(after + len + ESCAPED_MARK.len() - at);
        chunks.push_back(text);
    }
    chunks.push_back(rest);
    chunks.retain(|c| !c.is_empty());
    let len = chunks.iter().map(|c| c.len() as u64).sum();
    SplicedBody { chunks, len }
}

/// `media:<index>:<u|b>`, the part's text, JSON-escaped where it needs to be.
fn part_text(tag: &[u8], media: &[MediaPart]) -> Option<Bytes> {
    let tag = std::str::from_utf8(tag).ok()?.strip_prefix("media:")?;
    let (index, slice) = tag.split_once(':')?;
    let part = media.get(index.parse::<usize>().ok()?)?;
    let start = match (slice, part.inline) {
        ("u", _) => 0,
        ("b", Some((_, start))) => start,
        _ => return None,
    };
    Some(match part.inline {
        // A data URL is `data:`, our own MIME type, `;base64,` and the base64 alphabet:
        // nothing JSON escapes, so its buffer is sent as it is.
        Some(_) => Bytes::from_owner(Shared(Arc::clone(&part.url))).slice(start..),
        // An http(s) URL from the configuration: escaped, and short.
        None => {
            let quoted = serde_json::to_string(&part.url[start..]).ok()?;
            Bytes::from(quoted[1..quoted.len() - 1].to_owned())
        }
    })
}

struct Shared(Arc<String>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// The body's pieces, in order, and the length of those not sent yet (so it goes with a
/// Content-Length, as a serialized body would).
#[derive(Debug)]
pub struct SplicedBody {
    chunks: VecDeque<Bytes>,
    len: u64,
}

impl SplicedBody {
    pub const fn content_length(&self) -> u64 {
        self.len
    }

    /// The whole body, copied into one buffer.
    #[cfg(test)]
    pub fn to_vec(&self) -> Vec<u8> {
        self.chunks.iter().flat_map(|c| c.iter().copied()).collect()
    }
}

impl http_body::Body for SplicedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let chunk = self.chunks.pop_front();
        if let Some(c) = &chunk {
            self.len -= c.len() as u64;
        }
        Poll::Ready(chunk.map(|c| Ok(Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}
