//! `inferprobe canary record`: write a golden file from an endpoint the user trusts. Each
//! prompt is asked twice; an endpoint that answers one prompt two confidently different
//! ways is no reference, and the recording fails rather than write it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::counter::Counter;
use tokio_util::sync::CancellationToken;

use super::compare::{self, Verdict};
use crate::config::{self, ConfigError, RawConfig, RawTarget};
use crate::endpoint::canary::{CanaryPrompt, CanarySpec, GOLDEN_FORMAT, Golden, GoldenAnswer};
use crate::probe::{Outcome, Prober};

#[derive(Debug, Clone, Default, clap::Args)]
pub struct RecordArgs {
    /// A configuration file: record as its target (or discovery block) `--target` sends
    /// to its replicas — backend, URL, model, headers, `extra_body`, API key and canary
    /// settings — so the golden file fits it. The flags below override it.
    #[arg(long, requires = "target")]
    pub config: Option<PathBuf>,
    /// The target or discovery block of `--config` to record for.
    #[arg(long, requires = "config")]
    pub target: Option<String>,
    /// Wire format of the trusted endpoint [default: openai-chat, or the target's].
    #[arg(long)]
    pub backend: Option<String>,
    /// Base URL of the trusted endpoint, e.g. http://127.0.0.1:8000 (a discovery block's
    /// replicas have none in the configuration: give one of them).
    #[arg(long)]
    pub url: Option<String>,
    #[arg(long)]
    pub model: Option<String>,
    /// Prompts file (JSON lines `{"prompt": …, "expect": …}`); the built-in set without it.
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// [default: 32, or the target's canary's]
    #[arg(long)]
    pub max_tokens: Option<u64>,
    /// [default: 5, or the target's canary's]
    #[arg(long)]
    pub top_logprobs: Option<u64>,
    /// Nats: the comparison rule's margin (the two answers of a prompt, and an adapter's
    /// against the base's) [default: 1.0, or the target's canary's]. A random-weight test
    /// model is never that sure: 0.05.
    #[arg(long)]
    pub margin: Option<f64>,
    /// Environment variable holding the API key.
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// The group value the golden file is for (the trusted replica's controller revision,
    /// or its `group_by` labels' values joined by commas): it then applies to that group
    /// only, and the block's other groups learn their reference. Without it, every group
    /// of its model.
    #[arg(long)]
    pub group: Option<String>,
    /// Record the LoRA adapters the endpoint's /v1/models lists (`parent` = the model)
    /// too: each one's answers where they part from the base model's, the adapter
    /// check's references (docs/adapters.md).
    #[arg(long)]
    pub adapters: bool,
    /// An adapter to record whether listed or not (repeatable; implies --adapters).
    #[arg(long = "adapter", value_name = "NAME")]
    pub adapter: Vec<String>,
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

/// The target to record from: `--config`'s `--target` (a static target or a discovery
/// block's template, with `[defaults]`), else a bare one; the flags override either.
fn raw_target(args: &RecordArgs) -> Result<(RawTarget, Option<Vec<CanaryPrompt>>), ConfigError> {
    let mut target = match (&args.config, &args.target) {
        (Some(path), Some(name)) => {
            let raw = config::load_raw(Some(path), &config::Overrides::default())?;
            let named = |t: &RawTarget| t.name.as_deref() == Some(name.as_str());
            let found = raw.targets.iter().find(|t| named(t)).cloned().or_else(|| {
                raw.discovery
                    .iter()
                    .find(|d| d.name.as_deref() == Some(name.as_str()))
                    .map(|d| d.template.clone().unwrap_or_default())
            });
            let found = found.ok_or_else(|| {
                ConfigError::new(
                    "--target",
                    format!(
                        "{} has no target or discovery block named {name:?}",
                        path.display()
                    ),
                )
            })?;
            found.inherit(&raw.defaults)
        }
        _ => RawTarget {
            backend: Some("openai-chat".into()),
            ..RawTarget::default()
        },
    };
    let mut canary = target.canary.take().unwrap_or_default();
    // The golden file is what is being written: its prompts are recorded again, unless
    // --prompts names others.
    let mut again = None;
    if let Some(golden) = canary.golden.take() {
        if args.prompts.is_none() {
            let (_, prompts) = crate::endpoint::canary::load_golden(std::path::Path::new(&golden))
                .map_err(|e| ConfigError::new("canary.golden", e))?;
            again = Some(prompts);
        }
    }
    if let Some(prompts) = &args.prompts {
        canary.prompts = Some(prompts.display().to_string());
    }
    canary.max_tokens = args.max_tokens.or(canary.max_tokens);
    canary.top_logprobs = args.top_logprobs.or(canary.top_logprobs);
    canary.margin = args.margin.or(canary.margin);
    target.canary = Some(canary);
    target.name = Some("canary-record".into());
    target.backend = args.backend.clone().or(target.backend);
    target.url = args.url.clone().or(target.url);
    target.model = args.model.clone().or(target.model);
    if args.api_key_env.is_some() {
        target.api_key_env = args.api_key_env.clone();
        target.api_key_file = None;
    }
    // A discovery block's template may name no model (its replicas' comes from a pod
    // label): the flag is what is missing, not a key of a file that has no `targets`.
    if target.model.as_deref().is_none_or(str::is_empty) {
        return Err(ConfigError::new(
            "--model",
            "is required (the target names no model: give the one the trusted replica serves)",
        ));
    }
    if target.url.is_none() && target.endpoint.is_none() {
        return Err(ConfigError::new(
            "--url",
            "is required (the target names no URL: give one replica's)",
        ));
    }
    Ok((target, again))
}

/// A recording: the golden file, and the endpoint and settings it was recorded with (the
/// adapter check's recording asks the same endpoint: `crate::adapters::record_golden`).
pub struct Recording {
    pub golden: Golden,
    pub prober: Prober,
    pub spec: CanarySpec,
}

pub async fn record(args: &RecordArgs) -> Result<Golden, RecordError> {
    Ok(recording(args).await?.golden)
}

pub async fn recording(args: &RecordArgs) -> Result<Recording, RecordError> {
    let (target, again) = raw_target(args)?;
    let raw = RawConfig {
        targets: vec![target],
        ..RawConfig::default()
    };
    let target = Arc::clone(&config::validate(&raw)?.targets[0]);
    let mut spec = target
        .canary
        .as_deref()
        .cloned()
        .ok_or_else(|| RecordError::Endpoint("no canary settings".into()))?;
    if let Some(prompts) = again {
        spec.prompts = prompts.into();
    }
    let prober = Prober::new(Arc::clone(&target), Counter::default())
        .map_err(|e| RecordError::Endpoint(format!("cannot build the HTTP client: {e}")))?;
    let never = CancellationToken::new();
    let mut answers = Vec::new();
    // A structured prompt's reference is its schema: nothing to record.
    for (i, prompt) in spec.prompts.iter().enumerate() {
        if prompt.structure.is_some() {
            continue;
        }
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
        if let Verdict::Diverged(d) = compare::answers(&pair[0], &pair[1], spec.margin) {
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
    let golden = Golden {
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
        group: args.group.clone(),
        answers,
        adapters: Vec::new(),
    };
    Ok(Recording {
        golden,
        prober,
        spec,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 44, item 3: a discovery block's template without `model` is missing the flag,
    /// not a key of the file.
    #[test]
    fn a_missing_model_names_the_flag() {
        let dir = std::env::temp_dir().join(format!("inferprobe-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("inferprobe.toml");
        std::fs::write(
            &config,
            "[[discovery]]\nname = \"pool\"\nsource = \"kubernetes\"\nselector = \"app=vllm\"\n[discovery.template]\nbackend = \"openai-chat\"\n",
        )
        .unwrap();
        let args = RecordArgs {
            config: Some(config),
            target: Some("pool".into()),
            url: Some("http://127.0.0.1:1".into()),
            ..RecordArgs::default()
        };
        let error = raw_target(&args).unwrap_err();
        assert_eq!(error.key, "--model", "{error}");
        let args = RecordArgs {
            model: Some("m".into()),
            ..args
        };
        assert!(raw_target(&args).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
