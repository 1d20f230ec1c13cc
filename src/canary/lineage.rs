//! Which replicas of a group may be each other's reference.
//!
//! A group made by `canary.group_by` can hold one workload at two revisions. A Flagger
//! promotion copies the canary's spec to the primary and keeps the primary's `app` label,
//! so while the primary rolls its old and new pods share the group `llm-primary`; with a
//! new model the new pods answer otherwise by design. A rollout is not an outage: a
//! replica's reference never comes from another revision of **its own workload** (those
//! are its *rivals*), nor from a majority settled before its revision came; and while a
//! workload of the group rolls, the group is no baseline for another group (the rollout
//! gate's pair is unscored): which revision is the stable one cannot be told from the pods
//! (an old pod drained and recreated is younger than the new ones), and a baseline that
//! changed mid-promotion would change the gate's answer.
//!
//! Separate workloads in one group (a Deployment per zone, all `app=llm`) still judge each
//! other, whatever their revisions: a zone's pod loaded with the wrong weights is outvoted
//! by the pods of its own revision and of the other zones, when they are a majority of
//! those. Splitting the group by revision instead would make such a pod its own reference.
//! Replicas without an owner or a revision (a static target, a file_sd pool) have no
//! lineage and are everyone's kin.

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

/// The lineage of each replica of a group that has one (members and voters).
#[derive(Debug, Default)]
pub struct Lineages {
    known: HashMap<String, Lineage>,
}

impl Lineages {
    pub fn insert(&mut self, replica: &str, lineage: Option<Lineage>) {
        match lineage {
            Some(lineage) => self.known.insert(replica.to_owned(), lineage),
            None => self.known.remove(replica),
        };
    }

    pub fn remove(&mut self, replica: &str) {
        self.known.remove(replica);
    }

    pub fn clear(&mut self) {
        self.known.clear();
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    pub fn get(&self, replica: &str) -> Option<&Lineage> {
        self.known.get(replica)
    }

    /// The replicas at another revision of `replica`'s workload.
    pub fn rivals_of(&self, replica: &str) -> HashSet<String> {
        let Some(mine) = self.get(replica) else {
            return HashSet::new();
        };
        self.known
            .iter()
            .filter(|(_, theirs)| mine.rivals(theirs))
            .map(|(other, _)| other.clone())
            .collect()
    }

    /// Whether two of `replicas` are rivals: a workload of the group is mid-rollout.
    pub fn two_revisions<'a>(&self, replicas: impl Iterator<Item = &'a String>) -> bool {
        rolling(replicas.filter_map(|r| self.get(r)))
    }
}

/// Whether two of `lineages` are two revisions of one workload.
pub fn rolling<'a>(lineages: impl Iterator<Item = &'a Lineage>) -> bool {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for lineage in lineages {
        match seen.insert(&lineage.workload, &lineage.revision) {
            Some(other) if other != lineage.revision => return true,
            _ => {}
        }
    }
    false
}
