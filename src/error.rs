//! Probe failures: the closed set of error categories and the typed errors that map onto them.
//!
//! The category is a metric label, so it must stay bounded: every failure maps to exactly one
//! [`ErrorCategory`] through one exhaustive `match` ([`ProbeError::category`]), never through
//! an error message of ours (a refused request's own body tells a context overflow from
//! another 4xx: [`over_context`]). Transport errors from reqwest are classified by walking their source
//! chain for typed causes (our resolver's [`DnsError`], `rustls::Error`, `io::Error` kinds).

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use http::StatusCode;
use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Why a probe failed. The `as_str` names are the `category` label values (docs/errors.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCategory {
    Dns,
    Connect,
    Tls,
    ConnectTimeout,
    TtftTimeout,
    StallTimeout,
    RequestTimeout,
    Auth,
    RateLimited,
    ContextLength,
    Http4xx,
    Http5xx,
    StreamInterrupted,
    StreamErrorEvent,
    Overloaded,
    InvalidResponse,
    EmptyResponse,
    ReasoningExhausted,
    /// The platform's safety system withheld or cut the answer.
    ContentFiltered,
    TooLarge,
    Validation,
    Other,
}

impl ErrorCategory {
    /// Every category, so each target's error counters can start at zero (a series that
    /// appears only on the first failure breaks `rate()` and "absent" alerts).
    pub const ALL: [ErrorCategory; 22] = [
        Self::Dns,
        Self::Connect,
        Self::Tls,
        Self::ConnectTimeout,
        Self::TtftTimeout,
        Self::StallTimeout,
        Self::RequestTimeout,
        Self::Auth,
        Self::RateLimited,
        Self::ContextLength,
        Self::Http4xx,
        Self::Http5xx,
        Self::StreamInterrupted,
        Self::StreamErrorEvent,
        Self::Overloaded,
        Self::InvalidResponse,
        Self::EmptyResponse,
        Self::ReasoningExhausted,
        Self::ContentFiltered,
        Self::TooLarge,
        Self::Validation,
        Self::Other,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Dns => "dns",
            Self::Connect => "connect",
            Self::Tls => "tls",
            Self::ConnectTimeout => "connect_timeout",
            Self::TtftTimeout => "ttft_timeout",
            Self::StallTimeout => "stall_timeout",
            Self::RequestTimeout => "request_timeout",
            Self::Auth => "auth",
            Self::RateLimited => "rate_limited",
            Self::ContextLength => "context_length",
            Self::Http4xx => "http_4xx",
            Self::Http5xx => "http_5xx",
            Self::StreamInterrupted => "stream_interrupted",
            Self::StreamErrorEvent => "stream_error_event",
            Self::Overloaded => "overloaded",
            Self::InvalidResponse => "invalid_response",
            Self::EmptyResponse => "empty_response",
            Self::ReasoningExhausted => "reasoning_exhausted",
            Self::ContentFiltered => "content_filtered",
            Self::TooLarge => "too_large",
            Self::Validation => "validation",
            Self::Other => "other",
        }
    }

    /// The category an HTTP status maps to (only called for non-2xx statuses).
    pub fn from_status(status: StatusCode) -> Self {
        match status.as_u16() {
            401 | 403 => Self::Auth,
            429 => Self::RateLimited,
            // Anthropic's "overloaded": the provider shedding load across its API, not a
            // failure of the deployment (a 5xx).
            529 => Self::Overloaded,
            400..=499 => Self::Http4xx,
            500..=599 => Self::Http5xx,
            // Redirects are not followed (a probe must measure the endpoint it was given, and
            // OpenAI's SDK does not follow them either): the endpoint answered with something
            // other than a response the probe can use.
            300..=399 => Self::InvalidResponse,
            _ => Self::Other,
        }
    }
}

impl fmt::Display for ErrorCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl EncodeLabelValue for ErrorCategory {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), fmt::Error> {
        fmt::Write::write_str(encoder, self.as_str())
    }
}

/// Name resolution failed. Produced by our own resolver so DNS failures are a type, not a
/// message to match on.
#[derive(Debug, thiserror::Error)]
#[error("DNS lookup of {host} failed")]
pub struct DnsError {
    pub host: String,
    #[source]
    pub source: std::io::Error,
}

