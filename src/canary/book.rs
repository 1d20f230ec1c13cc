//! The learned reference: without a golden file, the answer to compare a replica with is
//! the one most replicas of its group give.
//!
//! A group is a discovery block (its replicas) or a static target (one replica). Each
//! replica's latest answer to each prompt is kept. With three replicas or more, the
//! reference for a prompt is the answer that agrees (no divergence by the rule in
//! [`super::compare`]) with more than half of the group's replicas; with no such answer yet,
//! there is no reference and the check is unscored. With fewer than three replicas a
//! majority means nothing, so the first answer after start-up is kept as the reference: a
//! replica already broken at start-up becomes the reference (a golden file is the fix).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use super::compare::{Verdict, compare};
use crate::target::canary::Reference;

/// Fewer replicas than this: the first answer is the reference.
pub const MAJORITY_FROM: usize = 3;

#[derive(Debug, Default)]
struct State {
    /// Replicas of the group alive now, with how many canary tasks each has (a restarted
    /// target's new task may register before its old one leaves).
    replicas: BTreeMap<String, usize>,
    /// Per prompt: each replica's latest answer.
    answers: HashMap<usize, BTreeMap<String, Arc<Reference>>>,
    /// Per prompt: the first answer, for groups below [`MAJORITY_FROM`].
    first: HashMap<usize, Arc<Reference>>,
}

/// One group's answers.
#[derive(Debug, Default)]
pub struct Book {
    state: Mutex<State>,
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
        if let Some(count) = state.replicas.get_mut(&self.replica) {
            *count -= 1;
            if *count == 0 {
                state.replicas.remove(&self.replica);
                for answers in state.answers.values_mut() {
                    answers.remove(&self.replica);
                }
            }
        }
    }
}

impl Book {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Join the group as `replica` until the returned member is dropped.
    pub fn join(self: &Arc<Self>, replica: &str) -> Member {
        *self.lock().replicas.entry(replica.to_owned()).or_default() += 1;
        Member {
            book: Arc::clone(self),
            replica: replica.to_owned(),
        }
    }

    /// Record `member`'s answer to `prompt`, and return the reference to compare it with
    /// (`None`: no majority yet).
    pub fn observe(
        &self,
        member: &Member,
        prompt: usize,
        answer: Arc<Reference>,
        margin: f64,
    ) -> Option<Arc<Reference>> {
        let mut state = self.lock();
        let replicas = state.replicas.len();
        let first = state
            .first
            .entry(prompt)
            .or_insert_with(|| Arc::clone(&answer))
            .clone();
        let answers = state.answers.entry(prompt).or_default();
        answers.insert(member.replica.clone(), answer);
        if replicas < MAJORITY_FROM {
            return Some(first);
        }
        majority(answers.values(), replicas, margin)
    }
}

/// The answer that agrees with more than half of `replicas`, counting itself (the one
/// with most agreement, the first of equals).
fn majority<'a>(
    answers: impl Iterator<Item = &'a Arc<Reference>> + Clone,
    replicas: usize,
    margin: f64,
) -> Option<Arc<Reference>> {
    let agrees = |reference: &Reference, answer: &Reference| {
        let ended = answer
            .finish_reason
            .as_deref()
            .is_some_and(|r| r != "length");
        matches!(
            compare(&reference.positions, &answer.positions, ended, margin),
            Verdict::Match { .. }
        )
    };
    let mut best: Option<(usize, &Arc<Reference>)> = None;
    for candidate in answers.clone() {
        let support = answers.clone().filter(|a| agrees(candidate, a)).count();
        if best.is_none_or(|(most, _)| support > most) {
            best = Some((support, candidate));
        }
    }
    best.filter(|&(support, _)| 2 * support > replicas)
        .map(|(_, reference)| Arc::clone(reference))
}

/// Every group's book, by group name.
#[derive(Debug, Default)]
pub struct Books {
    groups: Mutex<HashMap<String, Arc<Book>>>,
}

impl Books {
    /// The book of `group`, made on first use. Books of groups that are gone are dropped
    /// when their last member leaves and another group is asked for.
    pub fn group(&self, group: &str) -> Arc<Book> {
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        groups.retain(|_, book| Arc::strong_count(book) > 1 || !book.lock().replicas.is_empty());
        Arc::clone(groups.entry(group.to_owned()).or_default())
    }
}

#[cfg(test)]
mod tests;
