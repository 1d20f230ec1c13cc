//! Wire formats: one [`Backend`] trait, one file per format.
//!
//! A backend knows how to build a probe's request body and how to read one event of its
//! response stream into a [`StreamEvent`]. It knows nothing about time: the probe stamps
//! arrival instants and [`crate::record`] derives the measurements, so every backend is
//! measured by the same rules.

mod openai;
mod openai_chat;
mod openai_wire;

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::config::Target;
use crate::error::ProbeError;
use crate::record::Chunk;
use crate::sse::SseEvent;

pub use openai::OpenAiCompletions;
pub use openai_chat::OpenAiChat;
pub(crate) use openai_wire::{error_message, snippet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// `/v1/completions`
    OpenAi,
    /// `/v1/chat/completions`
    OpenAiChat,
}

impl BackendKind {
    /// Accepted `backend =` values, for error messages.
    pub const NAMES: [&'static str; 2] = ["openai", "openai-chat"];

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "openai" => Some(Self::OpenAi),
            "openai-chat" => Some(Self::OpenAiChat),
            _ => None,
        }
    }

    /// The `backend` label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::OpenAiChat => "openai-chat",
        }
    }

    pub const fn default_endpoint(self) -> &'static str {
        match self {
            Self::OpenAi => "/v1/completions",
            Self::OpenAiChat => "/v1/chat/completions",
        }
    }

    pub fn backend(self) -> Arc<dyn Backend> {
        match self {
            Self::OpenAi => Arc::new(OpenAiCompletions),
            Self::OpenAiChat => Arc::new(OpenAiChat),
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one event of a response stream means for the probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    /// A data event: what it carried (possibly nothing, e.g. a role-only chunk).
    Chunk(Chunk),
    /// The end-of-stream marker (`data: [DONE]`).
    Done,
}

pub trait Backend: Send + Sync + fmt::Debug {
    /// The JSON request body for one probe with the given prompt.
    fn request_body(&self, target: &Target, prompt: &str) -> Value;

    /// A parser for one response stream. Stateless formats return a zero-sized parser,
    /// so this costs no allocation; stateful ones keep per-stream state here.
    fn stream_parser(&self) -> Box<dyn StreamParser>;
}

pub trait StreamParser: Send {
    /// Interpret one SSE event. An error event or a malformed payload is an `Err` carrying
    /// its category (`stream_error_event`, `invalid_response`).
    fn on_event(&mut self, event: &SseEvent) -> Result<StreamEvent, ProbeError>;
}
