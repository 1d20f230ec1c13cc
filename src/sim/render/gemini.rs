//! Gemini's `streamGenerateContent?alt=sse`: each event a whole `GenerateContentResponse`
//! (`\r\n`-separated, as Google sends them) with the candidate's new parts, cumulative
//! `usageMetadata`, and `finishReason` on the last. Thought parts carry `thought: true`;
//! the filter fault ends with `finishReason: SAFETY`.

use serde_json::{Value, json};

use super::{Ctx, Render};

pub struct Gemini;

fn data(value: &Value) -> String {
    format!("data: {value}\r\n\r\n")
}

fn response(ctx: &Ctx, parts: Value, tokens: u64, finish: Option<&str>) -> Value {
    let prompt = ctx.req.prompt_tokens;
    let thoughts = ctx.reasoning_tokens(tokens);
    let mut candidate = json!({ "content": { "role": "model", "parts": parts }, "index": 0 });
    if let Some(finish) = finish {
        candidate["finishReason"] = json!(match finish {
            "length" => "MAX_TOKENS",
            "SAFETY" => "SAFETY",
            _ => "STOP",
        });
    }
    let mut usage = json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": tokens - thoughts.min(tokens),
        "totalTokenCount": prompt + tokens + ctx.hidden,
    });
    if thoughts > 0 {
        usage["thoughtsTokenCount"] = json!(thoughts);
    }
    json!({ "candidates": [candidate], "usageMetadata": usage, "modelVersion": ctx.req.model, "responseId": ctx.id })
}

impl Render for Gemini {
    fn preamble(&self, _: &Ctx) -> Vec<String> {
        Vec::new()
    }

    fn chunk(&self, ctx: &Ctx, text: &str, tokens: u64, finish: Option<&str>) -> String {
        data(&response(ctx, json!([{ "text": text }]), tokens, finish))
    }

    fn reasoning_chunk(&self, ctx: &Ctx, text: &str, tokens: u64, finish: Option<&str>) -> String {
        data(&response(
            ctx,
            json!([{ "text": text, "thought": true }]),
            tokens,
            finish,
        ))
    }

    fn epilogue(&self, _: &Ctx, _: u64) -> Vec<String> {
        Vec::new()
    }

    fn filtered(&self, ctx: &Ctx, tokens: u64) -> Vec<String> {
        vec![data(&response(ctx, json!([]), tokens, Some("SAFETY")))]
    }

    fn error(&self, _: &Ctx) -> String {
        data(
            &json!({ "error": { "code": 500, "message": "An internal error has occurred.", "status": "INTERNAL" } }),
        )
    }
}
