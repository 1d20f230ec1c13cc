//! `backend = "openai-embeddings"`: `POST /v1/embeddings`, not streamed.
//!
//! Success requires a non-empty numeric vector (floats, or base64 little-endian float32 if
//! the user asks for that encoding), of `embedding_dimensions` entries when configured.
//! Recorded: E2EL and prompt tokens; there are no output tokens and no TTFT.

use base64::Engine;
use serde_json::{Map, Value};

use super::{Backend, RequestSpec, StreamParser, count_field};
use crate::endpoint::Target;
use crate::error::ProbeError;
use crate::prompt::Prompt;
use crate::record::{ResponseInfo, WholeBody};

#[derive(Debug)]
pub struct Embeddings;

impl Backend for Embeddings {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut body = Map::new();
        body.insert("model".into(), Value::from(prompt.model.as_str()));
        body.insert("input".into(), Value::from(prompt.text.as_str()));
        body.insert("encoding_format".into(), Value::from("float"));
        // Sampling parameters mean nothing here; only extra_body is passed through.
        body.extend(target.extra_body.clone());
        RequestSpec::json(Value::Object(body))
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(super::openai_wire::OpenAiStreamParser)
    }

    fn parse_body(
        &self,
        body: &[u8],
        target: &Target,
        info: &mut ResponseInfo,
    ) -> Result<WholeBody, ProbeError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| ProbeError::InvalidResponse(format!("bad JSON body: {e}")))?;
        if let Some(error) = super::json_error(&value) {
            return Err(error);
        }
        info.model = value
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let embedding = value
            .get("data")
            .and_then(|d| d.get(0))
            .and_then(|d| d.get("embedding"))
            .ok_or_else(|| ProbeError::InvalidResponse("no `data[0].embedding`".into()))?;
        let dimensions = vector_len(embedding)?;
        if let Some(expected) = target.options.embedding_dimensions {
            if dimensions != expected {
                return Err(ProbeError::Validation {
                    check: "embedding_dimensions",
                    detail: format!("{dimensions} dimensions, expected {expected}"),
                });
            }
        }
        let usage = value.get("usage");
        Ok(WholeBody {
            has_output: dimensions > 0,
            output_tokens: None,
            cached_prompt_tokens: None,
            prompt_tokens: count_field(
                usage.and_then(|u| u.get("prompt_tokens")),
                "prompt_tokens",
            )?,
        })
    }
}

/// The length of a float vector, checking every entry is a finite number.
fn vector_len(embedding: &Value) -> Result<usize, ProbeError> {
    match embedding {
        Value::Array(values) => {
            if let Some(bad) = values
                .iter()
                .find(|v| !v.as_f64().is_some_and(f64::is_finite))
            {
                return Err(ProbeError::InvalidResponse(format!(
                    "non-numeric embedding entry {bad}"
                )));
            }
            Ok(values.len())
        }
        Value::String(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| ProbeError::InvalidResponse(format!("bad base64 embedding: {e}")))?;
            if bytes.len() % 4 != 0 {
                return Err(ProbeError::InvalidResponse(
                    "base64 embedding is not float32s".into(),
                ));
            }
            let finite = bytes
                .chunks_exact(4)
                .all(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite());
            if !finite {
                return Err(ProbeError::InvalidResponse(
                    "non-finite embedding entry".into(),
                ));
            }
            Ok(bytes.len() / 4)
        }
        other => Err(ProbeError::InvalidResponse(format!(
            "embedding is not a vector: {other}"
        ))),
    }
}
