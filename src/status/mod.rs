//! The status page at `/`: recent probes per target and what they add up to.
//!
//! Schedulers push a short summary of every finished probe into a bounded ring per target;
//! the page ([`page`]) renders the rings on request. Nothing here is on the probes' timing
//! path beyond one short lock per finished probe.

mod adapters;
mod canary;
mod html;
mod page;
mod prefix;
mod sampler;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use crate::endpoint::{Slo, Target};
use crate::error::{ErrorCategory, ProbeError};
use crate::media::MediaSummary;
use crate::metrics::is_good;
use crate::record::Measurement;
use crate::report::redact;

pub use adapters::AdapterCheck;
pub use canary::CanaryCheck;
pub use page::render;
pub use prefix::PrefixCheck;
pub use sampler::{
    SampledTokens, SamplerRound, SamplerRow, SamplerServer, SamplerStatus, SamplerWindow,
};

/// One finished probe, as the page shows it.
#[derive(Clone, Debug)]
pub struct ProbeSummary {
    pub at: SystemTime,
    pub request_id: Arc<String>,
    /// The trace it started, when it sent `traceparent`.
    pub trace_id: Option<String>,
    pub ttft: Option<Duration>,
    pub e2el: Option<Duration>,
    pub output_tokens: Option<u64>,
    /// `None` for a success.
    pub error: Option<(ErrorCategory, String)>,
    /// A success within every SLO threshold.
    pub good: bool,
    /// The images and videos the request carried.
    pub media: MediaSummary,
}

impl ProbeSummary {
    /// The summary of a finished probe of `target` (whose API key is scrubbed from errors).
    pub fn new(
        request_id: &Arc<String>,
        trace: Option<&crate::trace_context::TraceIds>,
        outcome: &Result<Measurement, ProbeError>,
        target: &Target,
        media: MediaSummary,
    ) -> Self {
        let request_id = Arc::clone(request_id);
        let trace_id = trace.map(|t| t.trace_hex());
        let at = SystemTime::now();
        match outcome {
            Ok(m) => Self {
                at,
                request_id,
                trace_id,
                ttft: m.ttft,
                e2el: Some(m.e2el),
                output_tokens: m.output_tokens.map(|c| c.value()),
                error: None,
                good: target.slo.as_ref().is_none_or(|slo| is_good(slo, m)),
                media,
            },
            Err(e) => Self {
                at,
                request_id,
                trace_id,
                ttft: None,
                e2el: None,
                output_tokens: None,
                error: Some((e.category(), redact(&crate::error::chain(e), target))),
                good: false,
                media,
            },
        }
    }
}

/// One target's recent probes.
#[derive(Debug)]
pub struct TargetStatus {
    /// The target's id (its name, for a configured one).
    pub name: String,
    /// Where a discovered target came from.
    pub origin: Option<String>,
    pub backend: &'static str,
    pub model: String,
    pub url: String,
    pub rate: f64,
    pub slo: Option<Slo>,
    probes: Mutex<VecDeque<ProbeSummary>>,
    capacity: usize,
    canary: Mutex<VecDeque<CanaryCheck>>,
    prefix: Mutex<VecDeque<PrefixCheck>>,
    sampler: Mutex<SamplerStatus>,
    adapters: Mutex<VecDeque<AdapterCheck>>,
}

/// Canary checks (and prefix-cache pairs, sampler rounds) kept per target for the page.
const CANARY_CHECKS: usize = 20;

impl TargetStatus {
    pub fn push_canary(&self, check: CanaryCheck) {
        let mut checks = self.canary.lock().unwrap_or_else(|e| e.into_inner());
        if checks.len() == CANARY_CHECKS {
            checks.pop_front();
        }
        checks.push_back(check);
    }

    pub fn push_prefix(&self, check: PrefixCheck) {
        let mut checks = self.prefix.lock().unwrap_or_else(|e| e.into_inner());
        if checks.len() == CANARY_CHECKS {
            checks.pop_front();
        }
        checks.push_back(check);
    }

    pub fn push_adapter(&self, check: AdapterCheck) {
        let mut checks = self.adapters.lock().unwrap_or_else(|e| e.into_inner());
        if checks.len() == CANARY_CHECKS {
            checks.pop_front();
        }
        checks.push_back(check);
    }

    /// Oldest first.
    pub fn adapter_checks(&self) -> Vec<AdapterCheck> {
        let checks = self.adapters.lock().unwrap_or_else(|e| e.into_inner());
        checks.iter().cloned().collect()
    }

