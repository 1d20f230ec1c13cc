//! The metric contract (docs/metrics.md): one [`Metrics`] struct registered on an injected
//! `Registry`, and a cheap per-target handle ([`TargetMetrics`]) the probes write through.
//!
//! Families are created once at start; targets come and go as members. Every per-target
//! series exists from the moment the target starts (error counters at zero for every
//! category), so `rate()` and absence alerts work before the first failure.

mod adapters;
mod canary;
pub mod connection;
mod dual;
mod expose;
mod family;
mod gate;
pub mod labels;
pub mod native;
mod prefix;
mod process;
mod quota;
mod register;
mod runtime;
mod sampler;
mod session;
mod sli;
mod target;
mod values;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::registry::Registry;

use crate::endpoint::{Slo, Target};
use crate::error::ErrorCategory;

pub use adapters::AdapterSeries;
pub use canary::{CanaryVerdict, CheckResult, InvalidReason};
use dual::DualHistogram;
pub use expose::Format;
pub use family::{LabeledFamily, TargetLabels};
pub use gate::{PairResult, Pairs};
pub use prefix::{PrefixRule, PrefixSeries, PrefixSetAside, PrefixVerdict};
pub use runtime::RuntimeCollector;
pub use sampler::SamplerSeries;
pub use session::{Refusal, SessionReason, SessionSeries, SessionTurn, TurnCache, TurnNumbers};
pub use target::{InFlight, ProbeId, TargetMetrics, is_good};
use values::with_bound;
pub use values::{
    E2EL_BUCKETS, Le, SkipReason, TOKEN_COUNT_BUCKETS, TOKEN_LATENCY_BUCKETS, TTFT_BUCKETS,
};

