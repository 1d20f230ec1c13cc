//! One target's series, resolved once so recording a probe takes no map lookups, and the
//! rule that makes a success "good" (within every configured SLO threshold).

use std::sync::{Arc, RwLock, TryLockError};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use super::canary::{CanarySeries, CanaryVerdict};
use super::sli::Slis;
use super::{DualHistogram, Exemplar, F64Gauge, LabeledFamily, SkipReason, TargetLabels, unix_now};
use crate::endpoint::Slo;
use crate::error::{ErrorCategory, ProbeError};
use crate::record::Measurement;

/// Which probe an observation came from: its request id, and its trace id when it sent
/// `traceparent`. Both go into the latency histograms' exemplars.
#[derive(Clone, Debug)]
pub struct ProbeId {
    pub request_id: Arc<String>,
    pub trace_id: Option<Arc<String>>,
}

impl From<&Arc<String>> for ProbeId {
    fn from(request_id: &Arc<String>) -> Self {
        Self {
            request_id: Arc::clone(request_id),
            trace_id: None,
        }
    }
}

/// OpenMetrics: an exemplar's label names and values hold at most 128 characters.
const EXEMPLAR_CHARS: usize = 128;

impl ProbeId {
    pub fn new(request_id: &Arc<String>, trace: Option<&crate::trace_context::TraceIds>) -> Self {
        Self {
            request_id: Arc::clone(request_id),
            trace_id: trace.map(|t| Arc::new(t.trace_hex())),
        }
    }

    /// `trace_id` (the name Grafana's exemplar-to-trace link reads) and `request_id`, or,
    /// when both would exceed OpenMetrics' 128 characters (a long request id prefix), the
    /// trace id alone: it leads to the log line too.
    fn exemplar(&self) -> Exemplar {
        let request = ("request_id", Arc::clone(&self.request_id));
        let Some(trace_id) = &self.trace_id else {
            return vec![request];
        };
        let trace = ("trace_id", Arc::clone(trace_id));
        let chars = |(k, v): &(&str, Arc<String>)| k.len() + v.chars().count();
        if chars(&trace) + chars(&request) <= EXEMPLAR_CHARS {
            vec![trace, request]
        } else {
            vec![trace]
        }
    }
}

#[derive(Clone, Debug)]
pub struct TargetMetrics {
    pub(super) labels: TargetLabels,
    pub(super) slo: Option<Slo>,
    pub(super) slis: Slis,
    pub(super) requests: Counter,
    pub(super) errors: [Counter; ErrorCategory::ALL.len()],
    pub(super) skipped: [Counter; SkipReason::ALL.len()],
    pub(super) in_flight: Gauge,
    pub(super) ttft: DualHistogram,
    pub(super) tpot: DualHistogram,
    pub(super) itl: DualHistogram,
    pub(super) e2el: DualHistogram,
    pub(super) output_tokens: DualHistogram,
    pub(super) prompt_tokens: DualHistogram,
    pub(super) output_tokens_total: Counter,
    pub(super) prompt_tokens_total: Counter,
    pub(super) prompt_cached_tokens: Lazy,
    pub(super) reasoning_tokens: Lazy,
    pub(super) cache_write_tokens: Lazy,
    /// Made on the first answer that came after reasoning; then every streamed answer.
    pub(super) answer_ttft: Lazy<DualHistogram>,
    pub(super) good_requests: Counter,
    pub(super) last_success: F64Gauge,
    pub(super) schedule_lag: DualHistogram,
    pub(super) connections: Counter,
    pub(super) retries: Counter,
    pub(super) buffered: Counter,
    pub(super) rate: F64Gauge,
    /// For targets with a correctness canary.
    pub(super) canary: Option<CanarySeries>,
    /// For targets with a prefix-cache check.
    pub(super) prefix_cache: Option<super::prefix::PrefixSeries>,
    /// For targets with a session check.
    pub(super) session: Option<super::session::SessionSeries>,
    /// For targets with a sampler check.
    pub(super) sampler: Option<super::sampler::SamplerSeries>,
    /// For targets with an adapter check.
    pub(super) adapters: Option<super::adapters::AdapterSeries>,
    /// The rate-limit headroom its responses report.
    pub(super) quota: super::quota::QuotaFamilies,
    /// What its client measures of its connections.
    pub(super) connection: super::connection::ConnectionSeries,
    pub(super) snapshot: Arc<RwLock<()>>,
    /// A family every registered target has a series in (`prompt_tokens_total`), removed
    /// with the target's.
    pub(super) registered: LabeledFamily<TargetLabels, Counter>,
}

