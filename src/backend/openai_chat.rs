//! `backend = "openai-chat"`: the OpenAI chat completions endpoint,
//! `POST /v1/chat/completions`, with the prompt as one user message.

use serde_json::json;

use super::openai_wire::{OpenAiStreamParser, common_body};
use super::{Backend, RequestSpec, StreamParser, finish_body};
use crate::prompt::Prompt;
use crate::target::Target;

#[derive(Debug)]
pub struct OpenAiChat;

impl Backend for OpenAiChat {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut body = common_body(target, prompt);
        body.insert(
            "messages".into(),
            json!([{ "role": "user", "content": prompt.text }]),
        );
        RequestSpec::json(finish_body(body, target))
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(OpenAiStreamParser)
    }
}