/// Why one probe failed. Display strings are for logs; the label comes from [`Self::category`].
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("DNS resolution failed")]
    Dns(#[source] BoxError),
    #[error("connection failed")]
    Connect(#[source] BoxError),
    #[error("TLS handshake failed")]
    Tls(#[source] BoxError),
    #[error("connect timed out")]
    ConnectTimeout(#[source] BoxError),
    #[error("no token within the TTFT timeout of {0:?}")]
    TtftTimeout(Duration),
    #[error("no event for {0:?} after the first token")]
    StallTimeout(Duration),
    #[error("request exceeded its total timeout of {0:?}")]
    RequestTimeout(Duration),
    #[error("HTTP {status}: {body}")]
    Status { status: StatusCode, body: String },
    /// A 3xx, which is not followed. `location` is scheme, host and path only: a query may
    /// carry a token.
    #[error("HTTP {status}: a redirect to {location}; redirects are not followed")]
    Redirect {
        status: StatusCode,
        location: String,
    },
    #[error("stream interrupted: {0}")]
    StreamInterrupted(String),
    #[error("error event in a 2xx stream: {0}")]
    StreamErrorEvent(String),
    /// The provider said it is overloaded inside a 2xx response (Anthropic's
    /// `overloaded_error`): load shed, as its HTTP 529 is.
    #[error("the provider is overloaded (in a 2xx stream): {0}")]
    Overloaded(String),
    #[error("invalid response: {0}")]
    InvalidResponse(String),
    #[error("the response carried no output token")]
    EmptyResponse,
    /// HTTP 200 and tokens generated, every one of them reasoning: the budget ran out
    /// (`finish_reason` length) before the model answered. The user got nothing to read.
    #[error(
        "the model spent its whole budget reasoning and answered nothing ({0}): give the target an output_tokens above its reasoning, or set reasoning_exhausted = \"success\""
    )]
    ReasoningExhausted(String),
    /// The provider's safety system withheld or cut the answer (Bedrock's guardrail and
    /// content filter, Gemini's safety blocks, Azure's content filter): the user got a
    /// refusal from the platform, not the model's answer.
    #[error("the answer was filtered: {0}")]
    ContentFiltered(String),
    /// The context window ran out inside a 2xx stream (Bedrock's and Claude's
    /// `model_context_window_exceeded`, an in-stream validation error saying the input is
    /// too long): what a 400 over the window is.
    #[error("the context window was exceeded (in a 2xx stream): {0}")]
    ContextWindow(String),
    /// The provider said its own model or service failed, whatever status it used for it
    /// (Bedrock's `ModelErrorException` 424, `ModelTimeoutException` 408): its failure.
    #[error("the provider failed: {0}")]
    ProviderFailed(String),
    /// The provider throttled the caller inside a 2xx stream (Bedrock's
    /// `throttlingException`): a rate limit, as a 429 is.
    #[error("rate limited (in a 2xx stream): {0}")]
    Throttled(String),
    #[error("response too large: {0}")]
    TooLarge(String),
    #[error("validation `{check}` failed: {detail}")]
    Validation { check: &'static str, detail: String },
    /// The credentials a cloud's API wants could not be had (no source in the chain, a
    /// refused exchange): nothing was sent.
    #[error("credentials: {0}")]
    Credentials(String),
    #[error("{0}")]
    Other(String),
}

impl ProbeError {
    /// The one place where failures become label values.
    pub fn category(&self) -> ErrorCategory {
        match self {
            Self::Dns(_) => ErrorCategory::Dns,
            Self::Connect(_) => ErrorCategory::Connect,
            Self::Tls(_) => ErrorCategory::Tls,
            Self::ConnectTimeout(_) => ErrorCategory::ConnectTimeout,
            Self::TtftTimeout(_) => ErrorCategory::TtftTimeout,
            Self::StallTimeout(_) => ErrorCategory::StallTimeout,
            Self::RequestTimeout(_) => ErrorCategory::RequestTimeout,
            Self::Status { status, body }
                if matches!(status.as_u16(), 400 | 413 | 422) && over_context(body) =>
            {
                ErrorCategory::ContextLength
            }
            // The Gemini API answers a bad or expired key with a 400 INVALID_ARGUMENT.
            Self::Status { status, body } if status.as_u16() == 400 && invalid_key(body) => {
                ErrorCategory::Auth
            }
            // Azure's content filter refusing the prompt: a 400 `content_filter`.
            Self::Status { status, body } if status.as_u16() == 400 && filtered(body) => {
                ErrorCategory::ContentFiltered
            }
            // Gemini's 503 UNAVAILABLE "The model is overloaded": load shed, as a 529 is.
            Self::Status { status, body }
                if status.as_u16() == 503 && body.to_ascii_lowercase().contains("overloaded") =>
            {
                ErrorCategory::Overloaded
            }
            Self::Status { status, .. } => ErrorCategory::from_status(*status),
            Self::Redirect { .. } => ErrorCategory::InvalidResponse,
            Self::StreamInterrupted(_) => ErrorCategory::StreamInterrupted,
            Self::StreamErrorEvent(_) => ErrorCategory::StreamErrorEvent,
            Self::Overloaded(_) => ErrorCategory::Overloaded,
            Self::InvalidResponse(_) => ErrorCategory::InvalidResponse,
            Self::EmptyResponse => ErrorCategory::EmptyResponse,
            Self::ReasoningExhausted(_) => ErrorCategory::ReasoningExhausted,
            Self::ContentFiltered(_) => ErrorCategory::ContentFiltered,
            Self::Throttled(_) => ErrorCategory::RateLimited,
            Self::ContextWindow(_) => ErrorCategory::ContextLength,
            Self::ProviderFailed(_) => ErrorCategory::Http5xx,
            Self::TooLarge(_) => ErrorCategory::TooLarge,
            Self::Validation { .. } => ErrorCategory::Validation,
            Self::Credentials(_) => ErrorCategory::Auth,
            Self::Other(_) => ErrorCategory::Other,
        }
    }

    /// A redirect that was not followed. Only the scheme, host, port and path of where it
    /// pointed are kept (resolved against the request's `url`): a query or userinfo may
    /// carry a token, and this goes to the log.
    pub fn redirect(
        status: StatusCode,
        location: Option<&http::HeaderValue>,
        url: &url::Url,
    ) -> Self {
        let target = location
            .and_then(|value| value.to_str().ok())
            .and_then(|text| url.join(text).ok());
        let location = match target {
            Some(to) => {
                let port = to.port().map(|p| format!(":{p}")).unwrap_or_default();
                let host = to.host_str().unwrap_or("");
                snippet(&format!("{}://{host}{port}{}", to.scheme(), to.path()))
            }
            None if location.is_none() => "(no Location header)".into(),
            None => "(an unreadable Location)".into(),
        };
        Self::Redirect { status, location }
    }

    /// Classify a transport error from reqwest by the types in its source chain.
    ///
    /// `after_headers` tells a body read apart from the request phase: once a response
    /// started, any transport failure means the stream was cut short.
    pub fn from_transport(err: reqwest::Error, after_headers: bool) -> Self {
        let err = err.without_url(); // URLs may carry credentials; never log them.
        if after_headers || err.is_body() || err.is_decode() {
            // Only the Content-Encoding decoder (gzip) sits between hyper and the probe: a
            // body failure with no hyper::Error in its chain came from decoding, not from
            // the connection. A compressed stream that merely stops early (UnexpectedEof)
            // was cut short like any other; one that does not decode (corrupt data, bytes
            // after the end) is bytes the server should not have sent.
            if !has_cause::<hyper::Error>(&err)
                && !err.is_timeout()
                && io_kind(&err) != Some(std::io::ErrorKind::UnexpectedEof)
            {
                return Self::InvalidResponse(format!(
                    "the response body does not decode: {}",
                    chain(&err)
                ));
            }
            return Self::StreamInterrupted(chain(&err));
        }
        if err.is_connect() {
            if has_cause::<DnsError>(&err) {
                return Self::Dns(Box::new(err));
            }
            if has_cause::<rustls::Error>(&err) {
                return Self::Tls(Box::new(err));
            }
            if err.is_timeout() || io_kind(&err) == Some(std::io::ErrorKind::TimedOut) {
                return Self::ConnectTimeout(Box::new(err));
            }
            return Self::Connect(Box::new(err));
        }
        if err.is_builder() {
            return Self::Other(chain(&err));
        }
        // With TLS 1.3 the server judges a client certificate after the client's handshake
        // is done: the rejection is an alert on the first read, still a TLS failure.
        if has_cause::<rustls::Error>(&err) {
            return Self::Tls(Box::new(err));
        }
        // Bytes came back that are not an HTTP response: a gRPC/h2c-only port (an HTTP/2
        // GOAWAY frame), a TLS port spoken to in plaintext (a TLS alert), another protocol.
        // The endpoint answered, with something the probe cannot use.
        if causes(&err).any(|e| {
            e.downcast_ref::<hyper::Error>()
                .is_some_and(hyper::Error::is_parse)
        }) {
            return Self::InvalidResponse(format!(
                "the server did not answer with HTTP: {}",
                chain(&err)
            ));
        }
        // The connection was up but the peer closed or reset it before a full response
        // head arrived: the response was interrupted, not refused.
        if has_cause::<hyper::Error>(&err) || io_kind(&err).is_some() {
            return Self::StreamInterrupted(chain(&err));
        }
        Self::Other(chain(&err))
    }
}

/// The server closed the connection before any response head: on a pooled connection,
/// the keep-alive race (the server closed it as the request went out), which a client
/// retries on a new connection.
pub fn closed_before_response(err: &reqwest::Error) -> bool {
    !err.is_connect()
        && causes(err).any(|e| {
            e.downcast_ref::<hyper::Error>()
                .is_some_and(|h| h.is_incomplete_message() || h.is_canceled())
        })
}

/// Walk an error's source chain (looking through `io::Error` wrappers) for a cause of type `T`.
fn has_cause<T: StdError + 'static>(err: &(dyn StdError + 'static)) -> bool {
    causes(err).any(|e| e.is::<T>())
}

