//! The content parts of a prompt, per dialect: the text to count and the images and videos
//! to check. OpenAI/vLLM chat (`text`, `image_url`, `video_url`), Anthropic Messages
//! (`text`, `image` with a `base64` or `url` source) and OpenAI Responses (`input_text`,
//! `input_image`); a plain-string `content` or `input` is text, as it always was.
//!
//! Only the shape is checked here (part types, URL schemes, data URL syntax), as a server
//! validates a request before it loads anything; [`super::media`] then decodes and fetches
//! the payloads. Payload strings are moved out of the request JSON rather than copied:
//! one request may carry tens of megabytes of base64.

use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaKind {
    Image,
    Video,
}

impl MediaKind {
    pub const fn name(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::Video => "video",
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Payload {
    /// Inline base64 (a data URL, or Anthropic's `base64` source) and its declared MIME
    /// type, lowercased.
    Base64 { mime: String, data: String },
    /// An http(s) URL the server fetches.
    Url(String),
}

/// One image or video of a request, not loaded yet.
#[derive(Debug, PartialEq, Eq)]
pub struct MediaRef {
    pub kind: MediaKind,
    pub payload: Payload,
    /// The bytes must be of the declared type: Anthropic checks this, while vLLM sniffs
    /// the bytes and ignores the data URL's type.
    pub strict_type: bool,
}

/// What a prompt holds besides its settings.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Prompt {
    /// Words of the text: the simulator's token count.
    pub words: u64,
    pub media: Vec<MediaRef>,
    /// Anthropic: the words up to the end of the last block marked `cache_control`, the
    /// part its prompt cache may hold.
    pub breakpoint: Option<u64>,
    /// Anthropic: the words up to the end of each block (a string `content` is one).
    pub block_ends: Vec<u64>,
}

/// Keys whose strings are not prompt text.
const NOT_TEXT: &[&str] = &[
    "role",
    "cache_control",
    "type",
    "image_url",
    "video_url",
    "source",
    "url",
    "data",
    "media_type",
    "detail",
    "name",
    "id",
    "cache_control",
];

/// Whether a key's strings are prompt text.
pub fn is_text_key(key: &str) -> bool {
    !NOT_TEXT.contains(&key)
}

/// Every string of a prompt value, media and roles aside, joined by newlines.
pub fn prompt_text(value: Option<&Value>) -> String {
    fn collect(value: &Value, out: &mut String) {
        match value {
            Value::String(s) => {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(s);
            }
            Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            Value::Object(map) => map
                .iter()
                .filter(|(k, _)| is_text_key(k))
                .for_each(|(_, v)| collect(v, out)),
            _ => {}
        }
    }
    let mut out = String::new();
    if let Some(value) = value {
        collect(value, &mut out);
    }
    out
}

/// Words in a prompt value (a string, or anything else serialized), as its token count.
pub fn words(value: Option<&Value>) -> u64 {
    match value {
        Some(Value::String(s)) => s.split_whitespace().count() as u64,
        None | Some(Value::Null) => 0,
        Some(other) => other.to_string().split_whitespace().count() as u64,
    }
}

/// Words of the prompt text of `value` (as [`prompt_text`] has it: what the prefix cache
/// keys on), for the parts of a conversation that are neither text nor media.
fn text_words(value: &Value) -> u64 {
    prompt_text(Some(value)).split_whitespace().count() as u64
}

/// Words of a message's or item's prompt text besides its `content`: a chat call's
/// arguments and a result's call id, a Responses `function_call`'s arguments or
/// `function_call_output`'s output.
fn other_words(message: &Value) -> u64 {
    let Some(fields) = message.as_object() else {
        return 0;
    };
    fields
        .iter()
        .filter(|(k, _)| k.as_str() != "content" && is_text_key(k))
        .map(|(_, v)| text_words(v))
        .sum()
}

/// Chat-style `messages` (OpenAI/vLLM chat, or Anthropic's with `anthropic`): each
/// message's `content` is a string or a list of parts.
pub fn messages(value: Option<&mut Value>, anthropic: bool) -> Result<Prompt, String> {
    let messages = value
        .and_then(Value::as_array_mut)
        .ok_or("`messages` is required")?;
    let mut prompt = Prompt::default();
    for message in messages {
        match message.get_mut("content") {
            Some(Value::Array(parts)) => {
                for part in parts {
                    if anthropic {
                        anthropic_block(part, &mut prompt)?;
                    } else {
                        chat_part(part, &mut prompt)?;
                    }
                }
            }
            content => {
                prompt.words += words(content.map(|c| &*c));
                prompt.block_ends.push(prompt.words);
            }
        }
        prompt.words += other_words(message);
    }
    Ok(prompt)
}

/// The Responses API's `input`: a string, or a list of items whose `content` is a string
/// or a list of parts. Items without content (tool calls and outputs) count their fields'
/// text.
pub fn responses_input(value: Option<&mut Value>) -> Result<Prompt, String> {
    let input = value.ok_or("`input` is required")?;
    let mut prompt = Prompt::default();
    let Value::Array(items) = input else {
        prompt.words = words(Some(input));
        return Ok(prompt);
    };
    for item in items {
        if let Some(Value::Array(parts)) = item.get_mut("content") {
            for part in parts {
                responses_part(part, &mut prompt)?;
            }
        } else {
            prompt.words += words(item.get("content"));
        }
        prompt.words += other_words(item);
    }
    Ok(prompt)
}

fn part_type(part: &Value) -> Result<String, String> {
    part.get("type")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| "Invalid content part: it has no `type`".to_owned())
}

