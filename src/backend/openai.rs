//! `backend = "openai"`: the OpenAI text completions endpoint, `POST /v1/completions`.

use serde_json::Value;

use super::openai_wire::{OpenAiStreamParser, common_body, finish_body};
use super::{Backend, StreamParser};
use crate::config::Target;

#[derive(Debug)]
pub struct OpenAiCompletions;

impl Backend for OpenAiCompletions {
    fn request_body(&self, target: &Target, prompt: &str) -> Value {
        let mut body = common_body(target);
        body.insert("prompt".into(), Value::from(prompt));
        finish_body(body, target)
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(OpenAiStreamParser)
    }
}