fn io_kind(err: &(dyn StdError + 'static)) -> Option<std::io::ErrorKind> {
    causes(err).find_map(|e| e.downcast_ref::<std::io::Error>().map(|io| io.kind()))
}

fn causes<'a>(
    err: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    let mut next = Some(err);
    std::iter::from_fn(move || {
        let current = next?;
        // io::Error's `source()` skips its own payload; look inside it explicitly.
        next = match current
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => current.source(),
        };
        Some(current)
    })
}

/// "outer: cause: root cause", for one log line.
pub fn chain(err: &(dyn StdError + 'static)) -> String {
    let mut out = String::new();
    for (i, e) in causes(err).enumerate() {
        let text = e.to_string();
        if i > 0 {
            if out.ends_with(&text) {
                continue; // io::Error repeats its inner error's message
            }
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Whether a refused request's error message says it does not fit the served context window:
/// the prompt, or the prompt and `max_tokens`, over it. A window shrunk below what users send
/// (vLLM's `--max-model-len auto` fits it to memory) is an outage of its own, not a generic
/// 4xx. The wordings of the servers and APIs (docs/errors.md, `context_length`):
/// vLLM "This model's maximum context length is …" and "max_tokens=… cannot be greater than
/// max_model_len", its older "… is longer than the maximum model length", SGLang "… longer
/// than the model's context length", OpenAI's `context_length_exceeded` message, llama-server
/// "exceeds the available context size", Anthropic "prompt is too long" and "… exceed context
/// limit", Gemini "… exceeds the maximum number of tokens allowed", TGI "`inputs`
/// tokens + `max_new_tokens` must be <= …" (`max_total_tokens`) and "`inputs` must have less
/// than … tokens".
pub fn over_context(message: &str) -> bool {
    const WORDINGS: [&str; 13] = [
        "context length",
        // Anthropic's "input length and `max_tokens` exceed context limit: …".
        "context limit",
        // Gemini's "The input token count (…) exceeds the maximum number of tokens allowed".
        "maximum number of tokens allowed",
        "context size",
        "context window",
        "max_model_len",
        "maximum model length",
        "prompt is too long",
        "max_total_tokens",
        "`max_new_tokens` must be <=",
        "`inputs` must have less than",
        // Bedrock's ValidationException: "Input is too long for requested model."
        "input is too long",
        // Bedrock's Converse: "… too many input tokens …", and Azure's "maximum context length".
        "too many input tokens",
    ];
    let message = message.to_ascii_lowercase();
    WORDINGS.iter().any(|w| message.contains(w))
}

/// A refusal that says the key is bad (Gemini's `API_KEY_INVALID`).
fn invalid_key(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    ["api key not valid", "api key expired", "api_key_invalid"]
        .iter()
        .any(|w| message.contains(w))
}

/// A refusal by a content filter (Azure's `content_filter`, "content management policy").
fn filtered(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "content management policy",
        "content_filter",
        "responsibleaipolicyviolation",
    ]
    .iter()
    .any(|w| message.contains(w))
}

/// At most 200 characters, for log lines.
pub fn snippet(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
