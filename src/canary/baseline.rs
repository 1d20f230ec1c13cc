//! The rollout gate: each replica is also compared with the reference of every *other*
//! group of its block (another version, mid-rollout), and the result counted per pair in
//! `inferprobe_canary_baseline_checks_total{group, baseline, result}`, which never pages.
//! It answers the question of every upgrade — does the new version answer like the old
//! one? — for an Argo Rollouts AnalysisTemplate or a Flagger MetricTemplate to gate on
//! (config/rollouts/). The controller names both sides (Argo's `podTemplateHashValue:
//! Stable` and `Latest`; Flagger's `<target>-primary` and `<target>`), so the template
//! selects the pair: no guess of the daemon's (the oldest pod) decides which group is
//! stable, and no restart, eviction, abort, retry or rollback can swap the roles.
//!
//! A replica is compared with at most [`MAX_OTHERS`] other groups, so the pair must not be
//! the one cut: four Argo Rollouts of one model (one per zone, one `app` label) make a group
//! per zone and revision, and by age alone a zone whose stable pods were recreated
//! (`kubectl argo rollouts restart`) had its canary compared with the three other zones
//! only — its gate read −1, Inconclusive, at every measurement. The lineage
//! ([`super::lineage`]) tells the pair without a guess: the groups holding another revision
//! of a workload of the replica's group (Argo's Stable and Latest hashes of one Rollout)
//! come first, then the rest, each oldest first. Replicas without a lineage (a file_sd
//! pool) keep the oldest first.
//!
//! `canary.baseline` (a file_sd block, where no controller names anything) limits the
//! comparisons to that one group, whose own replicas are compared with nothing. For a
//! node-local block the other groups are found over the whole pool (the pool-wide watch
//! the votes use); where this node runs none of one — one replica per node, the usual GPU
//! DaemonSet, where the new version's pod never shares a node with a stable one — up to
//! `votes` of its replicas on other nodes are asked each prompt, and their majority is its
//! reference. A group's reference is its golden file's answers where one is recorded for
//! it. Only prompts compared by logprobs are compared (known answers are judged the same
//! in every group already).

use std::sync::Arc;

use super::book::Book;
use super::books::Books;
use super::compare::{Verdict, answers};
use super::lineage::Lineage;
use super::votes::Pools;
use crate::endpoint::canary::{CanaryPrompt, CanarySpec, Reference};
use crate::metrics::PairResult;
use crate::probe::ProbeReport;

/// The most other groups one replica is compared with: a rollout has two versions, an
/// aborted one retried or a rollout started mid-rollout three; each pair costs four series
/// per replica and one comparison per check. Where a block holds more (a Rollout per zone
/// under one `app` label), the groups holding another revision of a workload of the
/// replica's own group come first ([`Baseline::others`]), so the pair its controller
/// names is never the one cut.
pub const MAX_OTHERS: usize = 3;

/// A node-local block's pool on every node, as the gate sees it.
#[derive(Clone, Debug)]
pub struct PoolView {
    pub pools: Arc<Pools>,
    pub block: String,
}

impl PoolView {
    /// The groups of `model` over the whole pool, each with its oldest pod's creation
    /// time (Unix seconds; `f64::MAX` where discovery does not say).
    fn groups(&self, model: &str) -> Vec<(Option<String>, f64)> {
        let mut found = Vec::new();
        for t in self
            .pools
            .get(&self.block)
            .iter()
            .filter(|t| t.model == model)
        {
            let created = t.created.map_or(f64::MAX, |c| c as f64);
            oldest(&mut found, t.canary_group(), created);
        }
        found
    }

    /// The lineages of `group` of `model`'s replicas over the whole pool that have one.
    fn lineages(&self, model: &str, group: Option<&str>) -> Vec<Lineage> {
        let pool = self.pools.get(&self.block);
        let of_group = pool
            .iter()
            .filter(|t| t.model == model && t.canary_group().as_deref() == group);
        of_group.filter_map(|t| Lineage::of(t)).collect()
    }

    /// Whether `group` of `model` holds two revisions of one workload anywhere in the pool
    /// (a node whose own pod is already the new revision, while other nodes' are not).
    fn rolling(&self, model: &str, group: Option<&str>) -> bool {
        super::lineage::rolling(self.lineages(model, group).iter())
    }
}

/// Add `group`, born at `born`, to `groups`: once, at the earliest time seen.
fn oldest(groups: &mut Vec<(Option<String>, f64)>, group: Option<String>, born: f64) {
    match groups.iter_mut().find(|(g, _)| *g == group) {
        Some((_, b)) => *b = b.min(born),
        None => groups.push((group, born)),
    }
}

