//! `backend = "deepspeed-mii"`: DeepSpeed-MII, not streamed.
//!
//! Posts `{model, prompt, max_tokens}` as vLLM's benchmark client does (MII's OpenAI-style
//! `/v1/completions` by default) and reads whichever response shape MII serves:
//! `{"choices": [{"text"}], "usage"}` (OpenAI server), `{"text": [...]}` (`/generate`),
//! or `[{"generated_text", "generated_length"}]` (the `/mii/<deployment>` gateway).
//! Without a stream there is no first token: only E2EL and token counts are recorded.

use serde_json::{Map, Value};

use super::{Backend, RequestSpec, StreamParser, count_field, finish_body};
use crate::endpoint::Target;
use crate::error::ProbeError;
use crate::prompt::Prompt;
use crate::record::{ResponseInfo, WholeBody};

#[derive(Debug)]
pub struct DeepSpeedMii;

impl Backend for DeepSpeedMii {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut body = Map::new();
        body.insert("model".into(), Value::from(prompt.model.as_str()));
        body.insert("prompt".into(), Value::from(prompt.text.as_str()));
        body.insert("max_tokens".into(), Value::from(prompt.max_tokens));
        RequestSpec::json(finish_body(body, target))
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(super::openai_wire::OpenAiStreamParser)
    }

    fn parse_body(
        &self,
        body: &[u8],
        _: &Target,
        info: &mut ResponseInfo,
    ) -> Result<WholeBody, ProbeError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| ProbeError::InvalidResponse(format!("bad JSON body: {e}")))?;
        if let Some(error) = super::json_error(&value) {
            return Err(error);
        }
        let mut whole = WholeBody::default();
        match &value {
            Value::Object(map) if map.contains_key("choices") => {
                let choice = map["choices"].get(0);
                info.text = text_at(choice.and_then(|c| c.get("text")))?;
                info.finish_reason = choice
                    .and_then(|c| c.get("finish_reason"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                info.model = map.get("model").and_then(Value::as_str).map(str::to_owned);
                let usage = map.get("usage");
                whole.output_tokens = count_field(
                    usage.and_then(|u| u.get("completion_tokens")),
                    "completion_tokens",
                )?;
                whole.prompt_tokens =
                    count_field(usage.and_then(|u| u.get("prompt_tokens")), "prompt_tokens")?;
            }
            Value::Object(map) if map.contains_key("text") => {
                info.text = text_at(map["text"].get(0))?;
            }
            Value::Array(items) => {
                let item = items.first();
                info.text = text_at(item.and_then(|i| i.get("generated_text")))?;
                info.finish_reason = item
                    .and_then(|i| i.get("finish_reason"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                whole.output_tokens = count_field(
                    item.and_then(|i| i.get("generated_length")),
                    "generated_length",
                )?;
                whole.prompt_tokens =
                    count_field(item.and_then(|i| i.get("prompt_length")), "prompt_length")?;
            }
            _ => {
                return Err(ProbeError::InvalidResponse(
                    "expected `choices`, `text` or a list of generations".into(),
                ));
            }
        }
        whole.has_output = !info.text.is_empty();
        Ok(whole)
    }
}

fn text_at(value: Option<&Value>) -> Result<String, ProbeError> {
    match value {
        Some(Value::String(text)) => Ok(text.clone()),
        other => Err(ProbeError::InvalidResponse(format!(
            "generated text is not a string: {}",
            other.map_or("missing".into(), Value::to_string)
        ))),
    }
}
