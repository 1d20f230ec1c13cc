//! Per-dialect rendering of a simulated stream: the events before the first token, each
//! token chunk, the events after the last token, and the dialect's own error event. The
//! planner ([`super::plan`]) decides *when*; these decide *what bytes*.

mod anthropic;
mod bedrock;
mod gemini;
mod openai;

pub use openai::logprobs_json;
mod responses;
mod tgi;
mod triton;

use serde_json::{Value, json};

use super::model::ToyToken;
use super::request::{Dialect, SimRequest};

/// Per-response values every renderer may use.
pub struct Ctx {
    pub req: SimRequest,
    pub id: String,
    pub created: u64,
    /// Usage at the end (the request asked and the simulator allows it).
    pub usage: bool,
    /// Cumulative usage on every chunk.
    pub continuous: bool,
    /// Reasoning tokens billed before the visible ones and never streamed.
    pub hidden: u64,
    /// The first output tokens that are streamed as reasoning.
    pub reasoning: u64,
    /// The answer's tool calls (its end says so: `tool_calls`, `tool_use`).
    pub calls: u64,
}

/// The tool call a chunk of arguments belongs to.
pub struct CallRef<'a> {
    /// Its position among the answer's calls (chat's `index`; the output slot after the
    /// text's in Anthropic and Responses).
    pub index: usize,
    /// Its id; `None`: the dialect's fixed one.
    pub id: Option<&'a str>,
    pub name: &'a str,
    /// This chunk opens the call (with its id and name).
    pub open: bool,
}

impl Ctx {
    /// Reasoning billed once `visible` tokens were streamed: the hidden reasoning and the
    /// streamed reasoning among them.
    pub fn reasoning_tokens(&self, visible: u64) -> u64 {
        let hidden = if visible > 0 { self.hidden } else { 0 };
        hidden + self.reasoning.min(visible)
    }

    /// OpenAI usage after `visible` streamed tokens: the hidden reasoning, done before the
    /// first of them, is included and broken out (as OpenAI does).
    pub fn usage_json(&self, visible: u64) -> Value {
        let prompt = self.req.prompt_tokens;
        let hidden = if visible > 0 { self.hidden } else { 0 };
        let completion = visible + hidden;
        let mut usage = json!({ "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion });
        let reasoning = self.reasoning_tokens(visible);
        if reasoning > 0 {
            usage["completion_tokens_details"] = json!({ "reasoning_tokens": reasoning });
        }
        // As vLLM with `--enable-prompt-tokens-details`.
        if let Some(cached) = self.req.reported_cached {
            usage["prompt_tokens_details"] = json!({ "cached_tokens": cached });
        }
        usage
    }
}

pub trait Render: Sync {
    /// Events written on arrival, before the first token.
    fn preamble(&self, ctx: &Ctx) -> Vec<String>;
    /// One chunk of `text`; `tokens` is the cumulative count including it. `finish` is
    /// set on the last chunk unless a fault suppresses it.
    fn chunk(&self, ctx: &Ctx, text: &str, tokens: u64, finish: Option<&str>) -> String;
    /// A chunk of the toy model's `answer` tokens with their logprobs, in dialects that
    /// report them; the others send the text alone.
    fn chunk_logprobs(
        &self,
        ctx: &Ctx,
        text: &str,
        tokens: u64,
        finish: Option<&str>,
        answer: &[ToyToken],
    ) -> String {
        let _ = answer;
        self.chunk(ctx, text, tokens, finish)
    }
    /// A chunk of a tool call's arguments; the call's first opens it. Dialects without
    /// tool calls send the arguments as text.
    fn tool_chunk(
        &self,
        ctx: &Ctx,
        call: &CallRef,
        arguments: &str,
        tokens: u64,
        finish: Option<&str>,
    ) -> String {
        let _ = call;
        self.chunk(ctx, arguments, tokens, finish)
    }
    /// Events after the last token (usage, end markers).
    fn epilogue(&self, ctx: &Ctx, tokens: u64) -> Vec<String>;

    /// A chunk of streamed reasoning (`--reasoning`): the dialect's reasoning delta, or its
    /// text where it has none.
    fn reasoning_chunk(&self, ctx: &Ctx, text: &str, tokens: u64, finish: Option<&str>) -> String {
        self.chunk(ctx, text, tokens, finish)
    }
    /// The dialect's error event, sent mid-stream by the `error_event` fault.
    fn error(&self, ctx: &Ctx) -> String;
    /// The events that end an answer a content filter stopped after `tokens` (the
    /// `content_filter` fault): chat's `finish_reason: content_filter`, Gemini's `SAFETY`,
    /// Bedrock's `guardrail_intervened`; a dialect without one sends its error event.
    fn filtered(&self, ctx: &Ctx, tokens: u64) -> Vec<String> {
        let _ = tokens;
        vec![self.error(ctx)]
    }
}

pub fn renderer(dialect: Dialect) -> &'static dyn Render {
    match dialect {
        Dialect::Completions | Dialect::Chat | Dialect::Audio | Dialect::Embeddings => {
            &openai::OpenAi
        }
        Dialect::Tgi => &tgi::Tgi,
        Dialect::Triton => &triton::Triton,
        // Bedrock's Anthropic door sends the Messages events, wrapped when framed.
        Dialect::Anthropic | Dialect::BedrockInvoke => &anthropic::Anthropic,
        Dialect::BedrockConverse => &bedrock::Converse,
        Dialect::Gemini => &gemini::Gemini,
        Dialect::Responses => &responses::Responses,
    }
}

/// `data: <json>\n\n`
pub fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// `event: <name>\ndata: <json>\n\n`
pub fn event(name: &str, value: &Value) -> String {
    format!("event: {name}\ndata: {value}\n\n")
}

/// A truncated JSON payload, for the `malformed_json` fault (same in every dialect).
pub const MALFORMED: &str = "data: {\"choices\":[{\"index\":0,\"text\":\"trunc\n\n";

/// The body of a 400 for a request the dialect's server would refuse (a malformed content
/// part, a missing field), in that server's error format.
pub fn bad_request(dialect: Dialect, message: &str) -> Value {
    match dialect {
        Dialect::Anthropic => {
            json!({ "type": "error", "error": { "type": "invalid_request_error", "message": message } })
        }
        Dialect::Responses => {
            json!({ "error": { "message": message, "type": "invalid_request_error", "param": null, "code": null } })
        }
        Dialect::Gemini => {
            json!({ "error": { "code": 400, "message": message, "status": "INVALID_ARGUMENT" } })
        }
        // Bedrock's ValidationException body (its type is in `x-amzn-ErrorType`).
        Dialect::BedrockConverse | Dialect::BedrockInvoke => json!({ "message": message }),
        // vLLM's ErrorResponse.
        _ => {
            json!({ "error": { "message": message, "type": "BadRequestError", "param": null, "code": 400 } })
        }
    }
}
