//! The rollout gate's series (docs/canary.md, "Gating a model rollout"): what a rollout
//! controller's analysis reads to decide whether a new version may go on.
//!
//! - `inferprobe_canary_baseline_checks_total{<target>, group, baseline, result}`: a
//!   replica's canary answers compared with another group's reference, one series set per
//!   *pair* of groups. The controller knows which version is stable and which is new (Argo
//!   Rollouts' `podTemplateHashValue: Stable` and `Latest`, Flagger's `<target>-primary`
//!   and `<target>`), so its template selects the pair; the daemon never has to guess which
//!   group is the baseline, and no pod restart, abort, retry or rollback can move it.
//! - `inferprobe_canary_known_answer_checks_total{<target>, group, result}`: the checks of
//!   known-answer prompts alone (`match`, `wrong_answer`, `failed`), so a gate on known
//!   answers counts *known answers* scored, not every scored check: a version none of whose
//!   known answers was scored yet must not pass.
//!
//! Series of a pair exist, at 0, from the moment the other group is found (before the first
//! comparison), so a query for `diverged` of a version that never diverges finds 0, not
//! nothing; they are dropped when the other group has been gone for a grace ([`Pairs`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

use super::{LabeledFamily, TargetLabels, labels};

type PairLabels = (
    TargetLabels,
    (
        [(&'static str, String); 2],
        [(&'static str, &'static str); 1],
    ),
);
type KnownLabels = (
    TargetLabels,
    (
        [(&'static str, String); 1],
        [(&'static str, &'static str); 1],
    ),
);

/// How a comparison with another group's reference ended (the `result` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairResult {
    Match,
    Diverged,
    /// The other group has no reference for the prompt yet (no majority, no voter): no
    /// fault of the replica compared.
    Unscored,
    /// The replica gave no answer to compare (its request failed or timed out, or it sent
    /// no logprobs): the fault of the version compared, which a gate fails.
    Failed,
}

impl PairResult {
    pub const ALL: [Self; 4] = [Self::Match, Self::Diverged, Self::Unscored, Self::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Match => "match",
            Self::Diverged => "diverged",
            Self::Unscored => "unscored",
            Self::Failed => "failed",
        }
    }
}

/// The results a known-answer check can have (`failed`: no answer, the request failed).
pub const KNOWN_RESULTS: [&str; 3] = ["match", "wrong_answer", "failed"];

#[derive(Clone, Debug, Default)]
pub(super) struct GateFamilies {
    baseline: LabeledFamily<PairLabels, Counter>,
    known: LabeledFamily<KnownLabels, Counter>,
}

/// The pairs a replica is compared in now, for its series.
#[derive(Debug)]
pub struct Pairs<'a> {
    /// The other groups it is compared with.
    pub compared: &'a [String],
    /// Every other group there is (those compared, and those `MAX_OTHERS` cut).
    pub present: &'a [String],
    /// How long a pair's series outlive its other group's absence: a readiness flap, an
    /// OOM restart or a drain of a one-replica stable version must not wipe the counts a
    /// gate is deciding on (its 49 comparisons would start again at one a minute).
    pub grace: Duration,
}

/// One replica's gate series.
#[derive(Clone, Debug)]
pub(super) struct GateSeries {
    families: GateFamilies,
    labels: TargetLabels,
    group: String,
    /// Since when each pair's other group has been missing.
    absent: Arc<Mutex<HashMap<String, Instant>>>,
}

impl GateFamilies {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "canary_baseline_checks",
            "Canary answers of a replica compared with another group's reference (group: the replica's version; baseline: the version it is compared with): match, diverged, unscored. Never pages: a rollout's analysis selects the pair (new, stable) and asks whether the new version answers like the old one",
            self.baseline.clone(),
        );
        r.register(
            "canary_known_answer_checks",
            "Canary checks of known-answer prompts (an expect regex): match, wrong_answer, unscored (the request failed). The denominator a rollout gate on known answers needs",
            self.known.clone(),
        );
    }

    pub(super) fn series(&self, labels: &TargetLabels, group: &str) -> GateSeries {
        GateSeries {
            families: self.clone(),
            labels: labels.clone(),
            group: group.to_owned(),
            absent: Arc::default(),
        }
    }

    /// Drop every gate series of `labels` in `group` (`None`: in any group).
    pub(super) fn forget(&self, labels: &TargetLabels, group: Option<&str>) {
        let ours = |l: &TargetLabels, g: &str| l == labels && group.is_none_or(|x| x == g);
        self.baseline
            .retain(|(l, (pair, _))| !ours(l, pair[0].1.as_str()));
        self.known.retain(|(l, (g, _))| !ours(l, g[0].1.as_str()));
    }
}

impl GateSeries {
    fn pair_key(&self, baseline: &str, result: &'static str) -> PairLabels {
        (
            self.labels.clone(),
            (
                [
                    (labels::GROUP, self.group.clone()),
                    (labels::BASELINE, baseline.to_owned()),
                ],
                [(labels::RESULT, result)],
            ),
        )
    }

    /// The pairs this replica is compared in now: each compared group gets its series (at
    /// 0 if new); those of a group still there but not compared are dropped, and those of a
    /// group gone once it has been gone for the grace (a finished or aborted rollout's
    /// version leaves no frozen series behind; a flap of it leaves them).
    pub(super) fn open_baselines(&self, pairs: &Pairs<'_>) {
        let now = Instant::now();
        let mut absent = self.absent.lock().unwrap_or_else(|e| e.into_inner());
        absent.retain(|group, _| !pairs.present.contains(group));
        let mut dropped = Vec::new();
        self.families.baseline.retain(|(l, (pair, _))| {
            let other = &pair[1].1;
            if l != &self.labels || pair[0].1 != self.group || pairs.compared.contains(other) {
                return true;
            }
            let keep = !pairs.present.contains(other)
                && now.duration_since(*absent.entry(other.clone()).or_insert(now)) < pairs.grace;
            if !keep {
                dropped.push(other.clone());
            }
            keep
        });
        for group in dropped {
            absent.remove(&group);
        }
        let baselines = pairs.compared;
        for baseline in baselines {
            for result in PairResult::ALL {
                self.families
                    .baseline
                    .get_or_insert(self.pair_key(baseline, result.as_str()), Counter::default);
            }
        }
    }

    pub(super) fn record_baseline(&self, baseline: &str, result: PairResult) {
        for r in PairResult::ALL {
            let counter = self
                .families
                .baseline
                .get_or_insert(self.pair_key(baseline, r.as_str()), Counter::default);
            if r == result {
                counter.inc();
            }
        }
    }

    fn known_counter(&self, result: &'static str) -> Counter {
        let key = (
            self.labels.clone(),
            (
                [(labels::GROUP, self.group.clone())],
                [(labels::RESULT, result)],
            ),
        );
        self.families.known.get_or_insert(key, Counter::default)
    }

    /// The known-answer series, at 0: made when the canary has known-answer prompts, so
    /// `increase()` counts the first check and a gate finds 0 wrong, not nothing.
    pub(super) fn open_known(&self) {
        for result in KNOWN_RESULTS {
            self.known_counter(result);
        }
    }

    pub(super) fn record_known(&self, result: &'static str) {
        self.open_known();
        self.known_counter(result).inc();
    }
}