/// Within every threshold the SLO sets. A threshold on something the probe did not
/// produce (TPOT of a one-token answer) is met; every ITL gap must be within `itl`.
pub fn is_good(slo: &Slo, m: &Measurement) -> bool {
    let within = |value: Option<Duration>, limit: Option<Duration>| match (value, limit) {
        (Some(value), Some(limit)) => value <= limit,
        _ => true,
    };
    within(m.ttft, slo.ttft)
        && within(m.tpot, slo.tpot)
        && within(Some(m.e2el), slo.e2el)
        && slo
            .itl
            .is_none_or(|limit| m.itl.iter().all(|&(gap, _)| gap <= limit))
}

impl TargetMetrics {
    pub fn labels(&self) -> &TargetLabels {
        &self.labels
    }

    /// The prefix-cache check's series (`None` without one).
    pub fn prefix_cache(&self) -> Option<&super::prefix::PrefixSeries> {
        self.prefix_cache.as_ref()
    }

    /// The session check's series (`None` without one).
    pub fn session(&self) -> Option<&super::session::SessionSeries> {
        self.session.as_ref()
    }

    /// The adapter check's series (`None` without one).
    pub fn adapters(&self) -> Option<&super::adapters::AdapterSeries> {
        self.adapters.as_ref()
    }

    /// What a workload probe's response said of the rate limit ([`crate::quota`]).
    pub fn quota(&self, quota: &crate::quota::Quota) {
        self.quota.set(&self.labels, quota);
    }

    /// The sampler check's series (`None` without one).
    pub fn sampler(&self) -> Option<&super::sampler::SamplerSeries> {
        self.sampler.as_ref()
    }

    /// Record one finished probe, atomically with respect to scrapes. Blocks while a
    /// scrape is encoding: from async code use [`Self::record_without_blocking`].
    pub fn record(&self, id: impl Into<ProbeId>, outcome: &Result<Measurement, ProbeError>) {
        let _shared = self.snapshot.read().unwrap_or_else(|e| e.into_inner());
        self.apply(&id.into(), outcome.as_ref().map_err(ProbeError::category));
    }

