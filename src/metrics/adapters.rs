//! The adapter check's series (docs/adapters.md): per LoRA adapter, its checks on this
//! replica by result, and the prompts on which its answers part from the base model's;
//! the base model's own checks; how many adapters the replica lists and how many are past
//! the cap. `adapter` is a label only for the first `max_adapters` (configured names
//! first, then by name): a server listing hundreds cannot blow the series up. Each series
//! carries the replica's `group`, as the canary's and the sampler's do.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{LabeledFamily, TargetLabels, labels};

type Group = [(&'static str, String); 1];
/// The group and the adapter.
type Named = [(&'static str, String); 2];
type Grouped = (TargetLabels, Group);
type ByAdapter = (TargetLabels, Named);
type AdapterResult = (TargetLabels, (Named, [(&'static str, &'static str); 1]));
type BaseResult = (TargetLabels, (Group, [(&'static str, &'static str); 1]));

/// An adapter check's results, all made at 0 when the adapter is first checked.
pub const ADAPTER_RESULTS: [&str; 7] = [
    "applied",
    "base_served",
    "diverged",
    "missing",
    "not_found",
    "failed",
    "unscored",
];
/// The base model's checks.
pub const BASE_RESULTS: [&str; 4] = ["match", "diverged", "unscored", "failed"];

#[derive(Clone, Debug, Default)]
pub(super) struct AdapterFamilies {
    checks: LabeledFamily<AdapterResult, Counter>,
    base: LabeledFamily<BaseResult, Counter>,
    informative: LabeledFamily<ByAdapter, Gauge>,
    uninformative: LabeledFamily<ByAdapter, Gauge>,
    recorded: LabeledFamily<ByAdapter, Gauge>,
    other_version: LabeledFamily<ByAdapter, Gauge>,
    listed: LabeledFamily<Grouped, Gauge>,
    unchecked: LabeledFamily<Grouped, Gauge>,
}

/// One target's.
#[derive(Clone, Debug)]
pub struct AdapterSeries {
    target: Grouped,
    families: AdapterFamilies,
}

impl AdapterSeries {
    fn named(&self, adapter: &str) -> ByAdapter {
        let (target, [group]) = self.target.clone();
        (target, [group, (labels::ADAPTER, adapter.to_owned())])
    }

    /// An adapter's check: one of [`ADAPTER_RESULTS`].
    pub fn check(&self, adapter: &str, result: &'static str) {
        let (target, named) = self.named(adapter);
        let key = (target, (named, [(labels::RESULT, result)]));
        self.families
            .checks
            .get_or_insert(key, Counter::default)
            .inc();
    }

    /// The base model's check: one of [`BASE_RESULTS`].
    pub fn base(&self, result: &'static str) {
        let (target, group) = self.target.clone();
        let key = (target, (group, [(labels::RESULT, result)]));
        self.families
            .base
            .get_or_insert(key, Counter::default)
            .inc();
    }

    /// The prompts on which `adapter`'s reference answer parts from the base's, and those
    /// on which it does not.
    pub fn prompts(&self, adapter: &str, informative: usize, uninformative: usize) {
        let key = self.named(adapter);
        let f = &self.families;
        f.informative
            .get_or_insert(key.clone(), Gauge::default)
            .set(informative as i64);
        f.uninformative
            .get_or_insert(key, Gauge::default)
            .set(uninformative as i64);
    }

    /// Whether `adapter` is judged against references recorded on a trusted endpoint, and
    /// whether the file records it at another path than the replica serves (`other`).
    pub fn recorded(&self, adapter: &str, yes: bool, other: bool) {
        let key = self.named(adapter);
        let f = &self.families;
        f.recorded
            .get_or_insert(key.clone(), Gauge::default)
            .set(i64::from(yes));
        f.other_version
            .get_or_insert(key, Gauge::default)
            .set(i64::from(other));
    }

    /// Adapters the replica lists, and adapters of its block past the cap.
    pub fn listing(&self, listed: usize, unchecked: usize) {
        let f = &self.families;
        f.listed
            .get_or_insert(self.target.clone(), Gauge::default)
            .set(listed as i64);
        f.unchecked
            .get_or_insert(self.target.clone(), Gauge::default)
            .set(unchecked as i64);
    }

    /// The adapters checked now: theirs made at 0, those of any other adapter dropped
    /// (unloaded everywhere, or past the cap).
    pub fn keep(&self, adapters: &[String]) {
        let f = &self.families;
        let (target, [group]) = &self.target;
        let other =
            |named: &Named| named[0] != *group || !adapters.iter().any(|a| *a == named[1].1);
        f.checks
            .retain(|(t, (named, _))| t != target || !other(named));
        for family in [
            &f.informative,
            &f.uninformative,
            &f.recorded,
            &f.other_version,
        ] {
            family.retain(|(t, named)| t != target || !other(named));
        }
        for adapter in adapters {
            let (t, named) = self.named(adapter);
            for result in ADAPTER_RESULTS {
                let key = (t.clone(), (named.clone(), [(labels::RESULT, result)]));
                f.checks.get_or_insert(key, Counter::default);
            }
        }
    }
}

impl AdapterFamilies {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "adapter_checks",
            "Checks of a LoRA adapter on a replica (a greedy answer asked of the adapter by name, compared with the adapter's and the base model's references) by result: applied (it follows the adapter's reference), base_served (it follows the base model's: the adapter is not applied), diverged (neither), missing (an adapter the replica listed before, or a configured name, refused or no longer listed while other replicas list it: lost here), not_found (listed, yet a request for it is refused as an unknown model), failed (the request failed otherwise), unscored (no reference yet, or a prompt on which the adapter answers as the base)",
            self.checks.clone(),
        );
        r.register(
            "adapter_base_checks",
            "Checks of the base model on a replica that serves adapters (a greedy answer compared with the base model's reference) by result: match, diverged (a loaded adapter may corrupt the base model's requests), unscored, failed",
            self.base.clone(),
        );
        r.register(
            "adapter_informative_prompts",
            "Prompts on which an adapter's reference answer parts from the base model's: the prompts its checks are judged on (0 with every prompt tried: the adapter changes nothing that can be seen)",
            self.informative.clone(),
        );
        r.register(
            "adapter_uninformative_prompts",
            "Prompts on which an adapter's reference answer is the base model's, which tell nothing and are not asked again",
            self.uninformative.clone(),
        );
        r.register(
            "adapter_recorded",
            "1 where an adapter's checks are judged against references recorded on a trusted endpoint (adapters.golden, for the version listed), 0 where learned from the replicas",
            self.recorded.clone(),
        );
        r.register(
            "adapter_recorded_other_version",
            "1 where adapters.golden records the adapter at another path (root) than the replica lists it at: the replica serves a version that was not recorded, so its references are learned (a rollout's gate fails on it)",
            self.other_version.clone(),
        );
        r.register(
            "adapters_listed",
            "LoRA adapters the replica's /v1/models lists with the target's model as their parent",
            self.listed.clone(),
        );
        r.register(
            "adapters_unchecked",
            "Adapters placed on the replica past the check's max_adapters: listed, counted here, never checked or labelled",
            self.unchecked.clone(),
        );
    }

    /// A target's series in `group`; those of another group of the target are dropped.
    pub(super) fn series(&self, target: &TargetLabels, group: &str) -> AdapterSeries {
        let grouped: Grouped = (target.clone(), [(labels::GROUP, group.to_owned())]);
        self.remove_where(|t, g| t == target && *g != grouped.1[0].1);
        let series = AdapterSeries {
            target: grouped,
            families: self.clone(),
        };
        for result in BASE_RESULTS {
            let (t, g) = series.target.clone();
            self.base
                .get_or_insert((t, (g, [(labels::RESULT, result)])), Counter::default);
        }
        series.listing(0, 0);
        series
    }

    fn remove_where(&self, gone: impl Fn(&TargetLabels, &str) -> bool) {
        self.checks.retain(|(t, (n, _))| !gone(t, &n[0].1));
        self.base.retain(|(t, (g, _))| !gone(t, &g[0].1));
        for family in [
            &self.informative,
            &self.uninformative,
            &self.recorded,
            &self.other_version,
        ] {
            family.retain(|(t, n)| !gone(t, &n[0].1));
        }
        for family in [&self.listed, &self.unchecked] {
            family.retain(|(t, g)| !gone(t, &g[0].1));
        }
    }

    pub(super) fn remove(&self, target: &TargetLabels) {
        self.remove_where(|t, _| t == target);
    }
}
