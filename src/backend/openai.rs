//! `backend = "openai"`: the OpenAI text completions endpoint, `POST /v1/completions`.

use serde_json::Value;

use super::openai_wire::{OpenAiStreamParser, common_body};
use super::{Backend, RequestSpec, StreamParser, finish_body};
use crate::prompt::Prompt;
use crate::target::Target;

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
}
