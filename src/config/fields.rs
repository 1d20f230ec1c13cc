//! Parsers for individual configuration values (URLs, secrets, headers, labels, numbers,
//! durations), each reporting the key it was given. [`super::validate`] composes them.

use std::collections::BTreeMap;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use url::Url;

use super::{ConfigError, RawDuration, RawTarget, Secret, Timeouts};
use crate::endpoint::BackendKind;

const DEFAULT_TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(5),
    ttft: Duration::from_secs(30),
    stall: Duration::from_secs(30),
    request: Duration::from_secs(120),
};

/// The longest timeout. Every probe adds its timeouts to its start instant, which panics
/// past the clock's range: `request_timeout = 1e19` validated and then panicked every probe
/// (found fuzzing the config loader). A day is far beyond any real request.
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// An API key is a line; a file far larger is not one.
const MAX_API_KEY_BYTES: u64 = 64 << 10;

/// Label names inferprobe itself puts on a target's series: a static label of the same
/// name would give a series the name twice, and Prometheus rejects the whole scrape for it.
pub use crate::metrics::labels::RESERVED as RESERVED_LABELS;

pub(super) fn endpoint_url(
    at: &dyn Fn(&str) -> String,
    url: Option<&str>,
    endpoint: Option<&str>,
    backend: BackendKind,
    model: &str,
) -> Result<Url, ConfigError> {
    let text = url.ok_or_else(|| ConfigError::new(at("url"), "is required"))?;
    let base = Url::parse(text)
        .map_err(|e| ConfigError::new(at("url"), format!("`{text}` is not a URL: {e}")))?;
    if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
        return Err(ConfigError::new(
            at("url"),
            format!("`{text}` must be an http:// or https:// URL with a host"),
        ));
    }
    if !base.username().is_empty() || base.password().is_some() {
        // Credentials in a URL end up in logs; they belong in api_key_env / api_key_file.
        return Err(ConfigError::new(
            at("url"),
            "must not contain credentials; use api_key_env or api_key_file",
        ));
    }
    if base.query().is_some() || base.fragment().is_some() {
        return Err(ConfigError::new(
            at("url"),
            "must be a base URL without query or fragment; put the path and query in `endpoint`",
        ));
    }
    let endpoint = endpoint.unwrap_or(backend.default_endpoint());
    // Triton puts the model in the path; percent-encode it like any path segment.
    let model_segment: String = url::form_urlencoded::byte_serialize(model.as_bytes()).collect();
    let endpoint = endpoint.replace("{model}", &model_segment);
    let endpoint = endpoint.as_str();
    if !endpoint.starts_with('/') {
        return Err(ConfigError::new(
            at("endpoint"),
            format!("`{endpoint}` must start with /"),
        ));
    }
    let base_path = base.path().trim_end_matches('/');
    if endpoint.len() > 1 && base_path.ends_with(endpoint) {
        let mut fixed = base.clone();
        fixed.set_path(&base_path[..base_path.len() - endpoint.len()]);
        return Err(ConfigError::new(
            at("url"),
            format!(
                "`{text}` already ends with {endpoint}, which inferprobe appends for the {backend} \
                 backend: write the base URL, `{}` (or set `endpoint`)",
                fixed.as_str().trim_end_matches('/')
            ),
        ));
    }
    // The OpenAI SDKs' `base_url` ends in /v1 (`http://vllm:8000/v1`); the endpoint
    // starts with it. Both spellings of the URL mean the same server.
    let base_text = base.as_str().trim_end_matches('/');
    let base_text = match endpoint.strip_prefix("/v1/") {
        Some(_) if base_path.ends_with("/v1") => &base_text[..base_text.len() - "/v1".len()],
        _ => base_text,
    };
    let joined = format!("{base_text}{endpoint}");
    Url::parse(&joined)
        .map_err(|e| ConfigError::new(at("endpoint"), format!("`{joined}` is not a URL: {e}")))
}

