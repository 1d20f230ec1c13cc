//! Bedrock's `ConverseStream`, written as SSE-shaped events that [`crate::sim::bedrock`]
//! frames in the AWS event stream: `messageStart`, `contentBlockDelta`s (text, reasoning,
//! a tool call's input after its `contentBlockStart`), `contentBlockStop`, `messageStop`
//! with the stop reason, then `metadata` with usage and Bedrock's latency.

use serde_json::json;

use super::{CallRef, Ctx, Render, event};

pub struct Converse;

impl Render for Converse {
    fn preamble(&self, _: &Ctx) -> Vec<String> {
        vec![event("messageStart", &json!({ "role": "assistant" }))]
    }

    fn chunk(&self, _: &Ctx, text: &str, _: u64, _: Option<&str>) -> String {
        event(
            "contentBlockDelta",
            &json!({ "contentBlockIndex": 0, "delta": { "text": text } }),
        )
    }

    fn reasoning_chunk(&self, _: &Ctx, text: &str, _: u64, _: Option<&str>) -> String {
        event(
            "contentBlockDelta",
            &json!({ "contentBlockIndex": 0, "delta": { "reasoningContent": { "text": text } } }),
        )
    }

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
            let id = call.id.unwrap_or("tooluse_sim");
            events.push_str(&event(
                "contentBlockStart",
                &json!({ "contentBlockIndex": index, "start": { "toolUse": { "toolUseId": id, "name": call.name } } }),
            ));
        }
        events.push_str(&event(
            "contentBlockDelta",
            &json!({ "contentBlockIndex": index, "delta": { "toolUse": { "input": arguments } } }),
        ));
        events
    }

    fn epilogue(&self, ctx: &Ctx, tokens: u64) -> Vec<String> {
        let reason = match (tokens >= ctx.req.max_tokens, ctx.calls > 0) {
            (true, _) => "max_tokens",
            (false, true) => "tool_use",
            (false, false) => "end_turn",
        };
        let prompt = ctx.req.prompt_tokens;
        let output = tokens + ctx.hidden;
        vec![
            event(
                "contentBlockStop",
                &json!({ "contentBlockIndex": ctx.calls }),
            ),
            event("messageStop", &json!({ "stopReason": reason })),
            event(
                "metadata",
                &json!({
                    "usage": { "inputTokens": prompt, "outputTokens": output, "totalTokens": prompt + output },
                    "metrics": { "latencyMs": 1 },
                }),
            ),
        ]
    }

    fn filtered(&self, ctx: &Ctx, tokens: u64) -> Vec<String> {
        let prompt = ctx.req.prompt_tokens;
        vec![
            event("contentBlockStop", &json!({ "contentBlockIndex": 0 })),
            event(
                "messageStop",
                &json!({ "stopReason": "guardrail_intervened" }),
            ),
            event(
                "metadata",
                &json!({ "usage": { "inputTokens": prompt, "outputTokens": tokens, "totalTokens": prompt + tokens } }),
            ),
        ]
    }

    fn error(&self, _: &Ctx) -> String {
        event(
            "exception/modelStreamErrorException",
            &json!({ "message": "simulated model stream error", "originalStatusCode": 500 }),
        )
    }
}
