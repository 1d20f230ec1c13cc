//! A conversation's history, as a session check sends it every turn (docs/sessions.md):
//! written once here, dialect-neutral, and spelled by each chat backend in its own
//! request format (`crate::backend::history`). What an agent feeds back is the model's
//! own reply (its text, its reasoning where the dialect wants it back, its tool calls with
//! the ids the server gave them) and one result per call, so the history is the one the
//! server's chat template and tool parser must render on the next turn.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conversation {
    /// The system prompt (chat's first message, Anthropic's `system`, Responses'
    /// `instructions`).
    pub system: String,
    pub messages: Vec<Message>,
    /// Where the conversation's stable part ends, in messages: an API that caches only at
    /// explicit breakpoints (Anthropic) is asked to cache everything before it.
    pub cache_through: Option<usize>,
    /// Headers every turn carries (session affinity: `x-session-id` and the like).
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Whether the reply may hold several calls (`parallel_tool_calls`, Anthropic's
    /// `disable_parallel_tool_use`); none: the API's default.
    pub parallel_calls: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    User(String),
    Assistant(Reply),
    /// One result per call of the reply before it, in the calls' order.
    ToolResults(Vec<ToolResult>),
}

/// The model's reply as the next turn sends it back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reply {
    pub text: String,
    /// Anthropic's thinking blocks, signed: they must precede the `tool_use` they led to.
    pub thinking: Vec<Thinking>,
    /// A chat server's streamed reasoning and its field, sent back beside the reply's
    /// tool calls (DeepSeek's thinking mode requires it within a tool-call loop).
    pub reasoning: Option<(&'static str, String)>,
    pub calls: Vec<Call>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The id the server gave the call (chat `tool_calls[].id`, Anthropic `tool_use.id`,
    /// Responses `call_id`): the result must name it.
    pub id: String,
    pub name: String,
    /// The arguments' JSON text, as the model wrote it.
    pub arguments: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    pub call_id: String,
    pub content: String,
}

impl Conversation {
    /// The text of the last user message: what the log line quotes.
    pub fn last_user_text(&self) -> &str {
        self.messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User(text) => Some(text.as_str()),
                _ => None,
            })
            .unwrap_or("")
    }
}

/// One thinking block as it arrived (Anthropic `thinking` or `redacted_thinking`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Thinking {
    /// The content block's index.
    pub slot: u64,
    pub text: String,
    pub signature: String,
    /// A `redacted_thinking` block's opaque `data` (sent back as it came).
    pub redacted: Option<String>,
}