pub(super) fn api_key(
    at: &dyn Fn(&str) -> String,
    env: Option<&str>,
    file: Option<&str>,
    skip_secrets: bool,
) -> Result<Option<Secret>, ConfigError> {
    let value = match (env, file) {
        (None, None) => return Ok(None),
        (Some(_), Some(_)) => {
            return Err(ConfigError::new(
                at("api_key_file"),
                "set either api_key_env or api_key_file, not both",
            ));
        }
        _ if skip_secrets => return Ok(Some(Secret::new("not read".into()))),
        (Some(var), None) => std::env::var(var).map_err(|_| {
            ConfigError::new(
                at("api_key_env"),
                format!("environment variable {var} is not set or not UTF-8"),
            )
        })?,
        (None, Some(path)) => {
            crate::files::read_text(std::path::Path::new(path), MAX_API_KEY_BYTES)
                .map_err(|e| ConfigError::new(at("api_key_file"), e))?
        }
    };
    let value = value.trim();
    let field = if env.is_some() {
        "api_key_env"
    } else {
        "api_key_file"
    };
    if value.is_empty() {
        return Err(ConfigError::new(at(field), "the API key is empty"));
    }
    if HeaderValue::from_str(&format!("Bearer {value}")).is_err() {
        return Err(ConfigError::new(
            at(field),
            "the API key contains characters not allowed in an HTTP header",
        ));
    }
    Ok(Some(Secret::new(value.to_owned())))
}

pub(super) fn headers(
    at: &dyn Fn(&str) -> String,
    raw: BTreeMap<String, String>,
    has_api_key: bool,
) -> Result<HeaderMap, ConfigError> {
    let mut headers = HeaderMap::new();
    for (name, value) in raw {
        let key = at(&format!("headers.{name}"));
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ConfigError::new(&key, "is not a valid HTTP header name"))?;
        if header == "x-request-id" || header == http::header::CONTENT_TYPE {
            return Err(ConfigError::new(
                &key,
                "is set by inferprobe on every request",
            ));
        }
        if header == http::header::AUTHORIZATION && has_api_key {
            return Err(ConfigError::new(
                &key,
                "conflicts with the API key, which is sent as a Bearer token",
            ));
        }
        let mut value = HeaderValue::from_str(&value)
            .map_err(|_| ConfigError::new(&key, "value is not a valid HTTP header value"))?;
        value.set_sensitive(header == http::header::AUTHORIZATION);
        headers.insert(header, value);
    }
    Ok(headers)
}

pub(super) fn check_labels(
    key: &str,
    labels: &BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    for name in labels.keys() {
        let mut chars = name.chars();
        let valid = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with("__");
        if !valid {
            return Err(ConfigError::new(
                format!("{key}.{name}"),
                "is not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, no leading __)",
            ));
        }
        if RESERVED_LABELS.contains(&name.as_str()) {
            return Err(ConfigError::new(
                format!("{key}.{name}"),
                "is a label inferprobe sets itself",
            ));
        }
    }
    Ok(())
}

pub(super) fn in_range(key: &str, value: u64, min: u64, max: u64) -> Result<u64, ConfigError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(ConfigError::new(
            key,
            format!("{value} must be between {min} and {max}"),
        ))
    }
}

