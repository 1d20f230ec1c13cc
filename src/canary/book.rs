//! The learned reference: without a golden file, the answer to compare a replica with is
//! the one most of the other replicas of its group give.
//!
//! A group is what serves the same answers: a discovery block's replicas (or a static
//! target) of one model and one version (a controller revision, or the values of
//! `canary.group_by`), asked the same prompts with the same settings — the book's key says
//! so ([`group_key`]), so a rollout's new version learns its own reference rather than
//! being judged by the old one's, and a reload that changes the model, `max_tokens`, the
//! logprobs asked for or the margin starts a fresh book. Answers are kept per prompt
//! *text*, so an edited prompts file never compares a new prompt with an old one's answer.
//!
//! Each replica's latest answer to each prompt is kept. Two answers **agree** when neither
//! diverges from the other by the rule in [`super::compare`]: agreement counted from one
//! side only would let an answer that hesitates everywhere (flattened logits) "agree" with
//! every other and become the reference. With three replicas or more, the reference for
//! replica r is, among the *other* replicas' answers, the one that agrees with more than
//! half of the group (itself included); of equals, the one closest to those it agrees with
//! (least summed drift), so that drift is blamed on the replica that drifts. A replica is
//! never its own reference. With no such answer there is no reference and the check is
//! unscored. With fewer than three replicas a majority means nothing: the reference is
//! the last majority answer the group had (when it was larger), else, for two replicas,
//! the other's answer if the two agree (if they disagree nothing tells which is right: the
//! check is unscored, and says so), else, for a replica alone, its own first answer, kept
//! while its author stays in the group (an answer whose author left is forgotten, so a
//! healthy survivor is never judged by a broken pod's answer of days ago).
//!
//! "The group" above is, for each replica, its group less its **rivals**: the replicas at
//! another revision of its own workload (a Flagger promotion's old and new primary pods,
//! [`super::lineage`]), whose answers and votes are never its reference.
//!
//! Cost: each answer's agreement with every other is cached; a new answer is compared
//! with the group's other answers once each (2·(n−1) comparisons), and the reference is
//! then picked in one pass: O(n) per check, not O(n²).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::lineage::{Lineage, Lineages};
use crate::endpoint::canary::{CanarySpec, Reference};

mod agreement;

use agreement::{Entry, forget, insert, majority};

/// Fewer replicas than this: no majority (see the module's rule below three).
pub const MAJORITY_FROM: usize = 3;

/// The family of books a target's canary uses: its block (or static target) name, and
/// everything that shapes the answers or the rule that compares them. Within it, one book
/// per group (what version it serves: [`CanarySpec::group_of`]).
pub fn group_key(name: &str, model: &str, spec: &CanarySpec) -> String {
    format!(
        "{name}\u{0}{model}\u{0}{}\u{0}{}\u{0}{}",
        spec.max_tokens, spec.top_logprobs, spec.margin
    )
}

/// Why a replica's answer has no reference to be compared with (the check is unscored).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoReference {
    /// Three replicas or more, and no answer more than half of them agree with.
    NoMajority,
    /// Two replicas (or one and a voter) whose answers disagree, and no earlier majority.
    TwoDisagree,
}

impl NoReference {
    pub fn note(self) -> &'static str {
        match self {
            Self::NoMajority => "no reference yet (no majority of replicas agrees)",
            Self::TwoDisagree => {
                "no reference: the group's two replicas disagree and nothing tells which is right"
            }
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Replicas of the group alive now, with how many canary tasks each has (a restarted
    /// target's new task may register before its old one leaves).
    replicas: BTreeMap<String, usize>,
    /// Per prompt text: each replica's latest answer.
    answers: HashMap<String, BTreeMap<String, Entry>>,
    /// Per prompt text: the first answer of a replica alone in the group (or alone but
    /// for its rivals), and its author.
    first: HashMap<String, Vec<(String, Arc<Reference>)>>,
    /// Per prompt text: the last answer a majority agreed with, for when the group shrinks
    /// below [`MAJORITY_FROM`], and the lineages that made that majority (a revision that
    /// came later is not held to it).
    settled: HashMap<String, (HashSet<Lineage>, Arc<Reference>)>,
    /// The workload revision of each member and voter that has one: a replica is never
    /// judged by another revision of its own workload ([`super::lineage`]).
    lineages: Lineages,
    /// Per prompt text: the replicas of the pool on other nodes that voted (their answers
    /// are in `answers` beside the members'), and until when each vote counts.
    votes: HashMap<String, HashMap<String, std::time::Instant>>,
    /// When each replica's pod was created (Unix seconds), where discovery says.
    created: BTreeMap<String, i64>,
    /// Comparisons made (for tests of the cost).
    comparisons: u64,
}

/// One group's answers.
#[derive(Debug)]
pub struct Book {
    state: Mutex<State>,
    /// When this process made the group (Unix seconds): its age where no pod says.
    since: f64,
}

impl Default for Book {
    fn default() -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Self {
            state: Mutex::default(),
            since: now,
        }
    }
}

/// A replica's place in its group; leaving the group when dropped.
#[derive(Debug)]
pub struct Member {
    book: Arc<Book>,
    replica: String,
}

impl Drop for Member {
    fn drop(&mut self) {
        let mut state = self.book.lock();
        let Some(count) = state.replicas.get_mut(&self.replica) else {
            return;
        };
        *count -= 1;
        if *count > 0 {
            return;
        }
        state.replicas.remove(&self.replica);
        state.created.remove(&self.replica);
        state.lineages.remove(&self.replica);
        for firsts in state.first.values_mut() {
            firsts.retain(|(author, _)| author != &self.replica);
        }
        for answers in state.answers.values_mut() {
            forget(answers, &self.replica);
        }
        if state.replicas.is_empty() {
            // A group that emptied (a full turnover, a reload that replaced every task)
            // learns its reference afresh.
            state.first.clear();
            state.settled.clear();
            state.lineages.clear();
            state.answers.clear();
            state.votes.clear();
        }
    }
}

impl State {
    /// Drop the votes for `prompt` that no longer count, with their answers; how many do.
    fn expire_votes(&mut self, prompt: &str) -> usize {
        let Some(votes) = self.votes.get_mut(prompt) else {
            return 0;
        };
        let now = std::time::Instant::now();
        let mut answers = self.answers.get_mut(prompt);
        let mut gone = Vec::new();
        votes.retain(|voter, &mut until| {
            let counts = until > now;
            if let (false, Some(answers)) = (counts, answers.as_deref_mut()) {
                forget(answers, voter);
            }
            if !counts {
                gone.push(voter.clone());
            }
            counts
        });
        let fresh = votes.len();
        for voter in gone {
            let votes_elsewhere = self.votes.values().any(|v| v.contains_key(&voter));
            if !votes_elsewhere && !self.replicas.contains_key(&voter) {
                self.lineages.remove(&voter);
            }
        }
        fresh
    }

