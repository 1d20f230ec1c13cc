//! OpenAI completions, chat completions and vLLM-style transcription chunks.

use serde_json::{Value, json};

use super::{Ctx, Render, data};
use crate::sim::request::Dialect;

pub struct OpenAi;

fn object(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Chat => "chat.completion.chunk",
        Dialect::Audio => "transcription.chunk",
        _ => "text_completion",
    }
}

fn chunk_json(ctx: &Ctx, choices: Value, usage: Option<Value>) -> String {
    let mut chunk = json!({
        "id": ctx.id, "object": object(ctx.req.dialect), "created": ctx.created,
        "model": ctx.req.model, "choices": choices,
    });
    if let Some(usage) = usage {
        chunk["usage"] = usage;
    }
    data(&chunk)
}

impl Render for OpenAi {
    fn preamble(&self, ctx: &Ctx) -> Vec<String> {
        if ctx.req.dialect != Dialect::Chat {
            return Vec::new();
        }
        let role = json!([{ "index": 0, "delta": { "role": "assistant", "content": "" }, "logprobs": null, "finish_reason": null }]);
        vec![chunk_json(
            ctx,
            role,
            ctx.continuous.then(|| ctx.usage_json(0)),
        )]
    }

    fn chunk(&self, ctx: &Ctx, text: &str, tokens: u64, finish: Option<&str>) -> String {
        let choices = match ctx.req.dialect {
            Dialect::Chat | Dialect::Audio => {
                json!([{ "index": 0, "delta": { "content": text }, "logprobs": null, "finish_reason": finish }])
            }
            _ => json!([{ "index": 0, "text": text, "logprobs": null, "finish_reason": finish }]),
        };
        chunk_json(ctx, choices, ctx.continuous.then(|| ctx.usage_json(tokens)))
    }

    fn epilogue(&self, ctx: &Ctx, tokens: u64) -> Vec<String> {
        let mut events = Vec::new();
        if ctx.usage {
            events.push(chunk_json(ctx, json!([]), Some(ctx.usage_json(tokens))));
        }
        events.push("data: [DONE]\n\n".into());
        events
    }

    fn error(&self, _: &Ctx) -> String {
        data(
            &json!({"error": {"message": "simulated failure mid-stream", "type": "InternalServerError", "code": 500}}),
        )
    }
}
