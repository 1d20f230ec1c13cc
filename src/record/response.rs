//! What a response said beyond its timing: its text, reasoning, refusal and tool calls as
//! they were assembled from every streamed fragment, its logprobs when a canary asked, and
//! the server's own account; what validation, the canary and the logs read.

pub use crate::prompt::conversation::Thinking;

/// What the response said beyond timing: its text and labels, for validation and logs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResponseInfo {
    /// The answer's text (bounded by the response size limit): what validation checks.
    pub text: String,
    /// Generated output that is not the answer's text: reasoning, refusals, tool calls.
    /// Timed like the answer and counted by the tokenizer fallback; never validated.
    pub other_text: String,
    /// The reasoning itself was streamed (chat `reasoning_content`, Responses
    /// `reasoning_text`), so the usage's reasoning tokens arrived. A summary does not count.
    pub reasoning_streamed: bool,
    pub model: Option<String>,
    pub finish_reason: Option<String>,
    /// The server's own account of the request, when it sends one (llama.cpp `timings`).
    pub server_timings: Option<ServerTimings>,
    /// The model declined (chat `delta.refusal`, a Responses refusal): its words. Also in
    /// `other_text`, for timing; kept apart so the canary can quote it as a refusal.
    pub refusal: String,
    /// The tool calls of the answer, each assembled from every streamed fragment.
    pub tool_calls: Vec<ToolCall>,
    /// Each generated token's logprobs, collected only when asked for (a canary's
    /// request): `Some` before the response is read.
    pub logprobs: Option<Logprobs>,
    /// Prompt tokens written to the prompt cache, where the server says (Anthropic's
    /// `cache_creation_input_tokens`): the prefix-cache check tells an API that cached
    /// nothing from one that cached and then missed.
    pub cache_written: Option<u64>,
    /// A chat stream's reasoning text and the field it came in (`reasoning_content`,
    /// `reasoning`), where the server streams it.
    pub reasoning: Option<(&'static str, String)>,
    /// Anthropic's thinking blocks, whole and signed: a session sends them back before the
    /// `tool_use` they led to, as the Messages API requires.
    pub thinking: Vec<Thinking>,
    /// The backend that served the request, where the target names a header that says
    /// (a gateway's `x-served-by`, llm-d's `x-session-token`): a session counts switches.
    pub served_by: Option<String>,
    /// The response's values of the session's affinity headers, sent back on the next turn
    /// (llm-d returns `x-session-token` and routes a request that carries it back).
    pub echo: Vec<(http::HeaderName, http::HeaderValue)>,
    /// What the response head said of the caller's rate limit, whatever its status.
    pub quota: Option<crate::quota::Quota>,
}

/// One tool call as it arrived: the function's name and its arguments' text (JSON, if the
/// server kept its promise).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolCall {
    /// Where the format places it: chat's `tool_calls[].index`, Anthropic's content block
    /// index, a Responses output index.
    pub slot: u64,
    pub name: String,
    pub arguments: String,
    /// The arguments came whole with the header (Anthropic's `input: {}`); the first
    /// argument delta replaces them.
    pub provisional: bool,
    /// The call's `id`, when the format sends one (chat `tool_calls[].id`).
    pub id: Option<String>,
    /// The arguments arrived as a JSON object, not the string of JSON the API defines
    /// (TGI 2.x, llama.cpp for a while): `arguments` holds that object's JSON text. Timed
    /// as output; an agent's SDK fails on it, so the canary does too.
    pub object_arguments: bool,
}

impl ResponseInfo {
    /// The thinking block at `slot`, opened when new.
    pub fn thinking_at(&mut self, slot: u64) -> &mut Thinking {
        let at = match self.thinking.iter().position(|t| t.slot == slot) {
            Some(at) => at,
            None => {
                self.thinking.push(Thinking {
                    slot,
                    ..Thinking::default()
                });
                self.thinking.len() - 1
            }
        };
        &mut self.thinking[at]
    }

    /// The call at `slot`, opened when new.
    pub fn tool_call(&mut self, slot: u64) -> &mut ToolCall {
        let at = match self.tool_calls.iter().position(|c| c.slot == slot) {
            Some(at) => at,
            None => {
                self.tool_calls.push(ToolCall {
                    slot,
                    ..ToolCall::default()
                });
                self.tool_calls.len() - 1
            }
        };
        &mut self.tool_calls[at]
    }

    /// The slot of a chat tool-call delta. Its `index` says, when present. Without one
    /// (Gemini's OpenAI-compatible API sends each of several parallel calls whole, each with
    /// its own `id` and no `index`), a new `id` opens a new call and a known one continues
    /// it; a delta with neither continues the last call.
    pub fn chat_call_slot(&self, index: Option<u64>, id: Option<&str>) -> u64 {
        if let Some(index) = index {
            return index;
        }
        let last = self.tool_calls.last();
        match id {
            Some(id) => match self.tool_calls.iter().find(|c| c.id.as_deref() == Some(id)) {
                Some(known) => known.slot,
                None => self
                    .tool_calls
                    .iter()
                    .map(|c| c.slot + 1)
                    .max()
                    .unwrap_or(0),
            },
            None => last.map_or(0, |c| c.slot),
        }
    }

    /// An argument fragment of the call at `slot`. An empty one leaves provisional
    /// arguments in place: Anthropic streams a tool without parameters as `input: {}` then
    /// one `partial_json: ""`, and `{}` is that call's answer (as the SDKs accumulate it).
    pub fn tool_arguments(&mut self, slot: u64, fragment: &str) {
        let call = self.tool_call(slot);
        if fragment.is_empty() {
            return;
        }
        if call.provisional {
            call.arguments.clear();
            call.provisional = false;
        }
        call.arguments.push_str(fragment);
    }
}

/// The logprobs of an answer, or why they could not be read (the answer still counts).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Logprobs {
    pub positions: Vec<crate::logprobs::Position>,
    /// Why reading stopped: a malformed value, or an impossible one (broken numerics).
    pub unreadable: Option<crate::logprobs::Unreadable>,
}

impl Logprobs {
    /// Read one choice's `logprobs` value; after an unreadable one, nothing more.
    pub fn read(&mut self, value: &serde_json::Value) {
        if self.unreadable.is_none() {
            if let Err(e) = crate::logprobs::read(value, &mut self.positions) {
                self.unreadable = Some(e);
            }
        }
    }
}

/// llama.cpp's per-request `timings`: what the server measured on its side.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Deserialize)]
pub struct ServerTimings {
    /// Prompt tokens served from the prompt cache, and those processed (cache excluded).
    #[serde(default)]
    pub cache_n: Option<u64>,
    #[serde(default)]
    pub prompt_n: Option<u64>,
    #[serde(default)]
    pub prompt_ms: Option<f64>,
    /// Tokens generated, and the mean time per generated token.
    #[serde(default)]
    pub predicted_n: Option<u64>,
    #[serde(default)]
    pub predicted_per_token_ms: Option<f64>,
}

/// What a non-streamed response body carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WholeBody {
    /// The body holds the expected output (text, or a vector of the right shape).
    pub has_output: bool,
    pub output_tokens: Option<u64>,
    pub prompt_tokens: Option<u64>,
    pub cached_prompt_tokens: Option<u64>,
}