/// `discovery="<block>"`.
type BlockLabel = [(&'static str, String); 1];

/// The OTLP span exporter's counters (process-wide).
#[derive(Clone, Debug, Default)]
pub struct ExportMetrics {
    pub exported: Counter,
    /// The queue was full: the exporter is behind (a slow or down collector).
    pub dropped: Counter,
    pub failed: Counter,
}

/// A discovery block's own series.
#[derive(Clone, Debug)]
pub struct DiscoveryMetrics {
    pub up: Gauge,
    pub targets: Gauge,
    pub refused: Counter,
}

/// The exemplar attached to latency observations: which probe produced it.
type Exemplar = Vec<(&'static str, Arc<String>)>;
type F64Gauge = Gauge<f64, AtomicU64>;
/// A target's labels plus one more, e.g. `category="dns"`.
type WithLabel<V> = (TargetLabels, [(&'static str, V); 1]);
/// Per target, the SLO its series were built with and when.
type Built = HashMap<TargetLabels, (Option<Slo>, SystemTime)>;

/// A target's labels plus `slo="ttft"` and the threshold's `le`.
type SloLabels = (
    TargetLabels,
    ([(&'static str, &'static str); 1], [(&'static str, Le); 1]),
);

#[derive(Clone, Debug)]
pub struct Metrics {
    requests: LabeledFamily<TargetLabels, Counter>,
    errors: LabeledFamily<WithLabel<ErrorCategory>, Counter>,
    skipped: LabeledFamily<WithLabel<SkipReason>, Counter>,
    in_flight: LabeledFamily<TargetLabels, Gauge>,
    ttft: LabeledFamily<TargetLabels, DualHistogram>,
    tpot: LabeledFamily<TargetLabels, DualHistogram>,
    itl: LabeledFamily<TargetLabels, DualHistogram>,
    e2el: LabeledFamily<TargetLabels, DualHistogram>,
    output_tokens: LabeledFamily<TargetLabels, DualHistogram>,
    prompt_tokens: LabeledFamily<TargetLabels, DualHistogram>,
    output_tokens_total: LabeledFamily<TargetLabels, Counter>,
    prompt_tokens_total: LabeledFamily<TargetLabels, Counter>,
    /// Made on a target's first report: a server that never reports cached tokens has no
    /// series, not a 0 that would read as "the cache never hit".
    prompt_cached_tokens: LabeledFamily<TargetLabels, Counter>,
    reasoning_tokens: LabeledFamily<TargetLabels, Counter>,
    cache_write_tokens: LabeledFamily<TargetLabels, Counter>,
    answer_ttft: LabeledFamily<TargetLabels, DualHistogram>,
    good_requests: LabeledFamily<TargetLabels, Counter>,
    last_success: LabeledFamily<TargetLabels, F64Gauge>,
    schedule_lag: LabeledFamily<TargetLabels, DualHistogram>,
    connections: LabeledFamily<TargetLabels, Counter>,
    retries: LabeledFamily<TargetLabels, Counter>,
    buffered: LabeledFamily<TargetLabels, Counter>,
    target_rate: LabeledFamily<TargetLabels, F64Gauge>,
    discovery_up: LabeledFamily<BlockLabel, Gauge>,
    discovery_targets: LabeledFamily<BlockLabel, Gauge>,
    discovery_refused: LabeledFamily<BlockLabel, Counter>,
    fleet_size: Gauge,
    slo_objective: LabeledFamily<TargetLabels, F64Gauge>,
    slo_threshold: LabeledFamily<SloLabels, F64Gauge>,
    slo_observations: LabeledFamily<WithLabel<&'static str>, Counter>,
    slo_slow: LabeledFamily<WithLabel<&'static str>, Counter>,
    /// The SLO each target's histograms were built with (a changed threshold changes the
    /// buckets, so the series must be rebuilt rather than reattached), and when they were
    /// built: their start (created) timestamp in the protobuf exposition.
    slos: Arc<Mutex<Built>>,
    config_reload_successful: Gauge,
    config_reload_success_time: F64Gauge,
    canary: canary::CanaryFamilies,
    prefix: prefix::PrefixFamilies,
    session: session::SessionFamilies,
    sampler: sampler::SamplerFamilies,
    adapters: adapters::AdapterFamilies,
    quota: quota::QuotaFamilies,
    connection: connection::ConnectionFamilies,
    spans: ExportMetrics,
    /// Recording a probe holds this shared; encoding holds it exclusively. So every scrape
    /// sees each probe entirely or not at all: `requests_total` = successes + errors and
    /// ITL count = Σ per-probe observations hold in every single scrape.
    snapshot: Arc<RwLock<()>>,
    histograms: Arc<Mutex<HistogramMode>>,
}

/// Which buckets a protobuf scrape's per-target histograms carry (`[metrics] histograms`).
/// Text and OpenMetrics scrapes always carry the classic buckets and their exemplars: those
/// formats have no native histograms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HistogramMode {
    Classic,
    Native,
    #[default]
    Both,
}

impl Metrics {
    /// Which buckets a protobuf scrape carries; set from the configuration at start.
    pub fn set_histograms(&self, mode: HistogramMode) {
        *self.histograms.lock().unwrap_or_else(|e| e.into_inner()) = mode;
    }

    /// The exposition of `registry` (on which these metrics are registered), consistent
    /// with respect to probe recordings.
    pub fn encode(&self, registry: &Registry, format: Format) -> Result<Vec<u8>, std::fmt::Error> {
        let _exclusive = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
        let dual = |family: &str, labels: &TargetLabels| {
            if family == connection::PHASE_FAMILY {
                let h = self.connection.phase_histogram(labels)?;
                return Some((h.encoded(), h.created()));
            }
            let family = match family {
                "inferprobe_time_to_first_token_seconds" => &self.ttft,
                "inferprobe_time_to_first_answer_token_seconds" => &self.answer_ttft,
                "inferprobe_time_per_output_token_seconds" => &self.tpot,
                "inferprobe_inter_token_latency_seconds" => &self.itl,
                "inferprobe_e2e_request_latency_seconds" => &self.e2el,
                "inferprobe_request_output_tokens" => &self.output_tokens,
                "inferprobe_request_prompt_tokens" => &self.prompt_tokens,
                "inferprobe_schedule_lag_seconds" => &self.schedule_lag,
                "inferprobe_prefix_cache_cold_ttft_seconds" => &self.prefix.cold,
                "inferprobe_prefix_cache_warm_ttft_seconds" => &self.prefix.warm,
                "inferprobe_session_turn_ttft_seconds" => &self.session.ttft,
                "inferprobe_session_turn_e2el_seconds" => &self.session.e2el,
                "inferprobe_session_turn_time_to_call_seconds" => &self.session.time_to_call,
                _ => return None,
            };
            family.get(labels).map(|h| (h.encoded(), h.created()))
        };
        let slos = self.slos.lock().unwrap_or_else(|e| e.into_inner());
        let built = |labels: &TargetLabels| slos.get(labels).map(|&(_, built)| built);
        let mode = *self.histograms.lock().unwrap_or_else(|e| e.into_inner());
        expose::encode(registry, format, mode, &dual, &built)
    }

    pub fn config_loaded(&self, ok: bool) {
        self.config_reload_successful.set(i64::from(ok));
        if ok {
            self.config_reload_success_time.set(unix_now());
        }
    }

    /// A target's label set: `target`, `model`, `backend`, then its static labels.
    /// A node-local block's canary vote counters (answered, failed).
    pub fn canary_votes(&self, block: &str) -> (Counter, Counter) {
        self.canary.votes(block)
    }

    pub fn labels_of(target: &Target) -> TargetLabels {
        let mut pairs = vec![
            (labels::TARGET.to_owned(), target.name.clone()),
            (labels::MODEL.to_owned(), target.model.clone()),
            (
                labels::BACKEND.to_owned(),
                target.backend.as_str().to_owned(),
            ),
        ];
        pairs.extend(target.labels.iter().cloned());
        TargetLabels::new(pairs)
    }

    /// Create (or reattach to) the series of one target. Reattaching keeps counters going
    /// across a restart of the target; a changed SLO rebuilds them (new buckets).
    pub fn target(&self, target: &Target) -> TargetMetrics {
        let labels = Self::labels_of(target);
        let slo = target.slo;
        // A scrape sees all of a new target's series or none of them.
        let _exclusive = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
        {
            let mut slos = self.slos.lock().unwrap_or_else(|e| e.into_inner());
            let built = match slos.get(&labels) {
                Some(&(old, _)) if old != slo => {
                    self.remove_series_locked(&labels);
                    SystemTime::now()
                }
                Some(&(_, built)) => built,
                None => SystemTime::now(),
            };
            slos.insert(labels.clone(), (slo, built));
        }
        let l = || labels.clone();
        let threshold = |f: fn(&Slo) -> Option<std::time::Duration>| slo.as_ref().and_then(f);
        let latency = |defaults: &'static [f64], bound: Option<std::time::Duration>| {
            move || DualHistogram::new(with_bound(defaults, bound).into_iter())
        };
        let counts = || DualHistogram::new(TOKEN_COUNT_BUCKETS.iter().copied());
        if let Some(slo) = &slo {
            self.slo_objective
                .get_or_insert(l(), F64Gauge::default)
                .set(slo.objective);
            let thresholds = [
                ("ttft", slo.ttft),
                ("tpot", slo.tpot),
                ("itl", slo.itl),
                ("e2el", slo.e2el),
            ];
            for (name, value) in thresholds {
                if let Some(value) = value {
                    let key = (
                        l(),
                        (
                            [(labels::SLO, name)],
                            [(labels::BOUND, Le(value.as_secs_f64()))],
                        ),
                    );
                    self.slo_threshold
                        .get_or_insert(key, F64Gauge::default)
                        .set(value.as_secs_f64());
                }
            }
        }
        let sli = |name: &'static str, limit: Option<std::time::Duration>| {
            let key = || (l(), [(labels::SLO, name)]);
            limit.map(|limit| {
                sli::Sli::new(
                    limit,
                    self.slo_observations.get_or_insert(key(), Counter::default),
                    self.slo_slow.get_or_insert(key(), Counter::default),
                )
            })
        };
        let slis = sli::Slis {
            ttft: sli("ttft", threshold(|s| s.ttft)),
            tpot: sli("tpot", threshold(|s| s.tpot)),
            itl: sli("itl", threshold(|s| s.itl)),
            e2el: sli("e2el", threshold(|s| s.e2el)),
        };
        TargetMetrics {
            slo,
            slis,
            requests: self.requests.get_or_insert(l(), Counter::default),
            errors: ErrorCategory::ALL.map(|c| {
                self.errors
                    .get_or_insert((l(), [(labels::CATEGORY, c)]), Counter::default)
            }),
            skipped: SkipReason::ALL.map(|r| {
                self.skipped
                    .get_or_insert((l(), [(labels::REASON, r)]), Counter::default)
            }),
            in_flight: self.in_flight.get_or_insert(l(), Gauge::default),
            ttft: self
                .ttft
                .get_or_insert(l(), latency(TTFT_BUCKETS, threshold(|s| s.ttft))),
            tpot: self
                .tpot
                .get_or_insert(l(), latency(TOKEN_LATENCY_BUCKETS, threshold(|s| s.tpot))),
            itl: self
                .itl
                .get_or_insert(l(), latency(TOKEN_LATENCY_BUCKETS, threshold(|s| s.itl))),
            e2el: self
                .e2el
                .get_or_insert(l(), latency(E2EL_BUCKETS, threshold(|s| s.e2el))),
            output_tokens: self.output_tokens.get_or_insert(l(), counts),
            prompt_tokens: self.prompt_tokens.get_or_insert(l(), counts),
            output_tokens_total: self
                .output_tokens_total
                .get_or_insert(l(), Counter::default),
            prompt_tokens_total: self
                .prompt_tokens_total
                .get_or_insert(l(), Counter::default),
            prompt_cached_tokens: target::Lazy::new(self.prompt_cached_tokens.clone()),
            reasoning_tokens: target::Lazy::new(self.reasoning_tokens.clone()),
            cache_write_tokens: target::Lazy::new(self.cache_write_tokens.clone()),
            answer_ttft: target::Lazy::new(self.answer_ttft.clone()),
            good_requests: self.good_requests.get_or_insert(l(), Counter::default),
            last_success: self.last_success.get_or_insert(l(), F64Gauge::default),
            schedule_lag: self.schedule_lag.get_or_insert(l(), || {
                DualHistogram::new(exponential_buckets(0.0001, 4.0, 10))
            }),
            connections: self.connections.get_or_insert(l(), Counter::default),
            retries: self.retries.get_or_insert(l(), Counter::default),
            buffered: self.buffered.get_or_insert(l(), Counter::default),
            rate: self.target_rate.get_or_insert(l(), F64Gauge::default),
            canary: target.canary.is_some().then(|| {
                let group = target.canary_group();
                let capabilities: Vec<_> = target
                    .canary
                    .iter()
                    .flat_map(|spec| spec.prompts.iter())
                    .filter_map(|p| p.structure.as_deref().map(|s| s.capability()))
                    .collect();
                let known = target
                    .canary
                    .iter()
                    .flat_map(|spec| spec.prompts.iter())
                    .any(crate::endpoint::canary::CanaryPrompt::known);
                self.canary.series(
                    &labels,
                    group.as_deref().unwrap_or(""),
                    &capabilities,
                    known,
                )
            }),
            prefix_cache: target
                .prefix_cache
                .as_ref()
                .map(|spec| self.prefix.series(&labels, spec.objective)),
            session: target
                .session
                .as_ref()
                .map(|_| self.session.series(&labels)),
            sampler: target.sampler.as_ref().map(|spec| {
                // The version the replica serves, as its canary checks are grouped (a
                // gate selects both alike); the pod's template hash without a canary.
                let group = target.canary_group().or_else(|| target.revision.clone());
                let group = group.as_deref().unwrap_or("");
                self.sampler.series(&labels, group, spec.seed_every > 0)
            }),
            adapters: target.adapters.as_ref().map(|_| {
                let group = target.canary_group().or_else(|| target.revision.clone());
                self.adapters
                    .series(&labels, group.as_deref().unwrap_or(""))
            }),
            quota: self.quota.clone(),
            connection: self.connection.series(
                &labels,
                self.connections.get_or_insert(l(), Counter::default),
                self.prompt_tokens_total.clone(),
            ),
            labels,
            snapshot: Arc::clone(&self.snapshot),
            registered: self.prompt_tokens_total.clone(),
        }
    }

    /// The series of a discovery block; they start at up = 0, no targets.
    pub fn discovery(&self, block: &str) -> DiscoveryMetrics {
        let label = || [("discovery", block.to_owned())];
        DiscoveryMetrics {
            up: self.discovery_up.get_or_insert(label(), Gauge::default),
            targets: self
                .discovery_targets
                .get_or_insert(label(), Gauge::default),
            refused: self
                .discovery_refused
                .get_or_insert(label(), Counter::default),
        }
    }

    /// The health of a node-local block's pool-wide watch (its canary's voters and remote
    /// baseline): `inferprobe_discovery_up{discovery="<block>/pool"}`, so a 403 or a
    /// timeout that silently means no votes shows, and pages, as a block's would.
    pub fn discovery_pool_up(&self, block: &str) -> Gauge {
        let label = [("discovery", format!("{block}/pool"))];
        self.discovery_up.get_or_insert(label, Gauge::default)
    }

    /// Forget a discovery block's series (it was removed from the configuration), its
    /// pool watch's and its canary votes' with them.
    pub fn remove_discovery(&self, block: &str) {
        let label = [("discovery", block.to_owned())];
        self.discovery_up.remove(&label);
        self.discovery_targets.remove(&label);
        self.discovery_refused.remove(&label);
        self.remove_discovery_pool(block);
        self.canary.remove_votes(block);
    }

    /// Forget a block's pool watch health (the block watches its pool no more).
    pub fn remove_discovery_pool(&self, block: &str) {
        self.discovery_up
            .remove(&[("discovery", format!("{block}/pool"))]);
    }

    /// The span exporter's counters.
    pub fn span_export(&self) -> ExportMetrics {
        self.spans.clone()
    }

    /// The fleet size gauge, for the fleet watcher.
    pub fn fleet_size(&self) -> Gauge {
        self.fleet_size.clone()
    }

    /// Remove every series of a target (it was removed from the configuration).
    /// A target restarted with its labels (a reload) and without a check it had: the
    /// check's series go (frozen, they would page on what no check runs any more). Called
    /// once the old target was stopped, so its last session counts nothing back.
    pub fn remove_dropped_checks(&self, target: &Target) {
        let labels = Self::labels_of(target);
        if target.prefix_cache.is_none() {
            self.prefix.remove(&labels);
        }
        if target.session.is_none() {
            self.session.remove(&labels);
        }
        if target.sampler.is_none() {
            self.sampler.remove(&labels);
        }
        if target.adapters.is_none() {
            self.adapters.remove(&labels);
        }
    }

    pub fn remove_target(&self, labels: &TargetLabels) {
        self.slos
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(labels);
        self.remove_series(labels);
    }

    fn remove_series(&self, labels: &TargetLabels) {
        let _exclusive = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
        self.remove_series_locked(labels);
    }

    /// The caller holds the snapshot lock exclusively.
    fn remove_series_locked(&self, labels: &TargetLabels) {
        self.requests.remove(labels);
        self.errors.retain(|(l, _)| l != labels);
        self.skipped.retain(|(l, _)| l != labels);
        self.in_flight.remove(labels);
        for family in [
            &self.ttft,
            &self.tpot,
            &self.itl,
            &self.e2el,
            &self.output_tokens,
            &self.prompt_tokens,
            &self.schedule_lag,
            &self.answer_ttft,
        ] {
            family.remove(labels);
        }
        for family in [
            &self.output_tokens_total,
            &self.prompt_tokens_total,
            &self.prompt_cached_tokens,
            &self.reasoning_tokens,
            &self.cache_write_tokens,
            &self.good_requests,
            &self.connections,
            &self.retries,
            &self.buffered,
        ] {
            family.remove(labels);
        }
        self.last_success.remove(labels);
        self.target_rate.remove(labels);
        self.slo_objective.remove(labels);
        self.slo_threshold.retain(|(l, _)| l != labels);
        self.slo_observations.retain(|(l, _)| l != labels);
        self.slo_slow.retain(|(l, _)| l != labels);
        self.canary.remove(labels);
        self.prefix.remove(labels);
        self.session.remove(labels);
        self.sampler.remove(labels);
        self.adapters.remove(labels);
        self.quota.remove(labels);
        self.connection.remove(labels);
    }
}

pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests;