/// Where a replica's other groups are found.
#[derive(Clone, Debug)]
pub struct Baseline {
    pub books: Arc<Books>,
    /// The replica's family of books ([`super::book::group_key`]) and its own group.
    pub family: String,
    pub model: String,
    pub group: Option<String>,
    /// `canary.baseline`: the one group to compare with (file_sd); `None`: every other.
    pub named: Option<String>,
    /// A node-local block's whole pool (`None` for every other target).
    pub pool: Option<PoolView>,
}

/// A group's value as its label spells it (`""` for none).
pub fn label(group: &Option<String>) -> String {
    group.clone().unwrap_or_default()
}

impl Baseline {
    /// The other groups this replica is compared with now: the one `canary.baseline` names
    /// (if a replica of it is here or in the pool, and it is not this replica's own), else
    /// every other group, at most [`MAX_OTHERS`]: first those holding another revision of a
    /// workload of this replica's group (its controller's pair), then the rest, each oldest
    /// first.
    pub fn others(&self) -> Vec<Option<String>> {
        let mut others = self.candidates();
        others.truncate(MAX_OTHERS);
        others
    }

    /// Every other group [`Self::others`] chooses from, in its order, uncut.
    pub fn candidates(&self) -> Vec<Option<String>> {
        let mut groups = self.books.groups_here(&self.family);
        if let Some(pool) = &self.pool {
            for (group, created) in pool.groups(&self.model) {
                oldest(&mut groups, group, created);
            }
            groups.sort_by(|(a, x), (b, y)| x.total_cmp(y).then_with(|| a.cmp(b)));
        }
        let mut others: Vec<Option<String>> = groups
            .into_iter()
            .map(|(g, _)| g)
            .filter(|g| *g != self.group)
            .filter(|g| self.named.is_none() || g.as_deref() == self.named.as_deref())
            .collect();
        let mine = self.lineages(self.group.as_deref());
        if !mine.is_empty() {
            // A stable sort: the pair first, each part still oldest first.
            others.sort_by_cached_key(|g| {
                let theirs = self.lineages(g.as_deref());
                !mine.iter().any(|m| theirs.iter().any(|t| m.rivals(t)))
            });
        }
        others
    }

    /// The lineages of `group`'s replicas that have one: its members here and, for a
    /// node-local block, its replicas over the whole pool.
    fn lineages(&self, group: Option<&str>) -> Vec<Lineage> {
        let here = self.books.live(&self.family, group);
        let mut found = here.map(|b| b.lineages()).unwrap_or_default();
        if let Some(pool) = &self.pool {
            found.extend(pool.lineages(&self.model, group));
        }
        found
    }

    /// Of `others`, those with no replica here but some in the pool: each group and its
    /// votes-only book, for [`super::votes::Voters::ensure_for`] to fill before a check.
    pub fn remote(&self, others: &[Option<String>]) -> Vec<(Option<String>, Arc<Book>)> {
        if self.pool.is_none() {
            return Vec::new();
        }
        others
            .iter()
            .filter(|g| self.books.live(&self.family, g.as_deref()).is_none())
            .map(|g| {
                let book = self.books.remote(&self.family, g.as_deref(), others);
                (g.clone(), book)
            })
            .collect()
    }

    /// The comparisons of this answer with each of `others`' references (none for a
    /// known answer or a structured prompt).
    pub fn check(
        &self,
        spec: &CanarySpec,
        prompt: &CanaryPrompt,
        report: &ProbeReport,
        margin: f64,
        others: &[Option<String>],
    ) -> Vec<(String, PairResult)> {
        if !prompt.compared() || others.is_empty() {
            return Vec::new();
        }
        let answer = super::answer(report).filter(|a| !a.positions.is_empty());
        others
            .iter()
            .map(|group| {
                let result = match (&answer, self.reference(spec, group.as_deref(), prompt)) {
                    (None, _) => PairResult::Failed,
                    (Some(_), None) => PairResult::Unscored,
                    (Some(answer), Some(reference)) => match answers(&reference, answer, margin) {
                        Verdict::Match { .. } => PairResult::Match,
                        Verdict::Diverged(_) => PairResult::Diverged,
                    },
                };
                (label(group), result)
            })
            .collect()
    }

    /// `group`'s reference for `prompt`: its golden answer where the golden file is
    /// recorded for it (its replicas, judged by the file, learn none), else its majority
    /// here, else its voters' from other nodes.
    fn reference(
        &self,
        spec: &CanarySpec,
        group: Option<&str>,
        prompt: &CanaryPrompt,
    ) -> Option<Arc<Reference>> {
        if spec.golden_applies(&self.model, group) {
            return prompt.reference.clone();
        }
        // A group mid-rollout is no baseline ([`super::lineage`]), wherever it rolls.
        if self
            .pool
            .as_ref()
            .is_some_and(|p| p.rolling(&self.model, group))
        {
            return None;
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

#[cfg(test)]
mod tests;
