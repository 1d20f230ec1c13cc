//! How the answers to one prompt agree: each replica's latest answer with the others it
//! agrees with (cached, so a new answer costs 2·(n−1) comparisons), and the majority read
//! from them in one pass.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::super::compare::{Verdict, answers};
use crate::endpoint::canary::Reference;

/// One replica's latest answer to one prompt, with what it agrees with.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) answer: Arc<Reference>,
    /// The other replicas whose answers agree with this one, and the drift between the two.
    pub(super) agrees: HashMap<String, f64>,
    /// The sum of `agrees`' drifts.
    pub(super) spread: f64,
}

/// Remove `replica`'s answer and every agreement with it.
pub(super) fn forget(answers: &mut BTreeMap<String, Entry>, replica: &str) {
    let Some(old) = answers.remove(replica) else {
        return;
    };
    for other in old.agrees.keys() {
        if let Some(entry) = answers.get_mut(other) {
            if let Some(drift) = entry.agrees.remove(replica) {
                entry.spread -= drift;
            }
        }
    }
}

/// Put `replica`'s answer in `answers` (replacing its last), with its agreement with each
/// of the others.
pub(super) fn insert(
    answers: &mut BTreeMap<String, Entry>,
    replica: &str,
    answer: Arc<Reference>,
    margin: f64,
    comparisons: &mut u64,
) {
    forget(answers, replica);
    let mut entry = Entry {
        answer,
        agrees: HashMap::new(),
        spread: 0.0,
    };
    for (other, theirs) in answers.iter_mut() {
        *comparisons += 2;
        let there = one_way(&theirs.answer, &entry.answer, margin);
        let back = one_way(&entry.answer, &theirs.answer, margin);
        if let (Some(a), Some(b)) = (there, back) {
            let drift = a.max(b);
            theirs.agrees.insert(replica.to_owned(), drift);
            theirs.spread += drift;
            entry.agrees.insert(other.clone(), drift);
            entry.spread += drift;
        }
    }
    answers.insert(replica.to_owned(), entry);
}

/// Whether `answer` does not diverge from `reference`, and the drift between them.
pub(super) fn one_way(reference: &Reference, answer: &Reference, margin: f64) -> Option<f64> {
    match answers(reference, answer, margin) {
        Verdict::Match { drift, .. } => Some(drift),
        Verdict::Diverged(_) => None,
    }
}

/// Of the answers other than `me`'s (a replica's own is never its reference) and those
/// of the `excluded` (its rivals, [`crate::canary::lineage`]), the one that agrees with
/// more than half of `replicas` counting itself: most agreement first, then least summed
/// drift. Its author and the answer.
pub(super) fn majority<'a>(
    answers: &'a BTreeMap<String, Entry>,
    me: Option<&str>,
    replicas: usize,
    excluded: &HashSet<String>,
) -> Option<(&'a str, Arc<Reference>)> {
    let mut best: Option<(usize, f64, &str, &Entry)> = None;
    for (replica, entry) in answers {
        if Some(replica.as_str()) == me || excluded.contains(replica) {
            continue;
        }
        let (support, spread) = if excluded.is_empty() {
            (entry.agrees.len() + 1, entry.spread)
        } else {
            entry
                .agrees
                .iter()
                .filter(|(other, _)| !excluded.contains(*other))
                .fold((1, 0.0), |(n, sum), (_, drift)| (n + 1, sum + drift))
        };
        let better = best
            .is_none_or(|(most, least, ..)| support > most || (support == most && spread < least));
        if better {
            best = Some((support, spread, replica, entry));
        }
    }
    best.filter(|&(support, ..)| 2 * support > replicas)
        .map(|(_, _, replica, entry)| (replica, Arc::clone(&entry.answer)))
}
