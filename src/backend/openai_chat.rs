//! `backend = "openai-chat"`: the OpenAI chat completions endpoint,
//! `POST /v1/chat/completions`, with the prompt as one user message.

use serde_json::{Value, json};

use super::openai_wire::{OpenAiStreamParser, common_body, finish_body};
use super::{Backend, StreamParser};
use crate::config::Target;

#[derive(Debug)]
pub struct OpenAiChat;

impl Backend for OpenAiChat {
    fn request_body(&self, target: &Target, prompt: &str) -> Value {
        let mut body = common_body(target);
        body.insert(
            "messages".into(),
            json!([{ "role": "user", "content": prompt }]),
        );
        finish_body(body, target)
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(OpenAiStreamParser)
    }
}
