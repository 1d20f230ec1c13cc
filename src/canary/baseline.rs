//! The rollout gate: a replica outside its block's baseline group (a rollout's new
//! version) is also compared with the baseline group's reference, and the result counted
//! in `inferprobe_canary_baseline_checks_total`, which never pages. It answers the question
//! of every upgrade — does the new version answer like the old one? — for an Argo Rollouts
//! AnalysisTemplate or a Flagger MetricTemplate to gate on (config/rollouts/).
//!
//! The baseline group is the one `canary.baseline` names, else the one of the same block
//! and model whose replicas have been present longest. Only prompts compared by logprobs
//! are compared (known answers are judged the same in every group already).

use std::sync::Arc;

use super::book::Books;
use super::compare::{Verdict, answers};
use crate::endpoint::canary::CanaryPrompt;
use crate::metrics::CheckResult;
use crate::probe::ProbeReport;

/// Where a replica's baseline is found.
#[derive(Clone, Debug)]
pub struct Baseline {
    pub books: Arc<Books>,
    /// The replica's family of books ([`super::book::group_key`]) and its own group.
    pub family: String,
    pub group: Option<String>,
    /// `canary.baseline`: the group to compare with, whatever was present first.
    pub named: Option<String>,
}

impl Baseline {
    /// Whether this replica is now outside its block's baseline group (so its comparisons
    /// with the baseline are counted).
    pub fn outside(&self) -> bool {
        self.books
            .baseline(&self.family, self.named.as_deref())
            .is_some_and(|(group, _)| group != self.group)
    }

    /// The comparison of this answer with the baseline's reference; `None` when the
    /// replica is in the baseline group (or there is none), or the prompt is a known answer.
    pub fn check(
        &self,
        prompt: &CanaryPrompt,
        report: &ProbeReport,
        margin: f64,
    ) -> Option<CheckResult> {
        if !prompt.compared() {
            return None;
        }
        let (group, book) = self.books.baseline(&self.family, self.named.as_deref())?;
        if group == self.group {
            return None;
        }
        let Some(answer) = super::answer(report).filter(|a| !a.positions.is_empty()) else {
            return Some(CheckResult::Unscored);
        };
        let Some(reference) = book.reference_for_others(&prompt.text) else {
            return Some(CheckResult::Unscored);
        };
        Some(match answers(&reference, &answer, margin) {
            Verdict::Match { .. } => CheckResult::Match,
            Verdict::Diverged(_) => CheckResult::Diverged,
        })
    }
}
