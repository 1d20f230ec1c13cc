//! Validation of a target's `canary = { interval, max_tokens, top_logprobs, margin,
//! prompts, golden }`: which backends can run one and how, and every file read now (a bad
//! prompts or golden file fails `inferprobe check` naming its key, file and line).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::fields::{duration, in_range};
use super::{ConfigError, RawCanary};
use crate::endpoint::BackendKind;
use crate::endpoint::canary::{self, CanarySpec};

type At<'a> = &'a dyn Fn(&str) -> String;

const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
const DEFAULT_MAX_TOKENS: u64 = 32;
/// A short reasoning preamble and the answer (docs/structured.md).
const DEFAULT_STRUCTURED_MAX_TOKENS: u64 = 512;
const DEFAULT_TOP_LOGPROBS: u64 = 5;
/// Nats. Batch noise moves logprobs by 1e-7..1e-2, rarely 0.07 (vLLM PR #32480); a trained
/// model leads by more than 1 nat at most positions (docs/canary.md).
const DEFAULT_MARGIN: f64 = 1.0;
/// With one replica on a node, three votes make a majority that outvotes it.
const DEFAULT_VOTES: u64 = 3;
/// A new replica's first checks run back to back: whole rounds of its prompts, at least two
/// and enough for 12 comparisons by logprobs and 4 known answers, so a rollout gate
/// (`min-checks` 10, `min-known` 3, with room for a failed request) has its verdict within
/// seconds of the new version's first ready replica, not after ten intervals
/// (docs/canary.md). At most 48 checks.
const WARMUP_ROUNDS: usize = 2;
const WARMUP_COMPARED: usize = 12;
const WARMUP_KNOWN: usize = 4;
const WARMUP_MAX: usize = 48;
/// The shipped templates' `max-divergence`.
const DEFAULT_MAX_DIVERGENCE: f64 = 0.1;

/// The default warm-up of a canary with these prompts.
fn warmup(prompts: &[canary::CanaryPrompt]) -> usize {
    let compared = prompts.iter().filter(|p| p.compared()).count();
    let known = prompts.iter().filter(|p| p.known()).count();
    let rounds_for = |want: usize, per_round: usize| match per_round {
        0 => 0,
        n => want.div_ceil(n),
    };
    let rounds = WARMUP_ROUNDS
        .max(rounds_for(WARMUP_COMPARED, compared))
        .max(rounds_for(WARMUP_KNOWN, known));
    (rounds * prompts.len()).min(WARMUP_MAX)
}

