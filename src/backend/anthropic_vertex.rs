//! `backend = "anthropic-vertex"`: Anthropic's Messages API on Vertex AI,
//! `…/publishers/anthropic/models/<model>:streamRawPredict`, with an OAuth token from
//! Application Default Credentials ([`crate::auth::google`]): the Messages body without
//! `model` (the URL names it), with `anthropic_version: vertex-2023-10-16`, answered in the
//! Messages SSE stream and read by the Anthropic parser, so the same model is measured by
//! the same rules through Anthropic's door, Bedrock's and this one.

use serde_json::{Map, Value};

use super::anthropic::{Anthropic, MessagesParser};
use super::{Backend, RequestBody, RequestSpec, StreamParser};
use crate::endpoint::Target;
use crate::prompt::Prompt;
use crate::structure::Structure;

/// The version Vertex AI's Anthropic models take in the body.
pub const VERTEX_VERSION: &str = "vertex-2023-10-16";

#[derive(Debug)]
pub struct AnthropicVertex;

impl Backend for AnthropicVertex {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut spec = Anthropic.request(target, prompt);
        if let RequestBody::Json(Value::Object(body)) = &mut spec.body {
            body.remove("model");
            body.entry("anthropic_version")
                .or_insert_with(|| Value::from(VERTEX_VERSION));
        }
        // The version goes in the body on Vertex AI.
        spec.headers.clear();
        spec
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(MessagesParser)
    }

    fn structure(
        &self,
        body: &mut Map<String, Value>,
        structure: &Structure,
    ) -> Result<(), String> {
        Anthropic.structure(body, structure)
    }

    fn parallel_calls(&self, body: &mut Map<String, Value>, allowed: bool) {
        Anthropic.parallel_calls(body, allowed);
    }
}
