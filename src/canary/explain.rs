//! What `inferprobe check` says of a target's canary: how its prompts will be scored, and
//! which shipped alerts its interval makes impossible.

use std::time::Duration;

use crate::endpoint::canary::CanarySpec;

/// What `inferprobe check` says of a target's canary: how its prompts will be scored.
/// `source` is its discovery block's source (`None`: a configured target), which decides
/// what its group really is.
pub fn describe(
    spec: &CanarySpec,
    backend: crate::endpoint::BackendKind,
    source: Option<&str>,
) -> String {
    let structured = spec
        .prompts
        .iter()
        .filter(|p| p.structure.is_some())
        .count();
    let compared = spec.prompts.iter().filter(|p| p.compared()).count();
    let known = spec.prompts.iter().filter(|p| p.known()).count();
    let groups = match (spec.group_by.is_empty(), source) {
        (false, _) => format!("its group (labels {})", spec.group_by.join(", ")),
        (true, Some("pods" | "inferencepool")) => {
            "its group (the pod's controller revision: rollouts-pod-template-hash, \
             pod-template-hash or controller-revision-hash)"
                .to_owned()
        }
        (true, Some(_)) => {
            "its block, one group: file_sd names no version (group_by a label that does)".to_owned()
        }
        (true, None) => "its group (none: a configured target stands alone)".to_owned(),
    };
    let reference = match (&spec.golden, &spec.golden_for) {
        (Some(path), Some((model, Some(group)))) => format!(
            "the golden file {path} for {model} in group {group:?}, elsewhere the majority answer of the other replicas of {groups}"
        ),
        (Some(path), _) => format!(
            "the golden file {path} (other models: the majority answer of the other replicas of {groups})"
        ),
        (None, _) => format!(
            "the majority answer of the other replicas of {groups} (below three: the last majority answer, else the other's if two agree, else its own first)"
        ),
    };
    let mut out = format!(
        "canary every {:?}, {} prompt(s), {} tokens",
        spec.interval,
        spec.prompts.len(),
        spec.max_tokens
    );
    if compared > 0 {
        out += &format!(
            "; {compared} compared by logprobs (top {}, margin {} nats) with {reference}",
            spec.top_logprobs, spec.margin
        );
    }
    if known > 0 {
        out += &format!("; {known} known answer(s) by regex");
    }
    if structured > 0 {
        out += &format!(
            "; {structured} structured (JSON or a tool call) judged by its schema, {} tokens each",
            spec.structured_max_tokens
        );
    }
    if spec.top_logprobs == 0 {
        out +=
            &format!(" ({backend} reports no logprobs: known answers and structured checks only)");
    }
    if spec.warmup > 0 {
        out += &format!(
            "; a replica just found is checked back to back first, {} at once: {} times, \
             and on until its comparisons decide the gate at max_divergence {} (at most {})",
            super::warmup::AT_ONCE,
            spec.warmup,
            spec.max_divergence,
            super::warmup::most(spec.warmup)
        );
    }
    out += &format!("; rollout gate: {}", gate(spec, compared, known));
    out
}

/// What a rollout gate (config/rollouts/) can read of this canary: its comparisons with
/// other groups, and its known answers, without which the known-answers metric never
/// decides (-1: Argo pauses the rollout, Flagger fails its checks).
fn gate(spec: &CanarySpec, compared: usize, known: usize) -> String {
    let pairs = match (&spec.baseline, compared) {
        (_, 0) => {
            "no comparison with other versions (every prompt is a known answer or structured)"
                .to_owned()
        }
        (Some(b), _) => format!("compared with group {b:?} only (canary.baseline)"),
        (None, _) => {
            "each version compared with every other by name (the template selects the pair)"
                .to_owned()
        }
    };
    let known = if let Some(path) = &spec.unread {
        // The built-in prompts stand in for a file the cluster mounts: their count says
        // nothing of the file's, so advising known answers it may have would mislead.
        format!("known answers: those of {path}, not read here")
    } else if known == 0 {
        "no known answers, so a gate on known answers (the templates' known-answers metric) stays -1 and cannot pass: add prompts with an `expect` regex (config/kubernetes/canary-prompts.jsonl has three)"
            .to_owned()
    } else {
        format!("{known} known answer(s) per round of the prompts")
    };
    format!("{pairs}; {known}")
}

/// The shipped alerts' windows and the scored checks they need in them (docs/canary.md, "Canary
/// alerts"): one replica is checked once per `interval`.
pub const ALERT_WINDOW: Duration = Duration::from_secs(30 * 60);
pub const WRONG_ANSWERS_NEED: u32 = 5;
pub const DRIFT_NEEDS: u32 = 10;
pub const INVALID_OUTPUTS_NEED: u32 = 5;

/// What `check` warns of: shipped alerts this interval makes impossible (too few checks
/// of a replica fit in their window). The windows are not scaled to the interval: a
/// replica checked every ten minutes needs hours to tell a pattern from one bad answer.
pub fn warnings(spec: &CanarySpec) -> Vec<String> {
    let fit = (ALERT_WINDOW.as_secs_f64() / spec.interval.as_secs_f64()).floor() as u32;
    // Drift is measured on logprob comparisons only: known answers and structured checks
    // have none, so the drift alert is no concern of a canary without compared prompts.
    let compares = spec.prompts.iter().any(|p| p.compared());
    let mut warnings: Vec<String> = [
        ("InferprobeWrongAnswers", WRONG_ANSWERS_NEED, true),
        ("InferprobeCanaryDrift", DRIFT_NEEDS, compares),
    ]
    .into_iter()
    .filter(|&(_, need, applies)| applies && fit < need)
    .map(|(alert, need, _)| (alert, need))
    .map(|(alert, need)| {
        format!(
            "canary.interval {:?} fits {fit} check(s) of a replica in 30 minutes: {alert} needs {need} and can never fire (at most {:?})",
            spec.interval,
            ALERT_WINDOW / need
        )
    })
    .collect();
    // Round robin: the structured prompts get their share of the checks.
    let structured = spec
        .prompts
        .iter()
        .filter(|p| p.structure.is_some())
        .count();
    let total = spec.prompts.len().max(1);
    let structured_fit = (fit as usize * structured / total) as u32;
    if structured > 0 && structured_fit < INVALID_OUTPUTS_NEED {
        warnings.push(format!(
            "canary.interval {:?} with {structured} structured prompt(s) of {total} fits {structured_fit} structured check(s) of a replica in 30 minutes: InferprobeInvalidOutputs needs {INVALID_OUTPUTS_NEED} and can never fire",
            spec.interval
        ));
    }
    // A token is about 3 characters of JSON (punctuation and short keys tokenize densely):
    // an estimate to catch a budget that can never hold the answer, not a count.
    for (i, prompt) in spec.prompts.iter().enumerate() {
        let Some(structure) = &prompt.structure else {
            continue;
        };
        let smallest = structure.smallest_answer();
        let tokens = smallest.len().div_ceil(3) as u32;
        if spec.structured_max_tokens < tokens {
            warnings.push(format!(
                "canary.structured_max_tokens {} cannot hold prompt {}'s smallest answer (about {tokens} tokens: {}): every check of it would be `truncated`",
                spec.structured_max_tokens,
                i + 1,
                crate::error::snippet(&smallest)
            ));
        }
    }
    warnings
}