fn unsupported(kind: &str) -> String {
    format!("Unsupported content part type: {kind}")
}

fn failed(kind: MediaKind, detail: &str) -> String {
    format!("Failed to load {}: {detail}", kind.name())
}

/// The string at `value`, moved out of the JSON.
fn take_string(value: Option<&mut Value>) -> Option<String> {
    match value {
        Some(Value::String(s)) => Some(std::mem::take(s)),
        _ => None,
    }
}

/// `part[field]`: `{"url": ...}` as the APIs define it, or the URL as a plain string (which
/// the Responses API uses and vLLM also accepts).
fn url_field(part: &mut Value, field: &str, kind: MediaKind) -> Result<String, String> {
    let value = match part.get_mut(field) {
        Some(Value::Object(object)) => object.get_mut("url"),
        other => other,
    };
    take_string(value).ok_or_else(|| failed(kind, &format!("`{field}` needs a string URL")))
}

fn has_prefix(s: &str, prefix: &str) -> bool {
    s.get(..prefix.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}

/// A data URL's base64 payload, or an http(s) URL to fetch.
fn payload(kind: MediaKind, mut url: String) -> Result<Payload, String> {
    if has_prefix(&url, "http://") || has_prefix(&url, "https://") {
        return Ok(Payload::Url(url));
    }
    if !has_prefix(&url, "data:") {
        return Err(failed(
            kind,
            "the URL must be either a HTTP(S) or a data URL",
        ));
    }
    let comma = url
        .find(',')
        .ok_or_else(|| failed(kind, "malformed data URL (no comma)"))?;
    let mut params = url["data:".len()..comma].split(';');
    let mime = params.next().unwrap_or("").trim().to_ascii_lowercase();
    if !params.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
        return Err(failed(kind, "only base64 data URLs are supported"));
    }
    // In place: the payload may be megabytes long.
    url.drain(..=comma);
    Ok(Payload::Base64 { mime, data: url })
}

fn chat_part(part: &mut Value, prompt: &mut Prompt) -> Result<(), String> {
    let (kind, field) = match part_type(part)?.as_str() {
        "text" => {
            prompt.words += words(part.get("text"));
            return Ok(());
        }
        "image_url" => (MediaKind::Image, "image_url"),
        "video_url" => (MediaKind::Video, "video_url"),
        other => return Err(unsupported(other)),
    };
    let url = url_field(part, field, kind)?;
    prompt.media.push(MediaRef {
        kind,
        payload: payload(kind, url)?,
        strict_type: false,
    });
    Ok(())
}

/// An Anthropic content block; its end is a place the prompt cache looks for an entry
/// (a breakpoint if it has `cache_control`).
fn anthropic_block(block: &mut Value, prompt: &mut Prompt) -> Result<(), String> {
    match part_type(block)?.as_str() {
        "text" => prompt.words += words(block.get("text")),
        // A conversation's history: a call's input, a result's content and call id.
        "tool_use" | "tool_result" | "thinking" | "redacted_thinking" => {
            prompt.words += text_words(block)
        }
        "image" => anthropic_image(block, prompt)?,
        other => return Err(unsupported(other)),
    }
    if block.get("cache_control").is_some() {
        prompt.breakpoint = Some(prompt.words);
    }
    prompt.block_ends.push(prompt.words);
    Ok(())
}

fn anthropic_image(block: &mut Value, prompt: &mut Prompt) -> Result<(), String> {
    let kind = MediaKind::Image;
    let source = block
        .get_mut("source")
        .filter(|s| s.is_object())
        .ok_or_else(|| failed(kind, "an image block needs a `source` object"))?;
    let payload = match part_type(source)?.as_str() {
        "base64" => {
            let mime = source
                .get("media_type")
                .and_then(Value::as_str)
                .ok_or_else(|| failed(kind, "a base64 source needs a `media_type`"))?
                .to_ascii_lowercase();
            let data = take_string(source.get_mut("data"))
                .ok_or_else(|| failed(kind, "a base64 source needs its `data` as a string"))?;
            Payload::Base64 { mime, data }
        }
        "url" => {
            let url = take_string(source.get_mut("url"))
                .ok_or_else(|| failed(kind, "a url source needs its `url` as a string"))?;
            if !(has_prefix(&url, "http://") || has_prefix(&url, "https://")) {
                return Err(failed(kind, "the URL must be a HTTP(S) URL"));
            }
            Payload::Url(url)
        }
        other => return Err(failed(kind, &format!("unsupported source type {other}"))),
    };
    prompt.media.push(MediaRef {
        kind,
        payload,
        strict_type: true,
    });
    Ok(())
}

fn responses_part(part: &mut Value, prompt: &mut Prompt) -> Result<(), String> {
    let kind = MediaKind::Image;
    match part_type(part)?.as_str() {
        "input_text" | "output_text" => {
            prompt.words += words(part.get("text"));
            return Ok(());
        }
        "input_image" => {}
        other => return Err(unsupported(other)),
    }
    if part.get("image_url").is_none() && part.get("file_id").is_some() {
        return Err(failed(
            kind,
            "`file_id` images are not supported; send `image_url`",
        ));
    }
    let url = url_field(part, "image_url", kind)?;
    prompt.media.push(MediaRef {
        kind,
        payload: payload(kind, url)?,
        strict_type: false,
    });
    Ok(())
}

#[cfg(test)]
mod tests;