/// The canary, and a hash of the files it read (their edits restart the target).
pub(super) fn canary(
    target_at: At,
    raw: &RawCanary,
    backend: BackendKind,
    extra_body: &serde_json::Map<String, serde_json::Value>,
    mounted: bool,
) -> Result<(Arc<CanarySpec>, u64), ConfigError> {
    // What a structured prompt's body holds before its structure is spelled: whether it can
    // be sent may depend on it (Claude's extended thinking refuses a forced tool call).
    let spelled =
        |s: &crate::structure::Structure| backend.backend().structure(&mut extra_body.clone(), s);
    let at = |field: &str| target_at(&format!("canary.{field}"));
    if matches!(
        backend,
        BackendKind::OpenAiEmbeddings | BackendKind::OpenAiAudio | BackendKind::DeepSpeedMii
    ) {
        return Err(ConfigError::new(
            target_at("canary"),
            format!("{backend} generates no streamed text to check: a canary needs a text backend"),
        ));
    }
    let interval = duration(&at("interval"), raw.interval.as_ref(), DEFAULT_INTERVAL)?;
    // Tests check every 10 ms; production every minute or so.
    if !(Duration::from_millis(10)..=Duration::from_secs(86_400)).contains(&interval) {
        return Err(ConfigError::new(
            at("interval"),
            "must be between 10ms and 24h",
        ));
    }
    let logprobs = backend.backend().reports_logprobs();

    let margin = raw.margin.unwrap_or(DEFAULT_MARGIN);
    if !(margin.is_finite() && margin >= 0.0) {
        return Err(ConfigError::new(
            at("margin"),
            format!("{margin} must be a number of nats >= 0"),
        ));
    }
    let mut files = DefaultHasher::new();
    // `check --no-secrets` on a laptop: a file the cluster mounts (a ConfigMap) is checked
    // where it is at hand and noted where it is not.
    let absent = |path: &str| mounted && !Path::new(path).exists();
    let mut unread = None;
    let (prompts, golden, recorded) = match (&raw.prompts, &raw.golden) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::new(
                at("golden"),
                "a golden file brings its own prompts: set `prompts` or `golden`, not both",
            ));
        }
        (Some(path), None) | (None, Some(path)) if absent(path) => {
            unread = Some(path.clone());
            (Vec::new(), None, None)
        }
        (Some(path), None) => {
            hash_file(path, &mut files);
            let prompts = canary::load_prompts(Path::new(path))
                .map_err(|e| ConfigError::new(at("prompts"), e))?;
            (prompts, None, None)
        }
        (None, Some(path)) => {
            hash_file(path, &mut files);
            let (golden, prompts) = canary::load_golden(Path::new(path))
                .map_err(|e| ConfigError::new(at("golden"), e))?;
            fits(&golden, raw, backend)
                .map_err(|e| ConfigError::new(at("golden"), misfit(path, &e)))?;
            (prompts, Some(path.clone()), Some(golden))
        }
        (None, None) => (Vec::new(), None, None),
    };
    let structured = raw.structured.unwrap_or(false);
    if structured && raw.prompts.is_some() {
        return Err(ConfigError::new(
            at("structured"),
            "adds the built-in structured prompts, but a prompts file brings its own: put structured lines in it (`response_format`, `tools`)",
        ));
    }
    let mut prompts = prompts;
    if prompts.is_empty() {
        // The built-in set: the text prompts where logprobs can compare them.
        let compares = logprobs && raw.top_logprobs != Some(0);
        if !structured || compares {
            prompts = canary::built_in();
        }
    }
    if structured {
        let mut sendable = canary::built_in_structured();
        sendable.retain(|p| p.structure.as_deref().is_some_and(|s| spelled(s).is_ok()));
        if sendable.is_empty() {
            return Err(ConfigError::new(
                at("structured"),
                format!("{backend} can send neither a JSON answer nor tools"),
            ));
        }
        prompts.extend(sendable);
    }
    for (i, prompt) in prompts.iter().enumerate() {
        if let Some(structure) = &prompt.structure {
            if let Err(e) = spelled(structure) {
                return Err(ConfigError::new(
                    at("prompts"),
                    format!("prompt {} ({:?}): {backend}: {e}", i + 1, prompt.text),
                ));
            }
        }
    }
    let top_logprobs = in_range(
        &at("top_logprobs"),
        raw.top_logprobs
            .or(recorded.as_ref().map(|g| u64::from(g.top_logprobs)))
            .unwrap_or(DEFAULT_TOP_LOGPROBS),
        0,
        20,
    )? as u32;
    let compared = prompts.iter().filter(|p| p.compared()).count();
    if compared > 0 && !(logprobs && top_logprobs > 0) {
        let why = if logprobs {
            "top_logprobs = 0 asks for no logprobs"
        } else {
            "this backend reports no logprobs"
        };
        return Err(ConfigError::new(
            at("prompts"),
            format!(
                "{compared} prompt(s) have no `expect` and would be compared by logprobs, but {why}: give a prompts file whose every line has an `expect` regex (known answers)"
            ),
        ));
    }
    let max_tokens = match (raw.max_tokens, &recorded) {
        (Some(n), _) => n,
        (None, Some(g)) => u64::from(g.max_tokens),
        (None, None) => DEFAULT_MAX_TOKENS,
    };
    let group_by = raw.group_by.clone().unwrap_or_default();
    for name in &group_by {
        if name.is_empty() {
            return Err(ConfigError::new(
                at("group_by"),
                "holds an empty label name",
            ));
        }
        // The group is made of the replica's own labels; these never are one.
        if crate::config::RESERVED_LABELS.contains(&name.as_str()) {
            return Err(ConfigError::new(
                at("group_by"),
                format!(
                    "`{name}` is a label inferprobe sets itself, never one of a replica's own, \
                     so every replica would be in the group \"\""
                ),
            ));
        }
    }
    let golden_for = recorded
        .as_ref()
        .map(|g| (g.model.clone(), g.group.clone()));
    let warmup = match raw.warmup {
        Some(n) => in_range(&at("warmup"), n, 0, 1000)? as usize,
        None => warmup(&prompts),
    };
    let spec = CanarySpec {
        interval,
        max_tokens: in_range(&at("max_tokens"), max_tokens, 1, 4096)? as u32,
        structured_max_tokens: in_range(
            &at("structured_max_tokens"),
            raw.structured_max_tokens
                .unwrap_or(DEFAULT_STRUCTURED_MAX_TOKENS),
            1,
            32_768,
        )? as u32,
        top_logprobs: if logprobs { top_logprobs } else { 0 },
        margin,
        prompts: prompts.into(),
        golden,
        golden_for,
        group_by,
        baseline: raw.baseline.clone(),
        votes: in_range(&at("votes"), raw.votes.unwrap_or(DEFAULT_VOTES), 0, 16)? as usize,
        warmup,
        max_divergence: match raw.max_divergence {
            None => DEFAULT_MAX_DIVERGENCE,
            Some(d) if d.is_finite() && (0.0..1.0).contains(&d) => d,
            Some(d) => {
                return Err(ConfigError::new(
                    at("max_divergence"),
                    format!("{d} is no share of diverged comparisons: give one in [0, 1)"),
                ));
            }
        },
        unread,
    };
    Ok((Arc::new(spec), files.finish()))
}