/// Unset timeouts default to the documented values, clamped so they never contradict a
/// timeout the user did set (a 2 s `ttft_timeout` alone must not fail on the 5 s default
/// connect timeout). Explicit values that contradict each other are errors.
pub(super) fn timeouts(
    at: &dyn Fn(&str) -> String,
    t: &RawTarget,
) -> Result<Timeouts, ConfigError> {
    let explicit =
        |field: &str, raw: &Option<RawDuration>| -> Result<Option<Duration>, ConfigError> {
            let Some(raw) = raw else { return Ok(None) };
            let value = positive(&at(field), raw)?;
            if value > MAX_TIMEOUT {
                return Err(ConfigError::new(
                    at(field),
                    format!(
                        "{value:?} is longer than {}",
                        humantime::format_duration(MAX_TIMEOUT)
                    ),
                ));
            }
            Ok(Some(value))
        };
    let connect = explicit("connect_timeout", &t.connect_timeout)?;
    let ttft = explicit("ttft_timeout", &t.ttft_timeout)?;
    let stall = explicit("stall_timeout", &t.stall_timeout)?;
    let request = explicit("request_timeout", &t.request_timeout)?;
    let request = request.unwrap_or_else(|| {
        [connect, ttft, stall]
            .into_iter()
            .flatten()
            .fold(DEFAULT_TIMEOUTS.request, Duration::max)
    });
    let ttft = ttft.unwrap_or_else(|| {
        DEFAULT_TIMEOUTS
            .ttft
            .min(request)
            .max(connect.unwrap_or_default())
    });
    let timeouts = Timeouts {
        connect: connect.unwrap_or_else(|| DEFAULT_TIMEOUTS.connect.min(ttft)),
        ttft,
        stall: stall.unwrap_or_else(|| DEFAULT_TIMEOUTS.stall.min(request)),
        request,
    };
    let ordered = [
        (
            "connect_timeout",
            timeouts.connect,
            "ttft_timeout",
            timeouts.ttft,
        ),
        (
            "ttft_timeout",
            timeouts.ttft,
            "request_timeout",
            timeouts.request,
        ),
        (
            "stall_timeout",
            timeouts.stall,
            "request_timeout",
            timeouts.request,
        ),
    ];
    for (short, short_value, long, long_value) in ordered {
        if short_value > long_value {
            return Err(ConfigError::new(
                at(short),
                format!("{short_value:?} must not exceed {long} ({long_value:?})"),
            ));
        }
    }
    Ok(timeouts)
}

pub(super) fn positive(key: &str, raw: &RawDuration) -> Result<Duration, ConfigError> {
    let value = duration(key, Some(raw), Duration::ZERO)?;
    if value.is_zero() {
        return Err(ConfigError::new(key, "must be greater than zero"));
    }
    Ok(value)
}

pub(super) fn duration(
    key: &str,
    raw: Option<&RawDuration>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    match raw {
        None => Ok(default),
        Some(RawDuration::Seconds(secs)) => Duration::try_from_secs_f64(*secs)
            .map_err(|_| ConfigError::new(key, format!("{secs} is not a valid number of seconds"))),
        Some(RawDuration::Text(text)) => humantime::parse_duration(text).map_err(|e| {
            ConfigError::new(
                key,
                format!("`{text}` is not a duration like \"250ms\" or \"5s\": {e}"),
            )
        }),
    }
}

