//! OpenAI completions, chat completions and vLLM-style transcription chunks.

use serde_json::{Value, json};

use super::{CallRef, Ctx, Render, data};
use crate::sim::model::ToyToken;
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
    /// Chat's `delta.reasoning_content`, as vLLM's and SGLang's reasoning parsers stream it.
    fn reasoning_chunk(&self, ctx: &Ctx, text: &str, tokens: u64, finish: Option<&str>) -> String {
        if ctx.req.dialect != Dialect::Chat {
            return self.chunk(ctx, text, tokens, finish);
        }
        let choices = json!([{ "index": 0, "delta": { "reasoning_content": text }, "logprobs": null, "finish_reason": finish }]);
        chunk_json(ctx, choices, ctx.continuous.then(|| ctx.usage_json(tokens)))
    }

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
        self.chunk_logprobs(ctx, text, tokens, finish, &[])
    }

    fn chunk_logprobs(
        &self,
        ctx: &Ctx,
        text: &str,
        tokens: u64,
        finish: Option<&str>,
        answer: &[ToyToken],
    ) -> String {
        let chat = matches!(ctx.req.dialect, Dialect::Chat | Dialect::Audio);
        let logprobs = match answer {
            [] => Value::Null,
            _ => logprobs_json(chat, answer),
        };
        let choices = if chat {
            json!([{ "index": 0, "delta": { "content": text }, "logprobs": logprobs, "finish_reason": finish }])
        } else {
            json!([{ "index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish }])
        };
        chunk_json(ctx, choices, ctx.continuous.then(|| ctx.usage_json(tokens)))
    }

    /// Chat's `tool_calls` deltas: the first with the call's id, type and name, then the
    /// arguments' fragments (completions has no tools: text).
    fn tool_chunk(
        &self,
        ctx: &Ctx,
        call: &CallRef,
        arguments: &str,
        tokens: u64,
        finish: Option<&str>,
    ) -> String {
        if ctx.req.dialect != Dialect::Chat {
            return self.chunk(ctx, arguments, tokens, finish);
        }
        let mut delta = json!({ "index": call.index, "function": { "arguments": arguments } });
        if call.open {
            delta["id"] = match call.id {
                Some(id) => Value::from(id),
                None => Value::from(format!("call_{}", ctx.id)),
            };
            delta["type"] = Value::from("function");
            delta["function"]["name"] = Value::from(call.name);
        }
        let choices = json!([{ "index": 0, "delta": { "tool_calls": [delta] }, "logprobs": null, "finish_reason": finish }]);
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

    /// The filter's stop, as OpenAI and Azure send it, then usage and `[DONE]`.
    fn filtered(&self, ctx: &Ctx, tokens: u64) -> Vec<String> {
        let delta = match ctx.req.dialect {
            Dialect::Chat => json!({ "index": 0, "delta": {}, "finish_reason": "content_filter" }),
            _ => json!({ "index": 0, "text": "", "finish_reason": "content_filter" }),
        };
        let mut events = vec![chunk_json(ctx, json!([delta]), None)];
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

/// The `logprobs` of a choice: chat's `{"content": [{token, logprob, bytes, top_logprobs}]}`
/// or completions' `{tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}`
/// (OpenAI's and vLLM's shapes).
pub fn logprobs_json(chat: bool, answer: &[ToyToken]) -> Value {
    let bytes = |t: &str| t.as_bytes().to_vec();
    if chat {
        let content: Vec<Value> = answer
            .iter()
            .map(|t| {
                let top: Vec<Value> = t
                    .top
                    .iter()
                    .map(|(tok, lp)| json!({ "token": tok, "logprob": lp, "bytes": bytes(tok) }))
                    .collect();
                json!({ "token": t.text, "logprob": t.logprob, "bytes": bytes(&t.text), "top_logprobs": top })
            })
            .collect();
        return json!({ "content": content });
    }
    let mut offset = 0;
    let offsets: Vec<usize> = answer
        .iter()
        .map(|t| {
            let at = offset;
            offset += t.text.len();
            at
        })
        .collect();
    let top: Vec<Value> = answer
        .iter()
        .map(|t| {
            Value::Object(
                t.top
                    .iter()
                    .map(|(tok, lp)| (tok.clone(), json!(lp)))
                    .collect(),
            )
        })
        .collect();
    json!({
        "tokens": answer.iter().map(|t| t.text.as_str()).collect::<Vec<_>>(),
        "token_logprobs": answer.iter().map(|t| t.logprob).collect::<Vec<_>>(),
        "top_logprobs": top,
        "text_offset": offsets,
    })
}
