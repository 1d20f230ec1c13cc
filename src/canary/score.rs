//! One canary answer judged: the request a check sends ([`prompt`]), the answer a report
//! holds ([`answer`]), and the verdict on it ([`score`]): a known answer by its regex, a
//! structured one by its schema, any other by its logprobs against a reference.

use std::sync::Arc;

use super::SEED;
use super::book;
use super::compare::{self, Verdict};
use super::structured;
use crate::endpoint::canary::{CanaryPrompt, CanarySpec, Reference};
use crate::logprobs::Unreadable;
use crate::metrics::{CheckResult, InvalidReason};
use crate::probe::{Outcome, ProbeReport};
use crate::prompt::{Greedy, Prompt};
use crate::record::Logprobs;

/// What one check found.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub result: CheckResult,
    /// Where a divergence was (`diverged`), with the expected and received tokens.
    pub divergence: Option<compare::Divergence>,
    /// The largest logprob difference over the agreed prefix (scored logprob checks).
    pub drift: Option<f64>,
    /// Why it was unscored, or what a wrong answer said.
    pub note: Option<String>,
    /// Why a structured answer was invalid (`invalid_output`).
    pub invalid: Option<InvalidReason>,
    /// A structured prompt's check, scored (counted in `canary_structured_checks_total`).
    pub structured: bool,
}

impl Check {
    pub(super) fn unscored(note: impl Into<String>) -> Self {
        Self {
            result: CheckResult::Unscored,
            divergence: None,
            drift: None,
            note: Some(note.into()),
            invalid: None,
            structured: false,
        }
    }

    pub(super) fn scored(result: CheckResult, note: Option<String>) -> Self {
        Self {
            result,
            divergence: None,
            drift: None,
            note,
            invalid: None,
            structured: false,
        }
    }
}

/// The prompt a canary sends: its text exactly, no nonce, no media.
pub fn prompt(spec: &CanarySpec, text: &str, model: &str) -> Prompt {
    greedy_prompt(text, model, spec.max_tokens, spec.top_logprobs)
}

/// A greedy, seeded prompt of `text` exactly, with `top_logprobs` alternatives per token
/// (the canary's, and the adapter check's).
pub fn greedy_prompt(text: &str, model: &str, max_tokens: u32, top_logprobs: u32) -> Prompt {
    Prompt {
        text: text.to_owned(),
        // The client's approximation (it is not measured here).
        input_tokens: text.split_whitespace().count() as u32,
        input_exact: false,
        max_tokens,
        model: model.to_owned(),
        media: Ok(Vec::new()),
        greedy: Some(Greedy {
            top_logprobs,
            seed: SEED,
            pinned: true,
        }),
        sampled: None,
        structure: None,
        cache_breakpoint: None,
        conversation: None,
        extra: None,
    }
}

/// The answer a report holds: text, positions and how it ended (`None`: it failed).
pub fn answer(report: &ProbeReport) -> Option<Reference> {
    let Outcome::Finished(Ok(_)) = report.outcome else {
        return None;
    };
    let response = &report.record.response;
    Some(Reference {
        text: response.text.clone(),
        positions: response
            .logprobs
            .as_ref()
            .map(|l| l.positions.clone())
            .unwrap_or_default(),
        finish_reason: response.finish_reason.clone(),
    })
}

/// Score one answer. `reference` is asked for only when logprobs are compared.
pub fn score(
    prompt: &CanaryPrompt,
    report: &ProbeReport,
    margin: f64,
    reference: impl FnOnce(Arc<Reference>) -> Result<Arc<Reference>, book::NoReference>,
) -> Check {
    if let Some(structure) = &prompt.structure {
        return structured::judge(prompt, structure, report);
    }
    let Outcome::Finished(result) = &report.outcome else {
        return Check::unscored("cut by shutdown");
    };
    if let Err(e) = result {
        return Check::unscored(format!("the request failed ({})", e.category()));
    }
    let response = &report.record.response;
    if let Some(Some(Unreadable::Impossible(why))) =
        response.logprobs.as_ref().map(|l| &l.unreadable)
    {
        // Not an absence of data: numbers no healthy model produces, on a 200.
        return Check::scored(
            CheckResult::WrongAnswer,
            Some(format!("impossible logprobs (broken numerics): {why}")),
        );
    }
    if let Some(expect) = &prompt.expect {
        let right = expect.is_match(&response.text);
        let result = if right {
            CheckResult::Match
        } else {
            CheckResult::WrongAnswer
        };
        return Check::scored(
            result,
            (!right).then(|| {
                format!(
                    "expected /{}/, received {:?}",
                    expect.as_str(),
                    crate::error::snippet(&response.text)
                )
            }),
        );
    }
    match response.logprobs.as_ref() {
        None => return Check::unscored("the server sent no logprobs"),
        Some(Logprobs {
            unreadable: Some(why),
            ..
        }) => return Check::unscored(format!("malformed logprobs: {why}")),
        Some(l) if l.positions.is_empty() => return Check::unscored("the server sent no logprobs"),
        Some(_) => {}
    }
    let Some(answer) = answer(report) else {
        return Check::unscored("no answer");
    };
    let answer = Arc::new(answer);
    let reference = match reference(Arc::clone(&answer)) {
        Ok(reference) => reference,
        Err(why) => return Check::unscored(why.note()),
    };
    match compare::answers(&reference, &answer, margin) {
        Verdict::Match { drift, .. } => Check {
            drift: Some(drift),
            ..Check::scored(CheckResult::Match, None)
        },
        Verdict::Diverged(d) => Check {
            drift: Some(d.drift),
            divergence: Some(d),
            ..Check::scored(CheckResult::Diverged, None)
        },
    }
}
