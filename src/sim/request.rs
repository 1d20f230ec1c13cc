//! What the simulator was asked: the endpoint's dialect and the request fields that shape
//! the response (model, output length, streaming and usage options), parsed per dialect,
//! and the images and videos to load (their parts are read by [`super::parts`]).

use http::Method;
use serde_json::Value;

use super::conversation;
use super::parts::{self, MediaRef, prompt_text, words};
use super::structured::FormatAt;
use crate::backend::wav;

/// Output length when a request names none.
const DEFAULT_MAX_TOKENS: u64 = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Completions,
    Chat,
    Audio,
    Tgi,
    Triton,
    Anthropic,
    Responses,
    Embeddings,
    /// Amazon Bedrock `ConverseStream`, answered in the AWS event stream.
    BedrockConverse,
    /// Anthropic's Messages through Bedrock's `InvokeModelWithResponseStream`.
    BedrockInvoke,
    /// Gemini's `streamGenerateContent` (the Gemini API's path and Vertex AI's).
    Gemini,
}

/// Every endpoint the simulator serves (method, path), for its start-up line and
/// docs/simulator.md; a test routes each POST one, so the list cannot drift from [`Dialect::route`].
pub const ENDPOINTS: [(&str, &str); 16] = [
    ("POST", "/v1/completions"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/messages"),
    ("POST", "/v1/responses"),
    ("POST", "/v1/embeddings"),
    ("POST", "/v1/audio/transcriptions"),
    ("POST", "/generate_stream"),
    ("POST", "/v2/models/<model>/generate_stream"),
    ("POST", "/model/<model>/converse-stream"),
    ("POST", "/model/<model>/invoke-with-response-stream"),
    ("POST", "/v1beta/models/<model>:streamGenerateContent"),
    (
        "POST",
        "/v1/projects/<project>/locations/<region>/publishers/google/models/<model>:streamGenerateContent",
    ),
    (
        "POST",
        "/v1/projects/<project>/locations/<region>/publishers/anthropic/models/<model>:streamRawPredict",
    ),
    ("POST", "/openai/deployments/<deployment>/chat/completions"),
    ("GET", "/v1/models"),
    ("GET", "/health"),
];

impl Dialect {
    /// The dialect served at `path`, if any.
    pub fn route(method: &Method, path: &str) -> Option<Self> {
        if method != Method::POST {
            return None;
        }
        Some(match path {
            "/v1/completions" => Self::Completions,
            "/v1/chat/completions" => Self::Chat,
            "/v1/audio/transcriptions" => Self::Audio,
            "/generate_stream" => Self::Tgi,
            "/v1/messages" => Self::Anthropic,
            "/v1/responses" => Self::Responses,
            "/v1/embeddings" => Self::Embeddings,
            p if p.starts_with("/v2/models/") && p.ends_with("/generate_stream") => Self::Triton,
            p if p.starts_with("/model/") && p.ends_with("/converse-stream") => {
                Self::BedrockConverse
            }
            p if p.starts_with("/model/") && p.ends_with("/invoke-with-response-stream") => {
                Self::BedrockInvoke
            }
            p if p.ends_with(":streamGenerateContent") && p.contains("/models/") => Self::Gemini,
            p if p.ends_with(":streamRawPredict")
                && p.contains("/publishers/anthropic/models/") =>
            {
                Self::Anthropic
            }
            p if p.starts_with("/openai/deployments/") && p.ends_with("/chat/completions") => {
                Self::Chat
            }
            _ => return None,
        })
    }
}

/// The model a path names, percent-decoded: Bedrock's `/model/<id>/…`, Google's
/// `…/models/<id>:…`, Azure's `/openai/deployments/<id>/…`.
pub fn path_model(path: &str) -> Option<String> {
    let id = if let Some(rest) = path.strip_prefix("/model/") {
        rest.split('/').next()?
    } else if let Some(rest) = path.strip_prefix("/openai/deployments/") {
        rest.split('/').next()?
    } else if path.contains(':') && path.contains("/models/") {
        path.rsplit("/models/").next()?.split(':').next()?
    } else {
        return None;
    };
    url::form_urlencoded::parse(format!("m={id}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRequest {
    pub dialect: Dialect,
    pub model: String,
    pub prompt_tokens: u64,
    pub max_tokens: u64,
    pub stream: bool,
    pub include_usage: bool,
    pub continuous_usage: bool,
    /// Images and videos that loaded (each adds `--prefill-per-image`).
    pub media_items: u64,
    /// Pixels of those images (`--prefill-per-megapixel`).
    pub image_pixels: u64,
    /// The prompt's text (every string of it but media and roles): what the toy model reads.
    pub prompt: String,
    /// Greedy decoding was asked for (`temperature` 0, TGI `do_sample` false, or
    /// logprobs): answered by the toy model ([`super::model`]) rather than filler words.
    pub greedy: bool,
    /// A sampled request for random words (the sampling check's): answered by the
    /// sampler ([`super::sampler`]), not greedily.
    pub sampling: Option<super::sampler::Sampling>,
    /// Logprobs asked for, with this many alternatives per token (completions
    /// `logprobs: k`; chat `logprobs: true` with `top_logprobs: k`).
    pub logprobs: Option<u32>,
    /// A JSON answer or tools asked for: answered by [`super::structured`].
    pub structure: Option<super::structured::SimStructure>,
    /// Of the prompt, the tokens the prefix cache served; `None` without a prefix cache
    /// (and then usage says nothing about caching).
    pub cached_tokens: Option<u64>,
    /// What usage says of them: the cached tokens, or what a server reporting another way
    /// says (`--report-cached`).
    pub reported_cached: Option<u64>,
    /// Anthropic: the prompt's words up to its last cache breakpoint (`cache_control` on a
    /// block, or at the end with top-level automatic caching); none, nothing is cached.
    pub cache_breakpoint: Option<u64>,
    /// Anthropic: the words written to its prompt cache (`cache_creation_input_tokens`).
    pub cache_written: Option<u64>,
    /// Anthropic: the prompt's words at the end of each content block, where its cache
    /// looks for an earlier breakpoint's entry.
    pub block_ends: Vec<u64>,
    /// The conversation its history holds (chat, Anthropic, Responses).
    pub conversation: conversation::Conversation,
    /// The value of the gateway's `--route-header`, if the request has it.
    pub session: Option<String>,
    /// The replica behind the gateway that serves it (0 with one).
    pub replica: usize,
}

/// Where `dialect` asks for a JSON answer.
fn format_at(dialect: Dialect) -> FormatAt {
    match dialect {
        Dialect::Chat | Dialect::Completions => FormatAt::ResponseFormat,
        Dialect::Responses => FormatAt::TextFormat,
        Dialect::Tgi => FormatAt::Grammar,
        _ => FormatAt::None,
    }
}

/// `temperature` 0 (or `do_sample: false`, in TGI's parameters) asks for greedy decoding.
fn greedy(body: Option<&Value>) -> bool {
    let body = body.and_then(Value::as_object);
    let zero = body
        .and_then(|b| b.get("temperature"))
        .and_then(Value::as_f64)
        .is_some_and(|t| t == 0.0);
    let no_sampling = body
        .and_then(|b| b.get("do_sample"))
        .and_then(Value::as_bool)
        == Some(false);
    zero || no_sampling
}

/// `temperature` above 0, with the truncations asked (top-level, or in TGI's
/// `parameters`); a top-k of 0 or below and a top-p of 1 are off.
fn sampling(body: &Value) -> Option<super::sampler::Sampling> {
    let at = |key: &str| {
        body.get(key)
            .or_else(|| body.get("parameters").and_then(|p| p.get(key)))
            .and_then(Value::as_f64)
    };
    let temperature = at("temperature").filter(|t| *t > 0.0)?;
    Some(super::sampler::Sampling {
        temperature,
        top_k: at("top_k").filter(|k| *k > 0.0).map_or(0, |k| k as u32),
        top_p: at("top_p").filter(|p| *p > 0.0 && *p < 1.0).unwrap_or(1.0),
        min_p: at("min_p").filter(|p| *p > 0.0 && *p <= 1.0).unwrap_or(0.0),
        seed: body.get("seed").and_then(Value::as_u64),
    })
}

/// Completions' `logprobs: k`, or chat's `logprobs: true` with `top_logprobs: k`.
fn logprobs(body: &Value) -> Option<u32> {
    let k = |v: Option<&Value>| v.and_then(Value::as_u64).map(|k| k.min(20) as u32);
    match body.get("logprobs") {
        Some(Value::Bool(true)) => Some(k(body.get("top_logprobs")).unwrap_or(0)),
        Some(Value::Number(_)) => k(body.get("logprobs")),
        _ => None,
    }
}

fn number(body: &Value, keys: &[&str]) -> Option<u64> {
    keys.iter()
        .find_map(|k| body.get(*k).and_then(Value::as_u64))
}

fn flag(body: Option<&Value>, key: &str) -> bool {
    body.and_then(|b| b.get(key))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The request, and its media still to load (in content order). Its prompt tokens are the
/// text's words until the media add theirs.
pub fn parse(
    dialect: Dialect,
    content_type: &str,
    body: &[u8],
) -> Result<(SimRequest, Vec<MediaRef>), String> {
    if dialect == Dialect::Audio {
        return Ok((parse_audio(content_type, body)?, Vec::new()));
    }
    let mut json: Value =
        serde_json::from_slice(body).map_err(|e| format!("invalid request JSON: {e}"))?;
    let model = json
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("sim")
        .to_owned();
    let options = json.get("stream_options");
    let mut request = SimRequest {
        dialect,
        model,
        prompt_tokens: 0,
        max_tokens: number(&json, &["max_completion_tokens", "max_tokens"])
            .unwrap_or(DEFAULT_MAX_TOKENS),
        stream: flag(Some(&json), "stream"),
        include_usage: flag(options, "include_usage"),
        continuous_usage: flag(options, "continuous_usage_stats"),
        media_items: 0,
        image_pixels: 0,
        prompt: String::new(),
        greedy: greedy(Some(&json)),
        sampling: sampling(&json),
        logprobs: logprobs(&json),
        structure: super::structured::parse(format_at(dialect), &json),
        cached_tokens: None,
        reported_cached: None,
        cache_breakpoint: None,
        cache_written: None,
        block_ends: Vec::new(),
        conversation: match dialect {
            Dialect::Chat => conversation::chat(&json),
            Dialect::Anthropic | Dialect::BedrockInvoke => conversation::anthropic(&json),
            Dialect::Responses => conversation::responses(&json),
            _ => conversation::Conversation::default(),
        },
        session: None,
        replica: 0,
    };
    request.greedy |= request.logprobs.is_some();
    let prompt_key = match dialect {
        Dialect::Completions => "prompt",
        Dialect::Chat | Dialect::Anthropic | Dialect::BedrockConverse | Dialect::BedrockInvoke => {
            "messages"
        }
        Dialect::Gemini => "contents",
        Dialect::Tgi => "inputs",
        Dialect::Triton => "text_input",
        Dialect::Responses | Dialect::Embeddings => "input",
        Dialect::Audio => "",
    };
    request.prompt = prompt_text(json.get(prompt_key));
    if !super::sampler::asks_for_random_words(&request.prompt) {
        request.sampling = None;
    }
    request.greedy &= request.sampling.is_none();
    let mut media = Vec::new();
    match dialect {
        Dialect::Completions => {
            request.prompt_tokens = words(Some(json.get("prompt").ok_or("`prompt` is required")?))
        }
        Dialect::Chat => {
            let prompt = parts::messages(json.get_mut("messages"), false)?;
            (request.prompt_tokens, media) = (prompt.words, prompt.media);
        }
        Dialect::Tgi => {
            request.prompt_tokens = words(Some(json.get("inputs").ok_or("`inputs` is required")?));
            let parameters = json.get("parameters");
            request.max_tokens = parameters
                .and_then(|p| p.get("max_new_tokens"))
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_MAX_TOKENS);
            request.stream = true;
            request.include_usage = flag(parameters, "details");
            request.greedy = greedy(parameters);
        }
        Dialect::Triton => {
            request.prompt_tokens = words(Some(
                json.get("text_input").ok_or("`text_input` is required")?,
            ));
            request.model = "ensemble".into();
        }
        Dialect::BedrockConverse => {
            // Converse: `content` blocks of `{"text": …}`, the limits in `inferenceConfig`.
            if !json.get("messages").is_some_and(Value::is_array) {
                return Err("`messages` is required".into());
            }
            request.prompt_tokens = request.prompt.split_whitespace().count() as u64;
            let inference = json.get("inferenceConfig");
            request.max_tokens = inference
                .and_then(|c| c.get("maxTokens"))
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_MAX_TOKENS);
            request.sampling = inference
                .and_then(sampling)
                .filter(|_| super::sampler::asks_for_random_words(&request.prompt));
            request.greedy = greedy(inference) && request.sampling.is_none();
            request.stream = true;
            request.include_usage = true;
        }
        Dialect::Gemini => {
            if !json.get("contents").is_some_and(Value::is_array) {
                return Err("`contents` is required".into());
            }
            request.prompt_tokens = request.prompt.split_whitespace().count() as u64;
            let config = json.get("generationConfig");
            request.max_tokens = config
                .and_then(|c| c.get("maxOutputTokens"))
                .and_then(Value::as_u64)
                .unwrap_or(DEFAULT_MAX_TOKENS);
            request.sampling = config
                .and_then(sampling)
                .filter(|_| super::sampler::asks_for_random_words(&request.prompt));
            request.greedy = greedy(config) && request.sampling.is_none();
            request.stream = true;
            request.include_usage = true;
            request.continuous_usage = true;
        }
        Dialect::Anthropic | Dialect::BedrockInvoke => {
            if dialect == Dialect::BedrockInvoke {
                // The model is the URL's, and the stream the endpoint's.
                request.stream = true;
            }
            let prompt = parts::messages(json.get_mut("messages"), true)?;
            request.cache_breakpoint = match json.get("cache_control") {
                Some(_) => Some(prompt.words),
                None => prompt.breakpoint,
            };
            (request.prompt_tokens, media) = (prompt.words, prompt.media);
            request.block_ends = prompt.block_ends;
            request.include_usage = true;
        }
        Dialect::Responses => {
            let prompt = parts::responses_input(json.get_mut("input"))?;
            (request.prompt_tokens, media) = (prompt.words, prompt.media);
            request.max_tokens =
                number(&json, &["max_output_tokens"]).unwrap_or(DEFAULT_MAX_TOKENS);
            request.include_usage = true;
        }
        Dialect::Embeddings => {
            request.prompt_tokens = words(Some(json.get("input").ok_or("`input` is required")?));
        }
        Dialect::Audio => {}
    }
    Ok((request, media))
}

/// The transcription form: a WAV file part and text fields. Audio counts as 10 tokens
/// per second.
fn parse_audio(content_type: &str, body: &[u8]) -> Result<SimRequest, String> {
    let boundary = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .map(|b| b.trim_matches('"'))
        .ok_or("expected multipart/form-data with a boundary")?;
    let fields = multipart_fields(body, boundary)?;
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    };
    let text = |name: &str| field(name).map(|v| String::from_utf8_lossy(v).into_owned());
    let yes = |name: &str| text(name).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let audio = field("file").ok_or("the `file` part is required")?;
    let seconds = wav::seconds(audio).ok_or("`file` is not a 16-bit PCM WAV")?;
    Ok(SimRequest {
        dialect: Dialect::Audio,
        model: text("model").unwrap_or_else(|| "sim".into()),
        prompt_tokens: (seconds * 10.0).ceil() as u64,
        max_tokens: text("max_completion_tokens")
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_MAX_TOKENS),
        stream: yes("stream"),
        include_usage: yes("stream_include_usage"),
        continuous_usage: yes("stream_continuous_usage_stats"),
        media_items: 0,
        image_pixels: 0,
        prompt: String::new(),
        greedy: false,
        sampling: None,
        logprobs: None,
        structure: None,
        cached_tokens: None,
        reported_cached: None,
        cache_breakpoint: None,
        cache_written: None,
        block_ends: Vec::new(),
        conversation: conversation::Conversation::default(),
        session: None,
        replica: 0,
    })
}

