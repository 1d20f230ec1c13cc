//! `backend = "openai-chat"`: the OpenAI chat completions endpoint,
//! `POST /v1/chat/completions`, with the prompt as one user message. With images or videos
//! the message's content is a list of parts, the text first and then `image_url` and
//! `video_url` parts (data URLs or http URLs), as vLLM's benchmark sends them.
//!
//! `backend = "tgi-chat"`: the same route on Text Generation Inference, which reads
//! `response_format` as its own grammar (`{"type": "json", "value": schema}`, its router's
//! `GrammarType`) and refuses OpenAI's `{"type": "json_schema", "json_schema": …}` with a
//! 422, and refuses `response_format` together with `tools`. Everything else is the chat
//! format (TGI maps `temperature: 0` to greedy decoding on this route).

use serde_json::{Map, Value, json};

use super::openai_wire::{self, OpenAiStreamParser, common_body};
use super::{Backend, RequestSpec, StreamParser, finish_body};
use crate::endpoint::Target;
use crate::media::MediaKind;
use crate::media::body::{Slice, placeholder};
use crate::prompt::{Greedy, Prompt};
use crate::structure::{Format, Structure};

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
        let messages = match &prompt.conversation {
            Some(conversation) => super::history::chat(conversation),
            None => json!([{ "role": "user", "content": content }]),
        };
        body.insert("messages".into(), messages);
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

/// `backend = "azure-openai"`: chat completions on an Azure OpenAI / Azure AI Foundry
/// deployment (`/openai/deployments/<deployment>/chat/completions?api-version=…`), its key
/// in `api-key` or an Entra ID token ([`crate::auth`]). The chat format, without vLLM's
/// `ignore_eos` (Azure refuses arguments it does not know). Azure's content filter says
/// `finish_reason: content_filter` in the stream: `content_filtered`, as on OpenAI.
#[derive(Debug)]
pub struct AzureOpenAi;

impl Backend for AzureOpenAi {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        let mut spec = OpenAiChat.request(target, prompt);
        if let super::RequestBody::Json(Value::Object(body)) = &mut spec.body {
            body.remove("ignore_eos");
        }
        spec
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        OpenAiChat.stream_parser()
    }

    fn reports_logprobs(&self) -> bool {
        true
    }

    fn greedy(&self, body: &mut Map<String, Value>, greedy: &Greedy) {
        OpenAiChat.greedy(body, greedy);
    }

    fn structure(
        &self,
        body: &mut Map<String, Value>,
        structure: &Structure,
    ) -> Result<(), String> {
        OpenAiChat.structure(body, structure)
    }

    fn authorize(
        &self,
        key: &crate::endpoint::Secret,
    ) -> Vec<(http::HeaderName, http::HeaderValue)> {
        match http::HeaderValue::from_str(key.expose()) {
            Ok(mut value) => {
                value.set_sensitive(true);
                vec![(http::HeaderName::from_static("api-key"), value)]
            }
            Err(_) => Vec::new(),
        }
    }
}

#[derive(Debug)]
pub struct TgiChat;

impl Backend for TgiChat {
    fn request(&self, target: &Target, prompt: &Prompt) -> RequestSpec {
        OpenAiChat.request(target, prompt)
    }

    fn stream_parser(&self) -> Box<dyn StreamParser> {
        OpenAiChat.stream_parser()
    }

    fn reports_logprobs(&self) -> bool {
        OpenAiChat.reports_logprobs()
    }

    fn greedy(&self, body: &mut Map<String, Value>, greedy: &Greedy) {
        OpenAiChat.greedy(body, greedy);
    }

    /// TGI's router takes no `parallel_tool_calls`: its default stands.
    fn parallel_calls(&self, body: &mut Map<String, Value>, allowed: bool) {
        let _ = (body, allowed);
    }

    fn structure(
        &self,
        body: &mut Map<String, Value>,
        structure: &Structure,
    ) -> Result<(), String> {
        let tools = !structure.tools.is_empty() || structure.tool_choice.is_some();
        if tools && structure.response_format.is_some() {
            return Err("TGI refuses `response_format` together with `tools` (\"Grammar and tools are mutually exclusive\"): ask for one of them per prompt".into());
        }
        let format = structure.response_format.as_ref().map(|f| match f {
            Format::JsonObject => json!({ "type": "object" }),
            Format::JsonSchema { schema, .. } => schema.json.clone(),
        });
        let without_format = Structure {
            response_format: None,
            ..structure.clone()
        };
        openai_wire::structure(body, &without_format, true)?;
        if let Some(schema) = format {
            body.insert(
                "response_format".into(),
                json!({ "type": "json", "value": schema }),
            );
        }
        Ok(())
    }
}
