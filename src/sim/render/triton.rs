//! Triton's generate extension for TensorRT-LLM: flat events with a `text_output` delta,
//! no end marker (the chunked body simply ends), no token counts.

use serde_json::json;

use super::{Ctx, Render, data};

pub struct Triton;

impl Render for Triton {
    fn preamble(&self, _: &Ctx) -> Vec<String> {
        Vec::new()
    }

    fn chunk(&self, ctx: &Ctx, text: &str, _: u64, _: Option<&str>) -> String {
        data(
            &json!({ "model_name": ctx.req.model, "model_version": "1", "sequence_end": false, "text_output": text }),
        )
    }

    fn epilogue(&self, _: &Ctx, _: u64) -> Vec<String> {
        Vec::new()
    }

    fn error(&self, _: &Ctx) -> String {
        data(&json!({ "error": "simulated failure mid-stream" }))
    }
}
