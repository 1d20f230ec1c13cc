//! Which replicas of a group may be each other's reference.
//!
//! A group made by `canary.group_by` can hold one workload at two revisions. A Flagger
//! promotion copies the canary's spec to the primary and keeps the primary's `app` label,
//! so while the primary rolls its old and new pods share the group `llm-primary`; with a
//! new model the new pods answer otherwise by design. A rollout is not an outage: a
//! replica's reference never comes from another revision of **its own workload** (those
//! are its *rivals*), and what the group gives another group as its reference (the
//! rollout gate's baseline) comes from each workload's oldest revision — the one being
//! replaced, the stable the gate was judging against — until the last of its pods is gone.
//!
//! Separate workloads in one group (a Deployment per zone, all `app=llm`) still judge each
//! other, whatever their revisions: one zone's pod loaded with the wrong weights has the
//! rest of its group against it. Splitting the group by revision instead would make such
//! a pod its own reference. Replicas without an owner or a revision (a static target, a
//! file_sd pool) have no lineage and are everyone's kin.

use std::collections::{HashMap, HashSet};

use crate::endpoint::Target;

/// One revision of one workload.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lineage {
    /// `namespace/kind/name` of the pod's controlling owner (`discovery::owner::workload`).
    pub workload: String,
    pub revision: String,
}

impl Lineage {
    /// `target`'s, where discovery read both its owner and its revision.
    pub fn of(target: &Target) -> Option<Self> {
        Some(Self {
            workload: target.workload.clone()?,
            revision: target.revision.clone()?,
        })
    }

    /// Two revisions of one workload: a rollout's old and new pods.
    pub fn rivals(&self, other: &Self) -> bool {
        self.workload == other.workload && self.revision != other.revision
    }
}

/// The lineage of each replica of a group that has one (members and voters), with when
/// its pod was created where discovery says.
#[derive(Debug, Default)]
pub struct Lineages {
    known: HashMap<String, (Lineage, Option<i64>)>,
}

impl Lineages {
    pub fn insert(&mut self, replica: &str, lineage: Option<Lineage>, created: Option<i64>) {
        match lineage {
            Some(lineage) => self.known.insert(replica.to_owned(), (lineage, created)),
            None => self.known.remove(replica),
        };
    }

    pub fn remove(&mut self, replica: &str) {
        self.known.remove(replica);
    }

    pub fn get(&self, replica: &str) -> Option<&Lineage> {
        self.known.get(replica).map(|(lineage, _)| lineage)
    }

    /// Whether `lineage` may be a reference for `replica` (it is not a rival's).
    pub fn kin(&self, replica: &str, lineage: Option<&Lineage>) -> bool {
        match (self.get(replica), lineage) {
            (Some(mine), Some(theirs)) => !mine.rivals(theirs),
            _ => true,
        }
    }

    /// The replicas at another revision of `replica`'s workload.
    pub fn rivals_of(&self, replica: &str) -> HashSet<String> {
        let Some(mine) = self.get(replica) else {
            return HashSet::new();
        };
        self.known
            .iter()
            .filter(|(_, (theirs, _))| mine.rivals(theirs))
            .map(|(other, _)| other.clone())
            .collect()
    }

    /// The replicas at a revision newer than their workload's oldest here (by its oldest
    /// pod; where no pod says, by revision name, so every node picks the same).
    pub fn newer(&self) -> HashSet<String> {
        // A revision is as old as its oldest pod.
        let mut born: HashMap<(&str, &str), i64> = HashMap::new();
        for (lineage, created) in self.known.values() {
            let at = created.unwrap_or(i64::MAX);
            born.entry((&lineage.workload, &lineage.revision))
                .and_modify(|b| *b = (*b).min(at))
                .or_insert(at);
        }
        let mut stable: HashMap<&str, (i64, &str)> = HashMap::new();
        for ((workload, revision), at) in born {
            stable
                .entry(workload)
                .and_modify(|s| *s = (*s).min((at, revision)))
                .or_insert((at, revision));
        }
        self.known
            .iter()
            .filter(|(_, (lineage, _))| {
                stable
                    .get(lineage.workload.as_str())
                    .is_some_and(|&(_, revision)| revision != lineage.revision)
            })
            .map(|(replica, _)| replica.clone())
            .collect()
    }
}
