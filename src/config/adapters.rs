//! Validation of a target's `adapters = { … }`: the adapter check (docs/adapters.md). Off
//! unless set; the defaults ask three 16-token greedy answers a minute per replica.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::fields::{duration, in_range};
use super::{ConfigError, RawAdapters};
use crate::endpoint::BackendKind;
use crate::endpoint::adapters::AdapterSpec;
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
    let prompts: Vec<String> = match &raw.prompts {
        None => canary::BUILT_IN.iter().map(|p| (*p).to_owned()).collect(),
        Some(path) => canary::load_prompts(Path::new(path))
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
    })
}
