//! `inferprobe canary record`: write a golden file from an endpoint the user trusts. Each
//! prompt is asked twice; an endpoint that answers one prompt two confidently different
//! ways is no reference, and the recording fails rather than write it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::counter::Counter;
use tokio_util::sync::CancellationToken;

use super::compare::{Verdict, compare};
use crate::config::{self, ConfigError, RawCanary, RawConfig, RawTarget};
use crate::probe::{Outcome, Prober};
use crate::target::canary::{GOLDEN_FORMAT, Golden, GoldenAnswer};

#[derive(Debug, Clone, clap::Args)]
pub struct RecordArgs {
    /// Wire format of the trusted endpoint.
    #[arg(long, default_value = "openai-chat")]
    pub backend: String,
    /// Base URL of the trusted endpoint, e.g. http://127.0.0.1:8000.
    #[arg(long)]
    pub url: String,
    #[arg(long)]
    pub model: String,
    /// Prompts file (JSON lines `{"prompt": …, "expect": …}`); the built-in set without it.
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    #[arg(long, default_value_t = 32)]
    pub max_tokens: u64,
    #[arg(long, default_value_t = 5)]
    pub top_logprobs: u64,
    /// Environment variable holding the API key.
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Where to write the golden file.
    #[arg(long)]
    pub out: PathBuf,
}

/// Why a recording failed: the arguments (exit 64), or the endpoint (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Usage(#[from] ConfigError),
    #[error("{0}")]
    Endpoint(String),
}

pub async fn record(args: &RecordArgs) -> Result<Golden, RecordError> {
    let raw = RawConfig {
        targets: vec![RawTarget {
            name: Some("canary-record".into()),
            backend: Some(args.backend.clone()),
            url: Some(args.url.clone()),
            model: Some(args.model.clone()),
            api_key_env: args.api_key_env.clone(),
            canary: Some(RawCanary {
                prompts: args.prompts.as_ref().map(|p| p.display().to_string()),
                max_tokens: Some(args.max_tokens),
                top_logprobs: Some(args.top_logprobs),
                ..RawCanary::default()
            }),
            ..RawTarget::default()
        }],
        ..RawConfig::default()
    };
    let target = Arc::clone(&config::validate(&raw)?.targets[0]);
    let spec = target
        .canary
        .clone()
        .ok_or_else(|| RecordError::Endpoint("no canary settings".into()))?;
    let prober = Prober::new(Arc::clone(&target), Counter::default())
        .map_err(|e| RecordError::Endpoint(format!("cannot build the HTTP client: {e}")))?;
    let never = CancellationToken::new();
    let mut answers = Vec::new();
    for (i, prompt) in spec.prompts.iter().enumerate() {
        let request = super::prompt(&spec, &prompt.text, &target.model);
        let mut pair = Vec::new();
        for attempt in 0..2 {
            let report = prober
                .probe(&format!("canary-record-{i}-{attempt}"), &request, &never)
                .await;
            if let Outcome::Finished(Err(e)) = &report.outcome {
                return Err(RecordError::Endpoint(format!(
                    "prompt {i} ({:?}): {e}",
                    prompt.text
                )));
            }
            let answer = super::answer(&report)
                .ok_or_else(|| RecordError::Endpoint(format!("prompt {i}: no answer")))?;
            if prompt.expect.is_none() && answer.positions.is_empty() {
                return Err(RecordError::Endpoint(format!(
                    "prompt {i}: the endpoint sent no logprobs (does {} report them?)",
                    target.backend
                )));
            }
            pair.push(answer);
        }
        let ended = pair[1]
            .finish_reason
            .as_deref()
            .is_some_and(|r| r != "length");
        if let Verdict::Diverged(d) =
            compare(&pair[0].positions, &pair[1].positions, ended, spec.margin)
        {
            return Err(RecordError::Endpoint(format!(
                "prompt {i} ({:?}) was answered two ways, {:?} then {:?} at position {}, where the first answer was sure: the endpoint is not reproducible, so it is no reference",
                prompt.text, d.expected, d.received, d.position
            )));
        }
        answers.push(GoldenAnswer {
            prompt: prompt.text.clone(),
            expect: prompt.expect.as_ref().map(|e| e.as_str().to_owned()),
            answer: pair.swap_remove(0),
        });
    }
    Ok(Golden {
        format: GOLDEN_FORMAT.into(),
        model: target.model.clone(),
        url: target.url.to_string(),
        server: server_of(&target.url).await,
        backend: target.backend.as_str().into(),
        recorded_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        max_tokens: spec.max_tokens,
        top_logprobs: spec.top_logprobs,
        answers,
    })
}

/// What the endpoint says it is: the `Server` header of its `/v1/models`, best effort.
async fn server_of(url: &url::Url) -> Option<String> {
    let models = url.join("/v1/models").ok()?;
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .ok()?;
    let response = client.get(models).send().await.ok()?;
    let server = response
        .headers()
        .get(http::header::SERVER)?
        .to_str()
        .ok()?;
    Some(server.to_owned())
}

/// Write `golden` to `path` whole (a temporary file, then a rename).
pub fn write(golden: &Golden, path: &std::path::Path) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(golden).map_err(std::io::Error::other)?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, json + "\n")?;
    std::fs::rename(tmp, path)
}
