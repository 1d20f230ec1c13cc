//! `backend = "openai"`: the OpenAI text completions endpoint, `POST /v1/completions`.

use serde_json::{Map, Value};

use super::openai_wire::{self, OpenAiStreamParser, common_body};
use super::{Backend, RequestSpec, StreamParser, finish_body};
use crate::endpoint::Target;
use crate::prompt::{Greedy, Prompt};
use crate::structure::Structure;

#[derive(Debug)]
pub struct OpenAiCompletions;

impl Backend for OpenAiCompletions {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut body = common_body(target, prompt);
        body.insert("prompt".into(), Value::from(prompt.text.as_str()));
        RequestSpec::json(finish_body(body, target))
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(OpenAiStreamParser)
    }

    fn reports_logprobs(&self) -> bool {
        true
    }

    fn greedy(&self, body: &mut Map<String, Value>, greedy: &Greedy) {
        openai_wire::greedy(body, greedy, false);
    }

    fn structure(
        &self,
        body: &mut Map<String, Value>,
        structure: &Structure,
    ) -> Result<(), String> {
        openai_wire::structure(body, structure, false)
    }
}
