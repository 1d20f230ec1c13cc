//! Text Generation Inference `/generate_stream`: one event per token, the last one with
//! `generated_text` (and `details` when asked); no `[DONE]`. TGI's own axum version writes
//! `data:` without a space, and so does this.

use serde_json::{Value, json};

use super::{Ctx, Render};

pub struct Tgi;

fn tgi_data(value: &Value) -> String {
    format!("data:{value}\n\n")
}

impl Render for Tgi {
    fn preamble(&self, _: &Ctx) -> Vec<String> {
        Vec::new()
    }

    fn chunk(&self, ctx: &Ctx, text: &str, tokens: u64, finish: Option<&str>) -> String {
        // The only empty token the simulator sends is an EOS (the `empty` fault): special.
        let token =
            json!({ "id": tokens, "text": text, "logprob": -0.5, "special": text.is_empty() });
        let (generated_text, details) = match finish {
            None => (Value::Null, Value::Null),
            Some(reason) => {
                let reason = if reason == "stop" {
                    "eos_token"
                } else {
                    reason
                };
                let details = ctx.usage.then(|| {
                    json!({ "finish_reason": reason, "generated_tokens": tokens, "seed": null, "input_length": ctx.req.prompt_tokens })
                });
                (
                    Value::from("(generated text)"),
                    details.unwrap_or(Value::Null),
                )
            }
        };
        tgi_data(
            &json!({ "index": tokens, "token": token, "generated_text": generated_text, "details": details }),
        )
    }

    fn epilogue(&self, _: &Ctx, _: u64) -> Vec<String> {
        Vec::new()
    }

    fn error(&self, _: &Ctx) -> String {
        tgi_data(
            &json!({ "error": "Request failed during generation: simulated", "error_type": "generation" }),
        )
    }
}