/// `credentials` and `region`: a Bedrock backend signs with AWS's chain unless it has a
/// key (a Bedrock API key, sent as a Bearer token), a Vertex AI backend uses Google's
/// Application Default Credentials; `aws`, `google` and `azure` can be asked for by name
/// (Azure OpenAI takes a key or an Entra ID token).
pub(super) fn credentials(
    at: &dyn Fn(&str) -> String,
    t: &super::RawTarget,
    backend: BackendKind,
    url: &Url,
    has_key: bool,
) -> Result<Option<crate::auth::CloudCredentials>, ConfigError> {
    let bedrock = matches!(
        backend,
        BackendKind::Bedrock | BackendKind::AnthropicBedrock
    );
    let vertex = matches!(
        backend,
        BackendKind::VertexGemini | BackendKind::AnthropicVertex
    );
    let source = match t.credentials.as_deref() {
        None if bedrock && !has_key => "aws",
        None if vertex && !has_key => "google",
        None if !has_key && matches!(backend, BackendKind::Gemini | BackendKind::AzureOpenAi) => {
            let how = match backend {
                BackendKind::Gemini => "an API key (api_key_env or api_key_file)",
                _ => "an API key (api_key_env or api_key_file) or credentials = \"azure\"",
            };
            return Err(ConfigError::new(
                at("api_key_env"),
                format!("{backend} refuses every request without {how}"),
            ));
        }
        None => return Ok(None),
        Some(source) => source,
    };
    // A cloud's token goes to that cloud only: the door's own backends, or an OpenAI or
    // Anthropic format served on the cloud's own host (Vertex AI's OpenAI-compatible
    // endpoint, Azure AI Foundry's).
    let host = url.host_str().unwrap_or_default();
    let generic = matches!(
        backend,
        BackendKind::OpenAi
            | BackendKind::OpenAiChat
            | BackendKind::OpenAiResponses
            | BackendKind::OpenAiEmbeddings
            | BackendKind::Anthropic
    );
    let fits = match source {
        "aws" => bedrock,
        "google" => vertex || (generic && host.ends_with("aiplatform.googleapis.com")),
        "azure" => backend == BackendKind::AzureOpenAi || (generic && host.ends_with(".azure.com")),
        _ => true,
    };
    if !fits {
        let doors = match source {
            "aws" => "bedrock, anthropic-bedrock",
            "google" => {
                "vertex-gemini, anthropic-vertex, or an OpenAI or Anthropic format on *aiplatform.googleapis.com"
            }
            _ => "azure-openai, or an OpenAI or Anthropic format on *.azure.com",
        };
        return Err(ConfigError::new(
            at("credentials"),
            format!(
                "`{source}` credentials are sent only to their cloud ({doors}); backend `{backend}` at `{host}` is not one of them"
            ),
        ));
    }
    if has_key {
        return Err(ConfigError::new(
            at("credentials"),
            "set either credentials or api_key_env / api_key_file, not both",
        ));
    }
    match source {
        "aws" => {
            let from_url = bedrock_region(url);
            if let (Some(region), Some(host_region)) = (&t.region, &from_url) {
                if region != host_region {
                    return Err(ConfigError::new(
                        at("region"),
                        format!(
                            "`{region}`, but the URL's host is in `{host_region}`: a signature for another region is refused"
                        ),
                    ));
                }
            }
            let region = match &t.region {
                Some(region) => region.clone(),
                None => bedrock_region(url).ok_or_else(|| {
                    ConfigError::new(
                        at("region"),
                        format!(
                            "is required: `{}` is not a bedrock-runtime.<region>.amazonaws.com URL",
                            url.host_str().unwrap_or_default()
                        ),
                    )
                })?,
            };
            region_name(at, &region)?;
            Ok(Some(crate::auth::CloudCredentials::Aws {
                region,
                service: "bedrock".into(),
            }))
        }
        "google" => Ok(Some(crate::auth::CloudCredentials::Google)),
        "azure" => Ok(Some(crate::auth::CloudCredentials::Azure)),
        other => Err(ConfigError::new(
            at("credentials"),
            format!(
                "unknown source `{other}`; expected one of {}",
                crate::auth::CloudCredentials::NAMES.join(", ")
            ),
        )),
    }
}

fn region_name(at: &dyn Fn(&str) -> String, region: &str) -> Result<(), ConfigError> {
    if region.is_empty()
        || !region
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err(ConfigError::new(
            at("region"),
            format!("`{region}` is not a region"),
        ));
    }
    Ok(())
}

/// The endpoint with `{project}` and `{region}` filled in (Vertex AI's paths), each
/// required where the endpoint names it; `{model}` is left to [`endpoint_url`].
pub(super) fn endpoint_template(
    at: &dyn Fn(&str) -> String,
    t: &super::RawTarget,
    backend: BackendKind,
) -> Result<String, ConfigError> {
    let mut endpoint = t
        .endpoint
        .clone()
        .unwrap_or_else(|| backend.default_endpoint().to_owned());
    for (placeholder, key, value) in [
        ("{project}", "project", t.project.as_deref()),
        ("{region}", "region", t.region.as_deref()),
    ] {
        if !endpoint.contains(placeholder) {
            continue;
        }
        let value = value.ok_or_else(|| {
            ConfigError::new(
                at(key),
                format!("is required: the endpoint `{endpoint}` names it"),
            )
        })?;
        if key == "region" {
            region_name(at, value)?;
        } else if value.is_empty()
            || !value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(ConfigError::new(
                at(key),
                format!("`{value}` is not a project id"),
            ));
        }
        endpoint = endpoint.replace(placeholder, value);
    }
    Ok(endpoint)
}

/// The region of `bedrock-runtime[-fips].<region>.amazonaws.com[.cn]`.
fn bedrock_region(url: &Url) -> Option<String> {
    let host = url.host_str()?;
    let rest = host
        .strip_prefix("bedrock-runtime-fips.")
        .or_else(|| host.strip_prefix("bedrock-runtime."))?;
    let (region, domain) = rest.split_once('.')?;
    domain
        .starts_with("amazonaws.com")
        .then(|| region.to_owned())
}
