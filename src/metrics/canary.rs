//! The correctness canary's series: checks by result, where answers diverged, and how far
//! logprobs drifted where they agreed. Nothing per prompt or token is a label: the prompt,
//! the position and the tokens of a divergence go to the log line and the status page.

use crate::structure::Capability;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::gate::{GateFamilies, GateSeries, PairResult};
use super::{LabeledFamily, TargetLabels, labels};

/// A target's labels and its canary `group` (the reference group it is judged in: its
/// controller revision or `group_by` values; empty for a static target). A replica is in
/// one group, so the label adds no series: it names, on the replica's own series, which
/// of its pool's replicas it may be compared with.
type GroupLabels = (TargetLabels, [(&'static str, String); 1]);
type CheckLabels = (
    TargetLabels,
    (
        [(&'static str, String); 1],
        [(&'static str, &'static str); 1],
    ),
);

/// The `capability` label (a closed set) on the structured series, and `reason` too on the
/// invalid ones: a broken capability is judged on its own checks.
type StructuredLabels = (
    TargetLabels,
    (
        [(&'static str, String); 1],
        [(&'static str, &'static str); 1],
    ),
);
type InvalidLabels = (
    TargetLabels,
    (
        [(&'static str, String); 1],
        [(&'static str, &'static str); 2],
    ),
);

/// How a check ended (the `result` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckResult {
    Match,
    Diverged,
    WrongAnswer,
    /// A structured answer (JSON, a tool call) that an agent could not use: see
    /// [`InvalidReason`].
    InvalidOutput,
    /// No verdict: no logprobs, no reference yet, or the request failed (the failure is
    /// counted as every probe's is).
    Unscored,
}

impl CheckResult {
    pub const ALL: [Self; 5] = [
        Self::Match,
        Self::Diverged,
        Self::WrongAnswer,
        Self::InvalidOutput,
        Self::Unscored,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Match => "match",
            Self::Diverged => "diverged",
            Self::WrongAnswer => "wrong_answer",
            Self::InvalidOutput => "invalid_output",
            Self::Unscored => "unscored",
        }
    }
}

/// Why a structured answer was invalid (the `reason` label): a closed set, so no part of
/// the output is ever a label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidReason {
    /// The request was refused (HTTP 400 or 422: a schema feature the server lacks).
    Rejected,
    /// The answer hit its length limit before the structure closed.
    Truncated,
    /// The text, or a tool call's arguments, is not JSON.
    NotJson,
    /// JSON that breaks the schema (or a function's `parameters`).
    Schema,
    /// A tool call was required and none arrived as one (perhaps as text in `content`).
    NoToolCall,
    /// A call of a function not declared, or not the one `tool_choice` named.
    WrongTool,
    /// The model declined (OpenAI's `refusal`, Anthropic's `refusal` stop reason): no
    /// structure to use, and a canary prompt is nothing to refuse.
    Refused,
}

impl InvalidReason {
    pub const ALL: [Self; 7] = [
        Self::Rejected,
        Self::Truncated,
        Self::NotJson,
        Self::Schema,
        Self::NoToolCall,
        Self::WrongTool,
        Self::Refused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rejected => "rejected",
            Self::Truncated => "truncated",
            Self::NotJson => "not_json",
            Self::Schema => "schema",
            Self::NoToolCall => "no_tool_call",
            Self::WrongTool => "wrong_tool",
            Self::Refused => "refused",
        }
    }
}

/// What one canary check found, for its series.
#[derive(Clone, Debug)]
pub struct CanaryVerdict {
    pub result: CheckResult,
    /// Where a divergence was.
    pub position: Option<usize>,
    pub drift: Option<f64>,
    /// Its comparisons with other groups' references (the rollout gate): the other
    /// group, and the result.
    pub baseline: Vec<(String, PairResult)>,
    /// A known-answer prompt's result (the gate's known-answers metric counts these).
    pub known: Option<CheckResult>,
    /// A structured check that was scored, and the capability it exercised: `None` valid,
    /// `Some(why)` invalid.
    pub structured: Option<(Capability, Option<InvalidReason>)>,
}

/// Token positions: where in a 32-token answer the first divergence was.
const POSITION_BUCKETS: [f64; 11] = [
    0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0,
];
/// Nats: benign batch noise is 1e-7..1e-2 (vLLM PR #32480); a failing kernel goes beyond.
const DRIFT_BUCKETS: [f64; 11] = [
    1e-6, 1e-5, 1e-4, 1e-3, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0,
];

#[derive(Clone, Debug, Default)]
pub(super) struct CanaryFamilies {
    checks: LabeledFamily<CheckLabels, Counter>,
    position: LabeledFamily<GroupLabels, Histogram>,
    drift: LabeledFamily<GroupLabels, Histogram>,
    gate: GateFamilies,
    votes: LabeledFamily<[(&'static str, String); 2], Counter>,
    structured: LabeledFamily<StructuredLabels, Counter>,
    /// Each target's group now, so a reload that moves it to another group drops exactly
    /// the old group's series (no scan of every family at each target's start).
    groups: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<TargetLabels, String>>>,
    invalid: LabeledFamily<InvalidLabels, Counter>,
}

/// One target's canary series.
#[derive(Clone, Debug)]
pub(super) struct CanarySeries {
    checks: [Counter; 5],
    structured: LabeledFamily<StructuredLabels, Counter>,
    invalid: LabeledFamily<InvalidLabels, Counter>,
    position: Histogram,
    drift: Histogram,
    /// The rollout gate's: comparisons with other groups, known answers.
    gate: GateSeries,
    labels: TargetLabels,
    group: String,
}

impl CanaryFamilies {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "canary_checks",
            "Correctness canary checks by result: match, diverged (a token differs where the reference was sure), wrong_answer (a known-answer regex failed), invalid_output (a structured answer an agent could not use), unscored (no logprobs, no reference yet, or the request failed)",
            self.checks.clone(),
        );
        r.register(
            "canary_structured_checks",
            "Scored canary checks of structured prompts (a JSON answer or a tool call): valid or not; the denominator of canary_invalid_outputs",
            self.structured.clone(),
        );
        r.register(
            "canary_invalid_outputs",
            "Structured canary answers an agent could not use, by reason: rejected (HTTP 400/422), truncated (length limit), not_json, schema (breaks the schema or the function's parameters), no_tool_call (none arrived as a call), wrong_tool (undeclared or not the named function), refused (the model declined)",
            self.invalid.clone(),
        );
        r.register(
            "canary_divergence_position",
            "The first token position where a canary answer diverged from its reference",
            self.position.clone(),
        );
        r.register(
            "canary_votes",
            "Canary answers asked of a node-local block's replicas on other nodes, for the reference of a group too small on this node, or of the baseline group where this node runs none of it: answered, failed. A vote is not a check of the replica that gave it",
            self.votes.clone(),
        );
        r.register(
            "canary_logprob_drift",
            "Per scored canary check, the largest logprob difference (nats) from the reference over the tokens where both agreed",
            self.drift.clone(),
        );
        self.gate.register(r);
    }

    fn groups(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<TargetLabels, String>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `capabilities`: those the canary's structured prompts exercise, whose series are
    /// made at 0 now (so `increase()` counts a capability's first failure); `known`: it
    /// has known-answer prompts (their series too).
    pub(super) fn series(
        &self,
        labels: &TargetLabels,
        group: &str,
        capabilities: &[Capability],
        known: bool,
    ) -> CanarySeries {
        let previous = self.groups().insert(labels.clone(), group.to_owned());
        if let Some(old) = previous.filter(|old| old != group) {
            self.forget_group(labels, &old);
        }
        let group = [(labels::GROUP, group.to_owned())];
        let grouped = || (labels.clone(), group.clone());
        let series = CanarySeries {
            checks: CheckResult::ALL.map(|r| {
                self.checks.get_or_insert(
                    (
                        labels.clone(),
                        (group.clone(), [(labels::RESULT, r.as_str())]),
                    ),
                    Counter::default,
                )
            }),
            structured: self.structured.clone(),
            invalid: self.invalid.clone(),
            position: self.position.get_or_insert(grouped(), || {
                Histogram::new(POSITION_BUCKETS.iter().copied())
            }),
            drift: self
                .drift
                .get_or_insert(grouped(), || Histogram::new(DRIFT_BUCKETS.iter().copied())),
            gate: self.gate.series(labels, &group[0].1),
            labels: labels.clone(),
            group: group[0].1.clone(),
        };
        if known {
            series.gate.open_known();
        }
        for &capability in capabilities {
            series.structured_counter(capability);
            for reason in InvalidReason::ALL {
                series.invalid_counter(capability, reason);
            }
        }
        series
    }

    /// The vote counters of a block: answered and failed.
    pub(super) fn votes(&self, block: &str) -> (Counter, Counter) {
        let counter = |result: &str| {
            let key = [
                (labels::TARGET, block.to_owned()),
                (labels::RESULT, result.to_owned()),
            ];
            self.votes.get_or_insert(key, Counter::default)
        };
        (counter("answered"), counter("failed"))
    }

    /// A block's vote counters (the block was removed).
    pub(super) fn remove_votes(&self, block: &str) {
        self.votes.retain(|[(_, b), _]| b != block);
    }

    /// Drop the series of `labels` in group `old`: a replica is in one group, and a reload
    /// that moves it to another (a changed `group_by`, with the same target labels) must
    /// not leave the old group's series frozen.
    fn forget_group(&self, labels: &TargetLabels, old: &str) {
        let group = [(labels::GROUP, old.to_owned())];
        let grouped = (labels.clone(), group.clone());
        for r in CheckResult::ALL {
            self.checks.remove(&(
                labels.clone(),
                (group.clone(), [(labels::RESULT, r.as_str())]),
            ));
        }
        self.gate.forget(labels, Some(old));
        self.invalid
            .retain(|(l, (g, _))| !(l == labels && *g == group));
        self.structured
            .retain(|(l, (g, _))| !(l == labels && *g == group));
        self.position.remove(&grouped);
        self.drift.remove(&grouped);
    }

    pub(super) fn remove(&self, labels: &TargetLabels) {
        self.groups().remove(labels);
        self.checks.retain(|(l, _)| l != labels);
        self.position.retain(|(l, _)| l != labels);
        self.structured.retain(|(l, _)| l != labels);
        self.invalid.retain(|(l, _)| l != labels);
        self.drift.retain(|(l, _)| l != labels);
        self.gate.forget(labels, None);
    }
}

impl CanarySeries {
    fn structured_counter(&self, capability: Capability) -> Counter {
        let key = (
            self.labels.clone(),
            (
                [(labels::GROUP, self.group.clone())],
                [(labels::CAPABILITY, capability.as_str())],
            ),
        );
        self.structured.get_or_insert(key, Counter::default)
    }

    fn invalid_counter(&self, capability: Capability, reason: InvalidReason) -> Counter {
        let key = (
            self.labels.clone(),
            (
                [(labels::GROUP, self.group.clone())],
                [
                    (labels::CAPABILITY, capability.as_str()),
                    (labels::REASON, reason.as_str()),
                ],
            ),
        );
        self.invalid.get_or_insert(key, Counter::default)
    }

    /// The groups this replica is compared with now (their series at 0 if new; those of
    /// groups gone are dropped).
    pub(super) fn open_baselines(&self, pairs: &super::Pairs<'_>) {
        self.gate.open_baselines(pairs);
    }

    pub(super) fn record(&self, verdict: &CanaryVerdict) {
        self.checks[verdict.result as usize].inc();
        if let Some(position) = verdict.position {
            self.position.observe(position as f64);
        }
        if let Some(drift) = verdict.drift {
            self.drift.observe(drift);
        }
        if let Some((capability, invalid)) = verdict.structured {
            self.structured_counter(capability).inc();
            if let Some(reason) = invalid {
                self.invalid_counter(capability, reason).inc();
            }
        }
        for (baseline, result) in &verdict.baseline {
            self.gate.record_baseline(baseline, *result);
        }
        if let Some(known) = verdict.known {
            // No answer is the version's failure, as a comparison's `failed` is.
            self.gate.record_known(match known {
                CheckResult::Unscored => "failed",
                other => other.as_str(),
            });
        }
    }
}