    /// Record one finished probe without ever stalling an async worker thread. A scrape
    /// holds the snapshot lock for a few milliseconds; a probe task that blocked on it would
    /// stall every other probe task queued on the same worker, and their token instants
    /// would be stamped late. So when the lock is busy the recording waits asynchronously,
    /// polling at the timer's resolution. (Waiting on a blocking-pool thread instead spawned
    /// dozens of threads per scrape at high probe rates, and their malloc arenas kept RSS
    /// from staying flat.) The lock prefers writers, so a waiting scrape is not starved.
    pub async fn record_without_blocking(
        &self,
        id: impl Into<ProbeId>,
        outcome: &Result<Measurement, ProbeError>,
    ) {
        let (id, outcome) = (id.into(), outcome.as_ref().map_err(ProbeError::category));
        let request_id = &id;
        loop {
            // The guard must be gone before the await: it cannot cross threads.
            let recorded = match self.snapshot.try_read() {
                Ok(_shared) => {
                    self.apply(request_id, outcome);
                    true
                }
                Err(TryLockError::Poisoned(poisoned)) => {
                    let _shared = poisoned.into_inner();
                    self.apply(request_id, outcome);
                    true
                }
                Err(TryLockError::WouldBlock) => false,
            };
            if recorded {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The recording itself; the caller holds the snapshot lock (shared).
    fn apply(&self, id: &ProbeId, outcome: Result<&Measurement, ErrorCategory>) {
        match outcome {
            Ok(m) => {
                let exemplar = || Some(id.exemplar());
                if let Some(ttft) = m.ttft {
                    self.ttft.observe(ttft.as_secs_f64(), exemplar());
                    Slis::count(&self.slis.ttft, ttft, 1);
                }
                if let Some(tpot) = m.tpot {
                    self.tpot.observe(tpot.as_secs_f64(), exemplar());
                    Slis::count(&self.slis.tpot, tpot, 1);
                }
                for &(gap, count) in &m.itl {
                    for _ in 0..count {
                        self.itl.observe(gap.as_secs_f64(), exemplar());
                    }
                    Slis::count(&self.slis.itl, gap, u64::from(count));
                }
                self.e2el.observe(m.e2el.as_secs_f64(), exemplar());
                Slis::count(&self.slis.e2el, m.e2el, 1);
                if let Some(count) = m.output_tokens {
                    self.output_tokens.observe(count.value() as f64, None);
                    self.output_tokens_total.inc_by(count.value());
                }
                if let Some(prompt) = m.prompt_tokens {
                    self.prompt_tokens.observe(prompt as f64, None);
                    self.prompt_tokens_total.inc_by(prompt);
                }
                self.count_parts(m);
                if let Some(ttft) = m.answer.ttft {
                    let histogram = match m.answer.reasoned {
                        true => self.answer_ttft.get_or_make(
                            &self.labels,
                            || self.registered(),
                            || DualHistogram::new(super::TTFT_BUCKETS.iter().copied()),
                        ),
                        false => self.answer_ttft.made(),
                    };
                    if let Some(histogram) = histogram {
                        histogram.observe(ttft.as_secs_f64(), exemplar());
                    }
                }
                if self.slo.as_ref().is_none_or(|slo| is_good(slo, m)) {
                    self.good_requests.inc();
                }
                if m.buffered {
                    self.buffered.inc();
                }
                self.last_success.set(unix_now());
            }
            Err(category) => {
                self.errors[category as usize].inc();
            }
        }
        self.requests.inc();
    }

    /// The token counts a server reports only sometimes (cached, reasoning, cache writes):
    /// each series made on the target's first report.
    fn count_parts(&self, m: &Measurement) {
        let counts = [
            (&self.prompt_cached_tokens, m.cached_prompt_tokens),
            (&self.reasoning_tokens, m.answer.reasoning_tokens),
            (&self.cache_write_tokens, m.answer.cache_write_tokens),
        ];
        for (lazy, count) in counts {
            if let Some(count) = count
                && let Some(counter) = lazy.get(&self.labels, || self.registered())
            {
                counter.inc_by(count);
            }
        }
    }

    /// Record a canary check: its request counts like any probe's (requests, errors, good,
    /// tokens), its latency goes into no histogram (it is not the workload's shape), and
    /// its verdict into the canary series.
    pub async fn record_canary(
        &self,
        outcome: &Result<Measurement, ProbeError>,
        verdict: &CanaryVerdict,
    ) {
        self.record_canary_request(outcome, Some(verdict)).await;
    }

    /// A canary request, with its verdict or (a failure held back as part of a burst,
    /// `crate::canary::warmup`) without: the verdict may follow by
    /// [`Self::record_canary_verdict`].
    pub async fn record_canary_request(
        &self,
        outcome: &Result<Measurement, ProbeError>,
        verdict: Option<&CanaryVerdict>,
    ) {
        loop {
            // The guard must be gone before the await: it cannot cross threads.
            let recorded = match self.snapshot.try_read() {
                Ok(_shared) => self.apply_canary(outcome, verdict),
                Err(TryLockError::Poisoned(poisoned)) => {
                    let _shared = poisoned.into_inner();
                    self.apply_canary(outcome, verdict)
                }
                Err(TryLockError::WouldBlock) => false,
            };
            if recorded {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The recording itself; the caller holds the snapshot lock (shared).
    fn apply_canary(
        &self,
        outcome: &Result<Measurement, ProbeError>,
        verdict: Option<&CanaryVerdict>,
    ) -> bool {
        match outcome {
            Ok(m) => {
                if let Some(count) = m.output_tokens {
                    self.output_tokens_total.inc_by(count.value());
                }
                if let Some(prompt) = m.prompt_tokens {
                    self.prompt_tokens_total.inc_by(prompt);
                }
                self.count_parts(m);
                if self.slo.as_ref().is_none_or(|slo| is_good(slo, m)) {
                    self.good_requests.inc();
                }
                self.last_success.set(unix_now());
            }
            Err(e) => {
                self.errors[e.category() as usize].inc();
            }
        }
        self.requests.inc();
        if let Some(verdict) = verdict {
            self.apply_canary_verdict(verdict);
        }
        true
    }

    /// The verdict of a canary request counted before (a held failure of a burst).
    pub async fn record_canary_verdict(&self, verdict: &CanaryVerdict) {
        loop {
            let recorded = match self.snapshot.try_read() {
                Ok(_shared) => self.apply_canary_verdict(verdict),
                Err(TryLockError::Poisoned(poisoned)) => {
                    let _shared = poisoned.into_inner();
                    self.apply_canary_verdict(verdict)
                }
                Err(TryLockError::WouldBlock) => false,
            };
            if recorded {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The caller holds the snapshot lock (shared).
    fn apply_canary_verdict(&self, verdict: &CanaryVerdict) -> bool {
        if let Some(canary) = &self.canary
            && self.registered()
        {
            canary.record(verdict);
        }
        true
    }

    /// The other groups this replica is compared with now (the rollout gate's pairs):
    /// their series exist from now on (at 0), before the first comparison, and those of
    /// groups gone are dropped.
    pub fn open_canary_baselines(&self, pairs: &super::Pairs<'_>) {
        // Never blocks a probe task on a scrape: when one holds the lock, the recording
        // of this check's comparison opens them (under the lock) instead.
        let Ok(_shared) = self.snapshot.try_read() else {
            return;
        };
        if let Some(canary) = &self.canary
            && self.registered()
        {
            canary.open_baselines(pairs);
        }
    }

    /// Whether the target's series are still exported. A check that ends after its target
    /// was removed (discovery dropped the pod mid-request) must not make a series, a lazy
    /// one or a canary one, that nothing would remove again. The caller holds the snapshot
    /// lock (shared), and removal takes it exclusively, so the look and what is made after
    /// it cannot straddle a removal.
    fn registered(&self) -> bool {
        self.registered.get(&self.labels).is_some()
    }

    pub fn skipped(&self, reason: SkipReason) {
        self.skipped[reason as usize].inc();
    }

    /// Arrivals not sent, in one go (a pause can skip many).
    pub fn skipped_many(&self, reason: SkipReason, count: u64) {
        self.skipped[reason as usize].inc_by(count);
    }

    /// The probes per second the scheduler runs now.
    pub fn set_rate(&self, rate: f64) {
        self.rate.set(rate);
    }

    /// A probe re-sent after the keep-alive race (see `probe`).
    pub fn retried(&self) {
        self.retries.inc();
    }

    pub fn schedule_lag(&self, lag: Duration) {
        self.schedule_lag.observe(lag.as_secs_f64(), None);
    }

    /// The counter of new connections (each pool miss), for the HTTP client to bump.
    pub fn connections(&self) -> Counter {
        self.connections.clone()
    }

    /// The series its HTTP client records connections in ([`crate::client`]).
    pub fn connection_series(&self) -> super::connection::ConnectionSeries {
        self.connection.clone()
    }

    /// Count a probe in flight until the guard drops.
    pub fn in_flight(&self) -> InFlight {
        self.in_flight.inc();
        InFlight(self.in_flight.clone())
    }
}

/// A target's series made on first use (in its family, under its labels), then kept;
/// never made once the target is gone (see [`TargetMetrics::registered`]).
#[derive(Clone, Debug)]
pub struct Lazy<M = Counter> {
    family: LabeledFamily<TargetLabels, M>,
    made: Arc<std::sync::OnceLock<M>>,
}

impl<M: Clone> Lazy<M> {
    pub(super) fn new(family: LabeledFamily<TargetLabels, M>) -> Self {
        Self {
            family,
            made: Arc::default(),
        }
    }

    /// The series if made, else made by `make` now (when `registered` says the target is).
    fn get_or_make(
        &self,
        labels: &TargetLabels,
        registered: impl FnOnce() -> bool,
        make: impl FnOnce() -> M,
    ) -> Option<&M> {
        if let Some(made) = self.made.get() {
            return Some(made);
        }
        registered().then(|| {
            self.made
                .get_or_init(|| self.family.get_or_insert(labels.clone(), make))
        })
    }

    /// The series if it was made.
    fn made(&self) -> Option<&M> {
        self.made.get()
    }
}

impl Lazy<Counter> {
    fn get(&self, labels: &TargetLabels, registered: impl FnOnce() -> bool) -> Option<&Counter> {
        self.get_or_make(labels, registered, Counter::default)
    }
}

pub struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}
