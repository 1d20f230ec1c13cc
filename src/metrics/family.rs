//! A labelled metric family whose members are built by the caller.
//!
//! prometheus-client's `Family` constructs every member the same way, but each target's
//! histograms get their own buckets (SLO thresholds become exact boundaries), and a
//! target's series must disappear when the target is removed. This family takes
//! ready-made members and supports removal; it encodes exactly like `Family`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use prometheus_client::encoding::{
    EncodeLabel, EncodeLabelSet, EncodeMetric, LabelSetEncoder, MetricEncoder,
};
use prometheus_client::metrics::{MetricType, TypedMetric};

pub struct LabeledFamily<S, M> {
    members: Arc<RwLock<BTreeMap<S, M>>>,
}

impl<S, M> Clone for LabeledFamily<S, M> {
    fn clone(&self) -> Self {
        Self {
            members: Arc::clone(&self.members),
        }
    }
}

impl<S, M> Default for LabeledFamily<S, M> {
    fn default() -> Self {
        Self {
            members: Arc::default(),
        }
    }
}

impl<S: fmt::Debug, M: fmt::Debug> fmt::Debug for LabeledFamily<S, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LabeledFamily").finish_non_exhaustive()
    }
}

impl<S: Clone + Ord, M: Clone> LabeledFamily<S, M> {
    /// Insert `metric` under `labels` unless a member exists; return the member in use.
    /// Keeping an existing member means a restarted target continues its counters.
    pub fn get_or_insert(&self, labels: S, metric: impl FnOnce() -> M) -> M {
        let mut members = self.members.write().unwrap_or_else(|e| e.into_inner());
        members.entry(labels).or_insert_with(metric).clone()
    }

    pub fn get(&self, labels: &S) -> Option<M> {
        let members = self.members.read().unwrap_or_else(|e| e.into_inner());
        members.get(labels).cloned()
    }

    pub fn remove(&self, labels: &S) -> bool {
        let mut members = self.members.write().unwrap_or_else(|e| e.into_inner());
        members.remove(labels).is_some()
    }

    /// Remove every member whose labels match `predicate`.
    pub fn retain(&self, mut keep: impl FnMut(&S) -> bool) {
        let mut members = self.members.write().unwrap_or_else(|e| e.into_inner());
        members.retain(|labels, _| keep(labels));
    }

    pub fn len(&self) -> usize {
        self.members.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<S, M> TypedMetric for LabeledFamily<S, M>
where
    M: TypedMetric,
{
    const TYPE: MetricType = M::TYPE;
}

impl<S, M> EncodeMetric for LabeledFamily<S, M>
where
    S: EncodeLabelSet + Ord + fmt::Debug,
    M: EncodeMetric + TypedMetric + fmt::Debug,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), fmt::Error> {
        let members = self.members.read().unwrap_or_else(|e| e.into_inner());
        // A BTreeMap keeps the exposition in a stable order (diffable; tests compare text).
        for (labels, metric) in members.iter() {
            metric.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }

    fn is_empty(&self) -> bool {
        self.members
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }
}

/// A target's label set: `target`, `model`, `backend`, then static labels, shared cheaply
/// by every series of the target.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetLabels(Arc<[(String, String)]>);

impl TargetLabels {
    pub fn new(pairs: Vec<(String, String)>) -> Self {
        Self(pairs.into())
    }

    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl EncodeLabelSet for TargetLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), fmt::Error> {
        for (name, value) in self.0.iter() {
            (name.as_str(), value.as_str()).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}