/// `(name, content)` of each part of a multipart/form-data body.
fn multipart_fields(body: &[u8], boundary: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    let delimiter = format!("--{boundary}");
    let mut fields = Vec::new();
    for part in split(body, delimiter.as_bytes()).into_iter().skip(1) {
        if part.starts_with(b"--") {
            break; // the closing delimiter
        }
        let part = part.strip_prefix(b"\r\n").unwrap_or(part);
        let split_at = find(part, b"\r\n\r\n").ok_or("a multipart part has no header end")?;
        let headers = String::from_utf8_lossy(&part[..split_at]);
        let content = &part[split_at + 4..];
        let content = content.strip_suffix(b"\r\n").unwrap_or(content);
        let name = headers
            .split(';')
            .find_map(|p| p.trim().strip_prefix("name="))
            .map(|n| n.trim_matches('"').to_owned())
            .ok_or("a multipart part has no name")?;
        fields.push((name, content.to_vec()));
    }
    Ok(fields)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn split<'a>(mut body: &'a [u8], delimiter: &[u8]) -> Vec<&'a [u8]> {
    let mut parts = Vec::new();
    while let Some(at) = find(body, delimiter) {
        parts.push(&body[..at]);
        body = &body[at + delimiter.len()..];
    }
    parts.push(body);
    parts
}

#[cfg(test)]
mod tests;
