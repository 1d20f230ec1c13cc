//! The rollout gate: a replica outside its block's baseline group (a rollout's new
//! version) is also compared with the baseline group's reference, and the result counted
//! in `inferprobe_canary_baseline_checks_total`, which never pages. It answers the question
//! of every upgrade — does the new version answer like the old one? — for an Argo Rollouts
//! AnalysisTemplate or a Flagger MetricTemplate to gate on (config/rollouts/).
//!
//! The baseline group is the one `canary.baseline` names, else the oldest (its oldest pod
//! created first: [`super::books`]). For a node-local block it is chosen over the whole pool
//! (the pool-wide watch the votes use), the same on every node; where this node runs none
//! of it — one replica per node, the usual GPU DaemonSet, where the new version's pod never
//! shares a node with a stable one — up to `votes` of its replicas on other nodes are asked
//! each prompt, and their majority is the reference. The baseline's reference is its golden
//! file's answers where one is recorded for it. Only prompts compared by logprobs are
//! compared (known answers are judged the same in every group already).

use std::sync::Arc;

use super::book::Book;
use super::books::Books;
use super::compare::{Verdict, answers};
use super::votes::Pools;
use crate::endpoint::canary::{CanaryPrompt, CanarySpec, Reference};
use crate::metrics::CheckResult;
use crate::probe::ProbeReport;

/// A node-local block's pool on every node, as the baseline sees it.
#[derive(Clone, Debug)]
pub struct PoolView {
    pub pools: Arc<Pools>,
    pub block: String,
}

impl PoolView {
    /// The baseline group of `model` over the whole pool: `named` if any replica serves
    /// it, else the group of the oldest pod (of equals, the first by name). `None` while
    /// the pool-wide watch has found nothing of this model.
    fn baseline(&self, model: &str, named: Option<&str>) -> Option<Option<String>> {
        let pool = self.pools.get(&self.block);
        let mut replicas = pool.iter().filter(|t| t.model == model);
        match named {
            Some(name) => replicas
                .any(|t| t.canary_group().as_deref() == Some(name))
                .then(|| Some(name.to_owned())),
            None => replicas
                .min_by(|a, b| {
                    let created = |t: &crate::endpoint::Target| t.created.unwrap_or(i64::MAX);
                    created(a).cmp(&created(b)).then_with(|| a.id.cmp(&b.id))
                })
                .map(|t| t.canary_group()),
        }
    }
}

/// Where a replica's baseline is found.
#[derive(Clone, Debug)]
pub struct Baseline {
    pub books: Arc<Books>,
    /// The replica's family of books ([`super::book::group_key`]) and its own group.
    pub family: String,
    pub model: String,
    pub group: Option<String>,
    /// `canary.baseline`: the group to compare with, whatever is oldest.
    pub named: Option<String>,
    /// A node-local block's whole pool (`None` for every other target).
    pub pool: Option<PoolView>,
}

impl Baseline {
    /// The baseline group now (`None`: there is none yet).
    fn group_now(&self) -> Option<Option<String>> {
        let named = self.named.as_deref();
        if let Some(group) = self
            .pool
            .as_ref()
            .and_then(|p| p.baseline(&self.model, named))
        {
            return Some(group);
        }
        self.books.baseline(&self.family, named).map(|(g, _)| g)
    }

    /// Whether this replica is now outside its block's baseline group (so its comparisons
    /// with the baseline are counted).
    pub fn outside(&self) -> bool {
        self.group_now().is_some_and(|group| group != self.group)
    }

    /// Where the baseline group has no replica here but the pool has some: the group and
    /// its votes-only book, for [`super::votes::Voters::ensure_for`] to fill before a check.
    pub fn remote(&self) -> Option<(Option<String>, Arc<Book>)> {
        self.pool.as_ref()?;
        let group = self.group_now()?;
        if group == self.group || self.books.live(&self.family, group.as_deref()).is_some() {
            return None;
        }
        let book = self.books.remote(&self.family, group.as_deref());
        Some((group, book))
    }

    /// The comparison of this answer with the baseline's reference; `None` when the
    /// replica is in the baseline group (or there is none), or the prompt is a known answer.
    pub fn check(
        &self,
        spec: &CanarySpec,
        prompt: &CanaryPrompt,
        report: &ProbeReport,
        margin: f64,
    ) -> Option<CheckResult> {
        if !prompt.compared() {
            return None;
        }
        let group = self.group_now()?;
        if group == self.group {
            return None;
        }
        let Some(answer) = super::answer(report).filter(|a| !a.positions.is_empty()) else {
            return Some(CheckResult::Unscored);
        };
        let Some(reference) = self.reference(spec, group.as_deref(), prompt) else {
            return Some(CheckResult::Unscored);
        };
        Some(match answers(&reference, &answer, margin) {
            Verdict::Match { .. } => CheckResult::Match,
            Verdict::Diverged(_) => CheckResult::Diverged,
        })
    }

    /// The baseline group's reference for `prompt`: its golden answer where the golden file
    /// is recorded for it (its replicas, judged by the file, learn none), else its
    /// majority here, else its voters' from other nodes.
    fn reference(
        &self,
        spec: &CanarySpec,
        group: Option<&str>,
        prompt: &CanaryPrompt,
    ) -> Option<Arc<Reference>> {
        if spec.golden_applies(&self.model, group) {
            return prompt.reference.clone();
        }
        let text = &prompt.text;
        match self.books.live(&self.family, group) {
            Some(book) => book.reference_for_others(text),
            None => self
                .books
                .remote_existing(&self.family, group)?
                .reference_for_others(text),
        }
    }
}