    /// Whether a workload has two revisions among those that answer `prompt` now.
    fn rolling(&self, prompt: &str) -> bool {
        let votes = self.votes.get(prompt);
        let present = self
            .replicas
            .keys()
            .chain(votes.into_iter().flat_map(|v| v.keys()));
        self.lineages.two_revisions(present)
    }

    /// Of `replicas`, those that answer `prompt` now (members, and voters whose vote on it
    /// counts).
    fn present(&self, prompt: &str, mut replicas: HashSet<String>) -> HashSet<String> {
        let votes = self.votes.get(prompt);
        replicas
            .retain(|r| self.replicas.contains_key(r) || votes.is_some_and(|v| v.contains_key(r)));
        replicas
    }
}

impl Book {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Join the group as `replica` until the returned member is dropped.
    pub fn join(self: &Arc<Self>, replica: &str) -> Member {
        self.join_at(replica, None, None)
    }

    /// Join as `replica`, whose pod was created at `created` (Unix seconds), of `lineage`
    /// (its workload's revision, where discovery read it).
    pub fn join_at(
        self: &Arc<Self>,
        replica: &str,
        created: Option<i64>,
        lineage: Option<Lineage>,
    ) -> Member {
        let mut state = self.lock();
        *state.replicas.entry(replica.to_owned()).or_default() += 1;
        if let Some(created) = created {
            state.created.insert(replica.to_owned(), created);
        }
        state.lineages.insert(replica, lineage);
        Member {
            book: Arc::clone(self),
            replica: replica.to_owned(),
        }
    }

    /// Whether any replica of the group is here now.
    pub fn is_live(&self) -> bool {
        !self.lock().replicas.is_empty()
    }

    /// The group's age as a time (Unix seconds): its oldest pod's creation where
    /// discovery says, else when this process made the group. The oldest group of a
    /// family is its baseline.
    pub fn born(&self) -> f64 {
        let state = self.lock();
        state
            .created
            .values()
            .min()
            .map_or(self.since, |&t| t as f64)
    }

    /// Record `member`'s answer to `prompt`, and return the reference to compare it with,
    /// or why there is none.
    pub fn observe(
        &self,
        member: &Member,
        prompt: &str,
        answer: Arc<Reference>,
        margin: f64,
    ) -> Result<Arc<Reference>, NoReference> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let me = &member.replica;
        let everyone = state.replicas.len() + state.expire_votes(prompt);
        // Another revision of my own workload is not my group for this (a promotion).
        let rivals = state.present(prompt, state.lineages.rivals_of(me));
        let replicas = everyone - rivals.len();
        let answers = state.answers.entry(prompt.to_owned()).or_default();
        insert(
            answers,
            me,
            Arc::clone(&answer),
            margin,
            &mut state.comparisons,
        );
        if replicas >= MAJORITY_FROM {
            if let Some((author, agreed)) = majority(answers, None, replicas, &rivals) {
                // The lineages of those whose answers make that majority: a revision that
                // only disagreed with it is not held to it later.
                let agreeing = answers
                    .get(author)
                    .into_iter()
                    .flat_map(|e| e.agrees.keys())
                    .chain(std::iter::once(&author.to_owned()))
                    .filter(|r| !rivals.contains(*r))
                    .filter_map(|r| state.lineages.get(r).cloned())
                    .collect();
                state.settled.insert(prompt.to_owned(), (agreeing, agreed));
            }
            return majority(answers, Some(me), replicas, &rivals)
                .map(|(_, reference)| reference)
                .ok_or(NoReference::NoMajority);
        }
        if let Some((lineages, settled)) = state.settled.get(prompt) {
            // A revision that was not in that majority (a rollout's new pods) learns anew.
            if state
                .lineages
                .get(me)
                .is_none_or(|mine| lineages.contains(mine))
            {
                return Ok(Arc::clone(settled));
            }
        }
        let other = answers
            .iter()
            .find(|(replica, _)| *replica != me && !rivals.contains(*replica));
        match other {
            Some((_, entry)) if entry.agrees.contains_key(me) => Ok(Arc::clone(&entry.answer)),
            Some(_) => Err(NoReference::TwoDisagree),
            None => {
                let firsts = state.first.entry(prompt.to_owned()).or_default();
                let kin = firsts
                    .iter()
                    .find(|(author, _)| author == me || !rivals.contains(author));
                if let Some((_, first)) = kin {
                    return Ok(Arc::clone(first));
                }
                firsts.push((me.clone(), Arc::clone(&answer)));
                Ok(answer)
            }
        }
    }

