//! The prefix-cache check's series (docs/prefix-cache.md): its checks by result and by the
//! rule that judged them, and the pair's cold and warm TTFT (the speed-up a user gets from
//! the cache). The pair's requests reach none of the target's own series: a 1,024-token
//! prefix is not the workload's shape, and its failures are not the workload's.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

use super::{DualHistogram, LabeledFamily, TTFT_BUCKETS, TargetLabels, labels};

/// What a prefix-cache check found, and by which rule (judged in `crate::prefix_check`;
/// defined here, beside its series, as the canary's results are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefixVerdict {
    Hit(PrefixRule),
    Miss,
    Unreported,
    Failed,
}

/// Which evidence judged a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefixRule {
    /// The cached tokens the server reported.
    Usage,
    /// The warm request's TTFT against the cold one's.
    Ttft,
}

impl PrefixVerdict {
    /// The `result` label.
    pub const fn result(self) -> &'static str {
        match self {
            Self::Hit(_) => "hit",
            Self::Miss => "miss",
            Self::Unreported => "unreported",
            Self::Failed => "failed",
        }
    }

    /// The `rule` label: what judged it (`none` for a failed pair).
    pub const fn rule(self) -> &'static str {
        match self {
            Self::Hit(PrefixRule::Usage) | Self::Miss => "usage",
            Self::Hit(PrefixRule::Ttft) | Self::Unreported => "ttft",
            Self::Failed => "none",
        }
    }

    /// Every (result, rule) a check can produce: the series made at 0 at start.
    pub const ALL: [PrefixVerdict; 5] = [
        Self::Hit(PrefixRule::Usage),
        Self::Hit(PrefixRule::Ttft),
        Self::Miss,
        Self::Unreported,
        Self::Failed,
    ];
}

/// Why a pair's cached-token count was not used (judged by TTFT instead): the
/// `reason` of `inferprobe_prefix_cache_usage_set_aside_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefixSetAside {
    /// The cold request reported most of a prefix no cache could hold cached: KV
    /// transferred by a prefill/decode split, chunks reused at shifted positions, a double
    /// count.
    ColdCached,
    /// The server said the cold request wrote nothing to its cache (Anthropic's
    /// `cache_creation_input_tokens: 0`): a prefix below the model's minimum cacheable
    /// length, or no caching for the model; the warm request's 0 read is no miss.
    NotWritten,
}

impl PrefixSetAside {
    pub const ALL: [PrefixSetAside; 2] = [Self::ColdCached, Self::NotWritten];

    pub const fn reason(self) -> &'static str {
        match self {
            Self::ColdCached => "cold_cached",
            Self::NotWritten => "not_written",
        }
    }
}

type CheckLabels = (TargetLabels, [(&'static str, &'static str); 2]);
type ReasonLabels = (TargetLabels, [(&'static str, &'static str); 1]);

#[derive(Clone, Debug, Default)]
pub(super) struct PrefixFamilies {
    checks: LabeledFamily<CheckLabels, Counter>,
    set_aside: LabeledFamily<ReasonLabels, Counter>,
    pub(super) cold: LabeledFamily<TargetLabels, DualHistogram>,
    pub(super) warm: LabeledFamily<TargetLabels, DualHistogram>,
    objective: LabeledFamily<TargetLabels, Gauge<f64, AtomicU64>>,
}

/// One target's.
#[derive(Clone, Debug)]
pub struct PrefixSeries {
    checks: [Counter; PrefixVerdict::ALL.len()],
    set_aside: [Counter; PrefixSetAside::ALL.len()],
    cold: DualHistogram,
    warm: DualHistogram,
}

impl PrefixSeries {
    /// Count a check, why its usage was set aside if it was, and the pair's TTFTs when
    /// both requests got a first token.
    pub fn record(
        &self,
        verdict: PrefixVerdict,
        set_aside: Option<PrefixSetAside>,
        ttfts: Option<(f64, f64)>,
    ) {
        if let Some(i) = PrefixVerdict::ALL.iter().position(|v| *v == verdict) {
            self.checks[i].inc();
        }
        if let Some(i) = set_aside.and_then(|s| PrefixSetAside::ALL.iter().position(|a| *a == s)) {
            self.set_aside[i].inc();
        }
        if let Some((cold, warm)) = ttfts {
            self.cold.observe(cold, None);
            self.warm.observe(warm, None);
        }
    }
}

impl PrefixFamilies {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "prefix_cache_checks",
            "Prefix-cache checks (a pair sharing a fresh prefix) by result: hit, miss, unreported (no cached tokens reported and no TTFT speed-up: cannot tell), failed; and by the rule that judged them: usage (reported cached tokens), ttft (the warm request's TTFT against the cold one's), none",
            self.checks.clone(),
        );
        r.register(
            "prefix_cache_usage_set_aside",
            "Prefix-cache checks whose reported cached tokens were not used, by reason: cold_cached (the cold request, whose prefix no cache could hold, reported most of it cached: prefill/decode KV transfer, reuse at shifted positions, a double count), not_written (the server said the cold request wrote nothing to its cache: a prefix below the model's minimum); such checks are judged by TTFT",
            self.set_aside.clone(),
        );
        r.register_with_unit(
            "prefix_cache_cold_ttft",
            "TTFT of a prefix-cache check's first request: its whole prompt prefilled",
            Unit::Seconds,
            self.cold.clone(),
        );
        r.register_with_unit(
            "prefix_cache_warm_ttft",
            "TTFT of a prefix-cache check's second request, which shares the first's prefix",
            Unit::Seconds,
            self.warm.clone(),
        );
        r.register(
            "prefix_cache_objective",
            "The share of prefix-cache checks that must hit, per target that sets one",
            self.objective.clone(),
        );
    }

    /// A target's series, every result at 0 from the start.
    pub(super) fn series(&self, target: &TargetLabels, objective: Option<f64>) -> PrefixSeries {
        if let Some(objective) = objective {
            self.objective
                .get_or_insert(target.clone(), Gauge::default)
                .set(objective);
        }
        let histogram = || DualHistogram::new(TTFT_BUCKETS.iter().copied());
        PrefixSeries {
            checks: PrefixVerdict::ALL.map(|v| {
                let key = (
                    target.clone(),
                    [(labels::RESULT, v.result()), (labels::RULE, v.rule())],
                );
                self.checks.get_or_insert(key, Counter::default)
            }),
            set_aside: PrefixSetAside::ALL.map(|s| {
                let key = (target.clone(), [(labels::REASON, s.reason())]);
                self.set_aside.get_or_insert(key, Counter::default)
            }),
            cold: self.cold.get_or_insert(target.clone(), histogram),
            warm: self.warm.get_or_insert(target.clone(), histogram),
        }
    }

    pub(super) fn remove(&self, target: &TargetLabels) {
        self.checks.retain(|(l, _)| l != target);
        self.set_aside.retain(|(l, _)| l != target);
        self.cold.remove(target);
        self.warm.remove(target);
        self.objective.remove(target);
    }
}