    /// Oldest first.
    pub fn prefix_checks(&self) -> Vec<PrefixCheck> {
        let checks = self.prefix.lock().unwrap_or_else(|e| e.into_inner());
        checks.iter().cloned().collect()
    }

    /// The sampler check's semantics in use: `server` (`vllm`, `unknown`, …), and `how`
    /// they were known (configured, or what `/v1/models` said).
    pub fn sampler_server(&self, server: &'static str, how: impl Into<String>) {
        self.sampler_status().server = Some(SamplerServer {
            server,
            how: how.into(),
        });
    }

    /// The sampled tokens of the request `request_id`, judged: they go on its round's row
    /// when [`TargetStatus::sampler_round`] reports it.
    pub fn sampler_tokens(&self, request_id: &str, ok: u64, outside: u64, unscored: u64) {
        let tokens = SampledTokens {
            ok,
            outside,
            unscored,
        };
        self.sampler_status().tokens(request_id, tokens);
    }

    /// A sampler round's result (the newest of [`CANARY_CHECKS`] kept).
    pub fn sampler_round(&self, round: SamplerRound) {
        self.sampler_status().round(round, CANARY_CHECKS);
    }

    /// A full calibration window's χ² and p-value, and the windows in a row that failed
    /// (0: this one passed).
    pub fn sampler_window(&self, chi2: f64, p_value: f64, in_row: u32) {
        self.sampler_status().window = Some(SamplerWindow {
            at: SystemTime::now(),
            chi2,
            p_value,
            in_row,
        });
    }

    pub fn sampler(&self) -> SamplerStatus {
        self.sampler_status().clone()
    }

    fn sampler_status(&self) -> std::sync::MutexGuard<'_, SamplerStatus> {
        self.sampler.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Oldest first.
    pub fn canary_checks(&self) -> Vec<CanaryCheck> {
        let checks = self.canary.lock().unwrap_or_else(|e| e.into_inner());
        checks.iter().cloned().collect()
    }

    pub fn push(&self, probe: ProbeSummary) {
        let mut probes = self.probes.lock().unwrap_or_else(|e| e.into_inner());
        if probes.len() == self.capacity {
            probes.pop_front();
        }
        probes.push_back(probe);
    }

    /// Oldest first.
    pub fn probes(&self) -> Vec<ProbeSummary> {
        self.probes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

/// Every target's ring, by name.
#[derive(Debug, Default)]
pub struct Board {
    targets: RwLock<BTreeMap<String, Arc<TargetStatus>>>,
}

impl Board {
    /// The ring of `target`: kept across a restart of the target (same id), new otherwise.
    pub fn attach(&self, target: &Target, capacity: usize) -> Arc<TargetStatus> {
        let mut targets = self.targets.write().unwrap_or_else(|e| e.into_inner());
        let kept = targets
            .get(&target.id)
            .map(|old| old.probes())
            .unwrap_or_default();
        let kept_checks = targets
            .get(&target.id)
            .map(|old| old.canary_checks())
            .unwrap_or_default();
        let kept_pairs = targets
            .get(&target.id)
            .map(|old| old.prefix_checks())
            .unwrap_or_default();
        let kept_adapters = targets
            .get(&target.id)
            .map(|old| old.adapter_checks())
            .unwrap_or_default();
        let kept_sampler = targets
            .get(&target.id)
            .map(|old| old.sampler_status().kept())
            .unwrap_or_default();
        let status = Arc::new(TargetStatus {
            name: target.id.clone(),
            origin: target.origin.clone(),
            backend: target.backend.as_str(),
            model: target.model.clone(),
            url: redacted_url(&target.url),
            rate: target.rate,
            slo: target.slo,
            probes: Mutex::new(kept.into_iter().rev().take(capacity).rev().collect()),
            capacity,
            canary: Mutex::new(kept_checks.into()),
            prefix: Mutex::new(kept_pairs.into()),
            sampler: Mutex::new(kept_sampler),
            adapters: Mutex::new(kept_adapters.into()),
        });
        targets.insert(target.id.clone(), Arc::clone(&status));
        status
    }

    pub fn detach(&self, id: &str) {
        self.targets
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    pub fn targets(&self) -> Vec<Arc<TargetStatus>> {
        self.targets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }
}

/// The URL without its query (which may carry tokens on some gateways).
fn redacted_url(url: &url::Url) -> String {
    let mut url = url.clone();
    url.set_query(None);
    url.to_string()
}