    /// The members of the group on this node.
    pub fn members(&self) -> Vec<String> {
        self.lock().replicas.keys().cloned().collect()
    }

    /// The lineages of the members here that have one: which workloads, at which
    /// revisions, the group holds (the rollout gate puts a workload's two revisions first).
    pub fn lineages(&self) -> Vec<Lineage> {
        let state = self.lock();
        let members = state.replicas.keys();
        members
            .filter_map(|r| state.lineages.get(r).cloned())
            .collect()
    }

    /// The votes for `prompt` that still count.
    /// The voters whose vote on `prompt` still counts: they are not asked again until it
    /// expires, however few voters the pool has.
    pub fn fresh_voters(&self, prompt: &str) -> Vec<String> {
        let mut state = self.lock();
        state.expire_votes(prompt);
        state
            .votes
            .get(prompt)
            .map(|v| v.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Forget the votes of voters no longer in the group's pool (a pod gone mid-promotion
    /// would otherwise keep the group "rolling" until its votes expire).
    pub fn keep_voters(&self, pool: &std::collections::HashSet<&str>) {
        let mut guard = self.lock();
        let state = &mut *guard;
        let mut gone = HashSet::new();
        for votes in state.votes.values_mut() {
            votes.retain(|voter, _| {
                let keep = pool.contains(voter.as_str());
                if !keep {
                    gone.insert(voter.clone());
                }
                keep
            });
        }
        for voter in &gone {
            for answers in state.answers.values_mut() {
                forget(answers, voter);
            }
            if !state.replicas.contains_key(voter) {
                state.lineages.remove(voter);
            }
        }
    }

    /// Record a vote: the answer of `voter`, a replica of the group on another node, to
    /// `prompt`, counted until `until` as one replica more of the group. It is compared
    /// with the members' answers like theirs are; nothing of it is a check.
    pub fn vote(
        &self,
        voter: &str,
        prompt: &str,
        answer: Arc<Reference>,
        margin: f64,
        until: std::time::Instant,
        lineage: Option<Lineage>,
    ) {
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.replicas.contains_key(voter) {
            return; // a member answers for itself
        }
        state.lineages.insert(voter, lineage);
        let answers = state.answers.entry(prompt.to_owned()).or_default();
        insert(answers, voter, answer, margin, &mut state.comparisons);
        state
            .votes
            .entry(prompt.to_owned())
            .or_default()
            .insert(voter.to_owned(), until);
    }

    /// The reference this group gives a replica of another group (a rollout's new
    /// version, compared with the baseline): the answer more than half of the group agrees
    /// with; below three replicas the last such answer, else the one its answers agree on
    /// (none where two disagree). Nothing is recorded.
    ///
    /// A group with no replica on this node (a node-local block's baseline elsewhere in
    /// the pool) answers by its votes alone: the answer more than half of the voters agree
    /// with (one voter: its answer; two that disagree: none).
    ///
    /// While one of its workloads rolls (two revisions of it answer), the group is no
    /// baseline: it gives no reference, and the pair is unscored. Which revision is the
    /// stable one cannot be told from the pods (a drained old pod is younger than the new
    /// ones), and a baseline that changes mid-promotion would change the gate's answer.
    pub fn reference_for_others(&self, prompt: &str) -> Option<Arc<Reference>> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let members = state.replicas.len();
        let replicas = members + state.expire_votes(prompt);
        if replicas == 0 || state.rolling(prompt) {
            return None;
        }
        if members > 0 && replicas < MAJORITY_FROM {
            if let Some((_, settled)) = state.settled.get(prompt) {
                return Some(Arc::clone(settled));
            }
        }
        let none = HashSet::new();
        majority(state.answers.get(prompt)?, None, replicas, &none).map(|(_, answer)| answer)
    }

    #[cfg(test)]
    fn comparisons(&self) -> u64 {
        self.lock().comparisons
    }
}

#[cfg(test)]
mod tests;
