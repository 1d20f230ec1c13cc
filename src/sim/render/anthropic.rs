//! Anthropic Messages streaming: `message_start`, a text content block of
//! `content_block_delta`s, `message_delta` with the stop reason and cumulative output
//! tokens, `message_stop`; `ping` after the start, as the real API sends.

use serde_json::json;

use super::{CallRef, Ctx, Render, event};

pub struct Anthropic;

impl Render for Anthropic {
    fn preamble(&self, ctx: &Ctx) -> Vec<String> {
        // `input_tokens` counts what was not read from the cache; the prompt is the sum.
        let cached = ctx.req.reported_cached;
        let mut usage = json!({
            "input_tokens": ctx.req.prompt_tokens
                .saturating_sub(cached.unwrap_or(0))
                .saturating_sub(ctx.req.cache_written.unwrap_or(0)),
            "output_tokens": 1,
        });
        if let Some(cached) = cached {
            usage["cache_read_input_tokens"] = json!(cached);
            usage["cache_creation_input_tokens"] = json!(ctx.req.cache_written.unwrap_or(0));
        }
        let message = json!({
            "id": ctx.id, "type": "message", "role": "assistant", "model": ctx.req.model, "content": [],
            "stop_reason": null, "usage": usage,
        });
        vec![
            event(
                "message_start",
                &json!({ "type": "message_start", "message": message }),
            ),
            event(
                "content_block_start",
                &json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } }),
            ),
            event("ping", &json!({ "type": "ping" })),
        ]
    }

    fn chunk(&self, _: &Ctx, text: &str, _: u64, _: Option<&str>) -> String {
        let delta = json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": text } });
        event("content_block_delta", &delta)
    }

    /// A `tool_use` block after the (empty) text block or the call before: the block
    /// before stops, `content_block_start` with the id, name and `input: {}`, then
    /// `input_json_delta`s.
    fn tool_chunk(
        &self,
        _: &Ctx,
        call: &CallRef,
        arguments: &str,
        _: u64,
        _: Option<&str>,
    ) -> String {
        let index = call.index + 1;
        let mut events = String::new();
        if call.open {
            events.push_str(&event(
                "content_block_stop",
                &json!({ "type": "content_block_stop", "index": call.index }),
            ));
            let id = call.id.unwrap_or("toolu_sim");
            let block = json!({ "type": "tool_use", "id": id, "name": call.name, "input": {} });
            events.push_str(&event(
                "content_block_start",
                &json!({ "type": "content_block_start", "index": index, "content_block": block }),
            ));
        }
        let delta = json!({ "type": "content_block_delta", "index": index, "delta": { "type": "input_json_delta", "partial_json": arguments } });
        events.push_str(&event("content_block_delta", &delta));
        events
    }

    fn epilogue(&self, ctx: &Ctx, tokens: u64) -> Vec<String> {
        let reason = match (tokens >= ctx.req.max_tokens, ctx.calls > 0) {
            (true, _) => "max_tokens",
            (false, true) => "tool_use",
            (false, false) => "end_turn",
        };
        vec![
            event(
                "content_block_stop",
                &json!({ "type": "content_block_stop", "index": ctx.calls }),
            ),
            event(
                "message_delta",
                &json!({ "type": "message_delta", "delta": { "stop_reason": reason, "stop_sequence": null }, "usage": { "output_tokens": tokens + ctx.hidden, "output_tokens_details": { "thinking_tokens": ctx.hidden } } }),
            ),
            event("message_stop", &json!({ "type": "message_stop" })),
        ]
    }

    fn error(&self, _: &Ctx) -> String {
        event(
            "error",
            &json!({ "type": "error", "error": { "type": "api_error", "message": "Internal server error" } }),
        )
    }
}
