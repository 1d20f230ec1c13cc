//! The sampler check's series (docs/sampling.md, docs/metrics.md): its rounds by result,
//! the sampled tokens by whether a correct sampler could have drawn them, the calibration
//! windows by result, and the last window's statistic. A round's requests reach none of
//! the target's own series: they carry logprobs (which can switch speculative decoding
//! off) and a prompt that is not the workload's. Each series carries the replica's
//! `group`, the version it serves as the canary groups it (`canary.group_by`, else the
//! pod's template hash), so a rollout gate selects the new version's replicas as it does
//! their canary checks (config/rollouts/).

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{LabeledFamily, TargetLabels, labels};

/// The replica's `group` label.
type Group = [(&'static str, String); 1];
type OneLabel = (TargetLabels, (Group, [(&'static str, &'static str); 1]));
type Grouped = (TargetLabels, Group);
type F64Gauge = Gauge<f64, AtomicU64>;

/// A round's results made at 0 from the start (error categories are made at first use).
pub const ROUND_RESULTS: [&str; 6] = [
    "ok",
    "outside_support",
    "sampling_ignored",
    "fixed_seed",
    "invalid_logprobs",
    "unscored",
];
/// A sampled token's.
pub const TOKEN_RESULTS: [&str; 3] = ["ok", "outside_support", "unscored"];
const WINDOW_RESULTS: [&str; 2] = ["ok", "miscalibrated"];
/// A seeded pair's.
pub const SEED_RESULTS: [&str; 3] = ["reproduced", "differed", "failed"];

#[derive(Clone, Debug, Default)]
pub(super) struct SamplerFamilies {
    rounds: LabeledFamily<OneLabel, Counter>,
    tokens: LabeledFamily<OneLabel, Counter>,
    windows: LabeledFamily<OneLabel, Counter>,
    seeds: LabeledFamily<OneLabel, Counter>,
    statistic: LabeledFamily<Grouped, F64Gauge>,
    p_value: LabeledFamily<Grouped, F64Gauge>,
    in_row: LabeledFamily<Grouped, Gauge>,
}

/// One target's.
#[derive(Clone, Debug)]
pub struct SamplerSeries {
    target: Grouped,
    families: SamplerFamilies,
}

impl SamplerSeries {
    fn key(&self, result: &'static str) -> OneLabel {
        let (target, group) = self.target.clone();
        (target, (group, [(labels::RESULT, result)]))
    }

    /// A round's result: one of [`ROUND_RESULTS`] or an error category.
    pub fn round(&self, result: &'static str) {
        let key = self.key(result);
        self.families
            .rounds
            .get_or_insert(key, Counter::default)
            .inc();
    }

    /// Tokens judged: one of [`TOKEN_RESULTS`].
    pub fn tokens(&self, result: &'static str, n: u64) {
        let key = self.key(result);
        self.families
            .tokens
            .get_or_insert(key, Counter::default)
            .inc_by(n);
    }

    /// A seeded pair's result: one of [`SEED_RESULTS`].
    pub fn seed(&self, result: &'static str) {
        let key = self.key(result);
        self.families
            .seeds
            .get_or_insert(key, Counter::default)
            .inc();
    }

    /// A full window's test (χ², p-value, whether it failed), and how many windows in a
    /// row have failed.
    pub fn window(&self, (chi2, p_value, miscalibrated): (f64, f64, bool), in_row: u32) {
        let f = &self.families;
        let result = WINDOW_RESULTS[usize::from(miscalibrated)];
        f.windows
            .get_or_insert(self.key(result), Counter::default)
            .inc();
        f.statistic
            .get_or_insert(self.target.clone(), F64Gauge::default)
            .set(chi2);
        f.p_value
            .get_or_insert(self.target.clone(), F64Gauge::default)
            .set(p_value);
        f.in_row
            .get_or_insert(self.target.clone(), Gauge::default)
            .set(i64::from(in_row));
    }
}

impl SamplerFamilies {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "sampler_checks",
            "Rounds of the sampler check (a sampled request for random words, its tokens judged against the distribution asked for) by result: ok, outside_support (a token no correct sampler draws), sampling_ignored (the round's twin, or the answers without logprobs, identical where two draws rarely are), fixed_seed (identical, but a seeded request differs), invalid_logprobs (a logprob above 0 or not a number), unscored (nothing to judge), or the probes' error category",
            self.rounds.clone(),
        );
        r.register(
            "sampler_tokens",
            "Sampled tokens of the sampler check by result: ok (within what the request allows, as far as the listed logprobs bound it), outside_support (outside: top-k, top-p or min-p ignored, a token drawn from outside the nucleus), unscored (no logprob to judge it by)",
            self.tokens.clone(),
        );
        r.register(
            "sampler_calibration_windows",
            "Calibration windows of the sampler check (a window of sampled tokens' randomized PITs, tested uniform with χ²) by result: ok, miscalibrated (below the configured false-alarm rate: a wrong temperature, forced greedy decoding, a stuck random generator)",
            self.windows.clone(),
        );
        r.register(
            "sampler_seed_checks",
            "Seeded pairs of the sampler check (one request sent twice with one seed, every seed_every rounds) by result: reproduced (the same answer), differed, failed (a request failed); reported, never paged on",
            self.seeds.clone(),
        );
        r.register(
            "sampler_calibration_statistic",
            "The last calibration window's χ² statistic (9 degrees of freedom)",
            self.statistic.clone(),
        );
        r.register(
            "sampler_calibration_p_value",
            "The last calibration window's p-value: uniform on a healthy sampler",
            self.p_value.clone(),
        );
        r.register(
            "sampler_miscalibrated_windows_in_row",
            "Calibration windows in a row that were miscalibrated (0 after one that is not): the warning needs 2",
            self.in_row.clone(),
        );
    }

    /// A target's series in `group` (its replica's version; "" for none), the ones alerts
    /// and gates read at 0 from the start (the seeded pairs' with `seeds`). A target whose
    /// group changed loses the old group's series.
    pub(super) fn series(&self, target: &TargetLabels, group: &str, seeds: bool) -> SamplerSeries {
        let grouped: Grouped = (target.clone(), [(labels::GROUP, group.to_owned())]);
        let other = |(l, (g, _)): &OneLabel| l == target && *g != grouped.1;
        for family in [&self.rounds, &self.tokens, &self.windows, &self.seeds] {
            family.retain(|k| !other(k));
        }
        for family in [&self.statistic, &self.p_value] {
            family.retain(|(l, g)| l != target || *g == grouped.1);
        }
        self.in_row.retain(|(l, g)| l != target || *g == grouped.1);
        let series = SamplerSeries {
            target: grouped,
            families: self.clone(),
        };
        if seeds {
            for result in SEED_RESULTS {
                self.seeds
                    .get_or_insert(series.key(result), Counter::default);
            }
        }
        for result in ROUND_RESULTS {
            self.rounds
                .get_or_insert(series.key(result), Counter::default);
        }
        for result in TOKEN_RESULTS {
            self.tokens
                .get_or_insert(series.key(result), Counter::default);
        }
        for result in WINDOW_RESULTS {
            self.windows
                .get_or_insert(series.key(result), Counter::default);
        }
        self.in_row
            .get_or_insert(series.target.clone(), Gauge::default);
        series
    }

    pub(super) fn remove(&self, target: &TargetLabels) {
        for family in [&self.rounds, &self.tokens, &self.windows, &self.seeds] {
            family.retain(|(l, _)| l != target);
        }
        for family in [&self.statistic, &self.p_value] {
            family.retain(|(l, _)| l != target);
        }
        self.in_row.retain(|(l, _)| l != target);
    }
}