/// Why a golden file does not fit its target, and what to do.
fn misfit(path: &str, why: &str) -> String {
    format!(
        "{path}: {why}; record one for this target with `inferprobe canary record --config FILE --target NAME`"
    )
}

/// A static target is one group: a golden file of another model would never apply to it.
/// (A discovery block's replicas may serve several models, in a rollout or by a model
/// label: there the golden file applies to its own model's group, the others learn theirs.)
pub(super) fn golden_serves(spec: &CanarySpec, model: &str, key: &str) -> Result<(), ConfigError> {
    match (&spec.golden, &spec.golden_for) {
        (Some(path), Some((recorded, _))) if recorded != model => Err(ConfigError::new(
            format!("{key}.canary.golden"),
            misfit(
                path,
                &format!("recorded for model {recorded:?}, this target serves {model:?}"),
            ),
        )),
        _ => Ok(()),
    }
}

/// Whether a golden file was recorded as this target asks: the same wire format (a chat
/// template changes every answer), and as many alternatives per token (the rule bounds
/// unlisted tokens by the list). A mismatch would diverge on every check. The model is
/// checked where the target's groups are known ([`golden_serves`]).
fn fits(golden: &canary::Golden, raw: &RawCanary, backend: BackendKind) -> Result<(), String> {
    if golden.backend != backend.as_str() {
        return Err(format!(
            "recorded with backend {}, this target is {backend}",
            golden.backend
        ));
    }
    let settings = [
        ("top_logprobs", raw.top_logprobs, golden.top_logprobs),
        ("max_tokens", raw.max_tokens, golden.max_tokens),
    ];
    for (key, asked, recorded) in settings {
        if let Some(n) = asked.filter(|&n| n != u64::from(recorded)) {
            return Err(format!(
                "recorded with {key} = {recorded}, this target asks for {n}"
            ));
        }
    }
    Ok(())
}

/// A file's bytes into the target's fingerprint (an unreadable one fails just after).
fn hash_file(path: &str, h: &mut DefaultHasher) {
    std::fs::read(path).unwrap_or_default().hash(h);
}
