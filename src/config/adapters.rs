//! Validation of a target's `adapters = { … }`: the adapter check (docs/adapters.md). Off
//! unless set; the defaults ask three 16-token greedy answers a minute per replica.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::fields::{duration, in_range};
use super::{ConfigError, RawAdapters};
use crate::endpoint::BackendKind;
use std::collections::HashMap;

use crate::endpoint::adapters::{AdapterSpec, Recorded, RecordedAdapter};
use crate::endpoint::canary;

const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// Two adapters and the base a round: each of ten adapters seen every five minutes.
const DEFAULT_PER_ROUND: u64 = 2;
/// Series per replica: twenty adapters' seven results.
const DEFAULT_MAX_ADAPTERS: u64 = 20;
/// Enough tokens for an adapter's answer to part from the base's, few enough to be cheap.
const DEFAULT_MAX_TOKENS: u64 = 16;
const DEFAULT_TOP_LOGPROBS: u64 = 5;
const DEFAULT_MARGIN: f64 = 1.0;

pub(super) fn adapters(
    target_at: &dyn Fn(&str) -> String,
    raw: &RawAdapters,
    backend: BackendKind,
) -> Result<AdapterSpec, ConfigError> {
    let at = |field: &str| target_at(&format!("adapters.{field}"));
    if !matches!(backend, BackendKind::OpenAi | BackendKind::OpenAiChat) {
        return Err(ConfigError::new(
            target_at("adapters"),
            format!(
                "{backend} cannot name an adapter or return logprobs: the check needs openai or openai-chat"
            ),
        ));
    }
    let interval = duration(&at("interval"), raw.interval.as_ref(), DEFAULT_INTERVAL)?;
    if !(Duration::from_millis(10)..=Duration::from_secs(86_400)).contains(&interval) {
        return Err(ConfigError::new(
            at("interval"),
            "must be between 10ms and 24h",
        ));
    }
    let margin = raw.margin.unwrap_or(DEFAULT_MARGIN);
    if !(margin.is_finite() && margin > 0.0) {
        return Err(ConfigError::new(
            at("margin"),
            format!("{margin} must be a positive number of nats"),
        ));
    }
    let golden = raw
        .golden
        .as_deref()
        .map(|path| recorded(&at, raw, backend, path))
        .transpose()?;
    let prompts: Vec<String> = match (&raw.prompts, &golden) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::new(
                at("golden"),
                "a golden file brings its own prompts: set `prompts` or `golden`, not both",
            ));
        }
        (None, Some((_, prompts, _))) => prompts.clone(),
        (None, None) => canary::BUILT_IN.iter().map(|p| (*p).to_owned()).collect(),
        (Some(path), None) => canary::load_prompts(Path::new(path))
            .map_err(|e| ConfigError::new(at("prompts"), e))?
            .into_iter()
            .filter(|p| p.structure.is_none() && p.expect.is_none())
            .map(|p| p.text)
            .collect(),
    };
    if prompts.is_empty() {
        return Err(ConfigError::new(
            at("prompts"),
            "holds no plain prompt (known answers and structured prompts are the canary's)",
        ));
    }
    let mut names = raw.names.clone().unwrap_or_default();
    for (i, name) in names.iter().enumerate() {
        if name.trim().is_empty() || name.len() > 256 {
            return Err(ConfigError::new(
                at(&format!("names[{i}]")),
                "an adapter's name: 1 to 256 characters",
            ));
        }
    }
    let configured = names.len();
    names.sort();
    names.dedup();
    if names.len() != configured {
        return Err(ConfigError::new(at("names"), "names an adapter twice"));
    }
    let llama_cpp = match raw.server.as_deref() {
        None | Some("auto") => None,
        Some("vllm") => Some(false),
        Some("llama.cpp") => Some(true),
        Some(other) => {
            return Err(ConfigError::new(
                at("server"),
                format!(
                    "unknown server {other:?}: auto, vllm (adapters named in `model`, as SGLang and most OpenAI-compatible servers do) or llama.cpp"
                ),
            ));
        }
    };
    let discover = raw.discover.unwrap_or(true);
    if names.is_empty() && !discover {
        return Err(ConfigError::new(
            target_at("adapters"),
            "no adapter to check: name some in `names`, or let `discover` follow /v1/models",
        ));
    }
    Ok(AdapterSpec {
        interval,
        per_round: in_range(
            &at("per_round"),
            raw.per_round.unwrap_or(DEFAULT_PER_ROUND),
            1,
            64,
        )? as usize,
        max_adapters: in_range(
            &at("max_adapters"),
            raw.max_adapters.unwrap_or(DEFAULT_MAX_ADAPTERS),
            1,
            500,
        )? as usize,
        max_tokens: in_range(
            &at("max_tokens"),
            raw.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            1,
            4096,
        )? as u32,
        top_logprobs: in_range(
            &at("top_logprobs"),
            raw.top_logprobs.unwrap_or(DEFAULT_TOP_LOGPROBS),
            1,
            20,
        )? as u32,
        margin,
        prompts: Arc::from(prompts),
        names,
        discover,
        golden: golden.map(|(_, _, recorded)| Arc::new(recorded)),
        llama_cpp,
    })
}

/// A golden file's references, its prompts, and what it was recorded with, checked
/// against this target's settings.
fn recorded(
    at: &dyn Fn(&str) -> String,
    raw: &RawAdapters,
    backend: BackendKind,
    path: &str,
) -> Result<(canary::Golden, Vec<String>, Recorded), ConfigError> {
    let fail = |e: String| ConfigError::new(at("golden"), e);
    let (golden, _) = canary::load_golden(Path::new(path)).map_err(fail)?;
    if golden.adapters.is_empty() {
        return Err(fail(format!(
            "{path} holds no adapter's answers: record it with `inferprobe canary record --adapters`"
        )));
    }
    if golden.backend != backend.as_str() {
        return Err(fail(format!(
            "{path} was recorded with backend {}, this target uses {backend}: a chat template changes every answer; record it again",
            golden.backend
        )));
    }
    for (key, set, recorded) in [
        ("max_tokens", raw.max_tokens, golden.max_tokens),
        ("top_logprobs", raw.top_logprobs, golden.top_logprobs),
    ] {
        if set.is_some_and(|v| v != u64::from(recorded)) {
            return Err(ConfigError::new(
                at(key),
                format!(
                    "{path} was recorded with {key} = {recorded}; leave it unset or record again"
                ),
            ));
        }
    }
    let by_prompt = |answers: &[canary::GoldenAnswer]| -> HashMap<String, Arc<canary::Reference>> {
        answers
            .iter()
            .filter(|a| a.expect.is_none() && !a.answer.positions.is_empty())
            .map(|a| (a.prompt.clone(), Arc::new(a.answer.clone())))
            .collect()
    };
    let base = by_prompt(&golden.answers);
    let prompts: Vec<String> = golden
        .answers
        .iter()
        .filter(|a| base.contains_key(&a.prompt))
        .map(|a| a.prompt.clone())
        .collect();
    if prompts.is_empty() {
        return Err(fail(format!(
            "{path} holds no base answer with logprobs to compare (known answers are the canary's): record it again"
        )));
    }
    let adapters = golden
        .adapters
        .iter()
        .map(|a| {
            let answers = by_prompt(&a.answers);
            (
                a.name.clone(),
                RecordedAdapter {
                    root: a.root.clone(),
                    answers,
                },
            )
        })
        .collect();
    let recorded = Recorded {
        path: path.to_owned(),
        model: golden.model.clone(),
        base,
        adapters,
    };
    Ok((golden, prompts, recorded))
}
