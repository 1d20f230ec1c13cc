//! `backend = "openai-chat"`: the OpenAI chat completions endpoint,
//! `POST /v1/chat/completions`, with the prompt as one user message. With images or videos
//! the message's content is a list of parts, the text first and then `image_url` and
//! `video_url` parts (data URLs or http URLs), as vLLM's benchmark sends them.

use serde_json::{Map, Value, json};

use super::openai_wire::{self, OpenAiStreamParser, common_body};
use super::{Backend, RequestSpec, StreamParser, finish_body};
use crate::endpoint::Target;
use crate::media::MediaKind;
use crate::media::body::{Slice, placeholder};
use crate::prompt::{Greedy, Prompt};
use crate::structure::Structure;

#[derive(Debug)]
pub struct OpenAiChat;

impl Backend for OpenAiChat {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut body = common_body(target, prompt);
        let content = match prompt.media() {
            [] => Value::from(prompt.text.as_str()),
            media => {
                let mut parts = vec![json!({ "type": "text", "text": prompt.text })];
                // Placeholders, spliced with the media's own buffers when sent.
                parts.extend(media.iter().enumerate().map(|(i, m)| {
                    let url = placeholder(i, Slice::Url);
                    match m.kind {
                        MediaKind::Image => {
                            json!({ "type": "image_url", "image_url": { "url": url } })
                        }
                        MediaKind::Video => {
                            json!({ "type": "video_url", "video_url": { "url": url } })
                        }
                    }
                }));
                Value::Array(parts)
            }
        };
        body.insert(
            "messages".into(),
            json!([{ "role": "user", "content": content }]),
        );
        RequestSpec::json(finish_body(body, target))
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        Box::new(OpenAiStreamParser)
    }

    fn reports_logprobs(&self) -> bool {
        true
    }

    fn greedy(&self, body: &mut Map<String, Value>, greedy: &Greedy) {
        openai_wire::greedy(body, greedy, true);
    }

    fn structure(
        &self,
        body: &mut Map<String, Value>,
        structure: &Structure,
    ) -> Result<(), String> {
        openai_wire::structure(body, structure, true)
    }
}
