//! OpenAI Responses streaming: typed events with sequence numbers, `output_text.delta`s,
//! and `response.completed` carrying usage. No `[DONE]`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::{CallRef, Ctx, Render, event};

pub struct Responses;

/// Sequence numbers only need to increase within a response; a process-wide counter does.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

fn typed(kind: &str, mut body: Value) -> String {
    body["type"] = Value::from(kind);
    body["sequence_number"] = Value::from(SEQUENCE.fetch_add(1, Ordering::Relaxed));
    event(kind, &body)
}

fn response(ctx: &Ctx, status: &str, usage: Value) -> Value {
    json!({ "id": ctx.id, "object": "response", "created_at": ctx.created, "model": ctx.req.model, "status": status, "usage": usage })
}

impl Render for Responses {
    fn preamble(&self, ctx: &Ctx) -> Vec<String> {
        let item = json!({ "id": "msg_sim", "type": "message", "status": "in_progress", "role": "assistant", "content": [] });
        vec![
            typed(
                "response.created",
                json!({ "response": response(ctx, "in_progress", Value::Null) }),
            ),
            typed(
                "response.in_progress",
                json!({ "response": response(ctx, "in_progress", Value::Null) }),
            ),
            typed(
                "response.output_item.added",
                json!({ "output_index": 0, "item": item }),
            ),
            typed(
                "response.content_part.added",
                json!({ "item_id": "msg_sim", "output_index": 0, "content_index": 0, "part": { "type": "output_text", "text": "" } }),
            ),
        ]
    }

    fn reasoning_chunk(&self, _: &Ctx, text: &str, _: u64, _: Option<&str>) -> String {
        typed(
            "response.reasoning_text.delta",
            json!({ "item_id": "rs_sim", "output_index": 0, "content_index": 0, "delta": text }),
        )
    }

    fn chunk(&self, _: &Ctx, text: &str, _: u64, _: Option<&str>) -> String {
        typed(
            "response.output_text.delta",
            json!({ "item_id": "msg_sim", "output_index": 0, "content_index": 0, "delta": text, "logprobs": [] }),
        )
    }

    /// A `function_call` output item after the message (or the call before), then its
    /// arguments' deltas.
    fn tool_chunk(
        &self,
        _: &Ctx,
        call: &CallRef,
        arguments: &str,
        _: u64,
        _: Option<&str>,
    ) -> String {
        let index = call.index + 1;
        let call_id = call.id.unwrap_or("call_sim");
        let item_id = format!("fc_{}", call_id.strip_prefix("call_").unwrap_or(call_id));
        let mut events = String::new();
        if call.open {
            let item = json!({ "id": item_id, "type": "function_call", "status": "in_progress", "call_id": call_id, "name": call.name, "arguments": "" });
            events.push_str(&typed(
                "response.output_item.added",
                json!({ "output_index": index, "item": item }),
            ));
        }
        events.push_str(&typed(
            "response.function_call_arguments.delta",
            json!({ "item_id": item_id, "output_index": index, "delta": arguments }),
        ));
        events
    }

    fn epilogue(&self, ctx: &Ctx, tokens: u64) -> Vec<String> {
        let output = tokens + ctx.hidden;
        let reasoning = ctx.reasoning_tokens(tokens).max(ctx.hidden);
        let mut usage = json!({ "input_tokens": ctx.req.prompt_tokens, "output_tokens": output, "total_tokens": ctx.req.prompt_tokens + output, "output_tokens_details": { "reasoning_tokens": reasoning } });
        if let Some(cached) = ctx.req.reported_cached {
            usage["input_tokens_details"] = json!({ "cached_tokens": cached });
        }
        let text_done = typed(
            "response.output_text.done",
            json!({ "item_id": "msg_sim", "output_index": 0, "content_index": 0 }),
        );
        // Stopping at max_output_tokens is `incomplete` in the real API.
        let last = if tokens >= ctx.req.max_tokens {
            let mut done = response(ctx, "incomplete", usage);
            done["incomplete_details"] = json!({ "reason": "max_output_tokens" });
            typed("response.incomplete", json!({ "response": done }))
        } else {
            typed(
                "response.completed",
                json!({ "response": response(ctx, "completed", usage) }),
            )
        };
        vec![text_done, last]
    }

    fn error(&self, _: &Ctx) -> String {
        typed(
            "error",
            json!({ "code": "server_error", "message": "simulated failure mid-stream", "param": null }),
        )
    }
}
