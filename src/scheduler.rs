//! Open-loop arrivals for one target.
//!
//! Arrival times follow a gamma renewal process (shape = burstiness, mean gap = 1/rate;
//! burstiness 1 is Poisson) and do not depend on how fast the server answers: a slow
//! server does not slow the probe down, exactly as real users keep arriving. When
//! `max_concurrency` probes are in flight an arrival is skipped and counted, never queued
//! (a queue would send a burst later and hide the slowdown). The first arrival is at a
//! random offset so a fleet of probes started together does not synchronize.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Gamma};
use tokio::sync::{Semaphore, watch};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::budget::Budget;
use crate::endpoint::Target;
use crate::metrics::{ProbeId, SkipReason, TargetMetrics};
use crate::probe::{Outcome, Prober};
use crate::prompt::{Draw, Prompt};
use crate::report;
use crate::status::{ProbeSummary, TargetStatus};

/// An arrival this far behind its time when the previous one was sent was swallowed by a
/// pause (SIGSTOP, a frozen cgroup, a paused VM, a starved runtime): it is skipped, not
/// sent in a burst. Below it, lateness is scheduling noise and is caught up as usual.
const MAX_LATE: Duration = Duration::from_millis(50);

/// What the schedulers share with the daemon.
#[derive(Clone, Debug)]
pub struct Context {
    /// Where probes run, so shutdown can wait for them.
    pub probes: TaskTracker,
    /// Cancelled when in-flight probes must stop (end of the grace period).
    pub abort: CancellationToken,
    /// Probes recorded in metrics, and probes stopped by `abort` (not recorded).
    pub recorded: Arc<AtomicU64>,
    pub cut: Arc<AtomicU64>,
    /// Ready pods of the probe's fleet: a target's `fleet_rate` is divided by it.
    pub fleet: watch::Receiver<usize>,
    /// Where probe spans are exported (`[tracing]`), if anywhere.
    pub spans: Option<crate::otlp::Spans>,
}

impl Context {
    /// Whether the next probe's trace is sampled (always, without an exporter: the server
    /// may record what we do not).
    pub fn sample(&self) -> bool {
        self.spans.as_ref().is_none_or(crate::otlp::Spans::sample)
    }
}

/// The rate this process runs `target` at, with `fleet` probe pods sharing a `fleet_rate`.
pub fn effective_rate(target: &Target, fleet: usize) -> f64 {
    match target.fleet_rate {
        Some(total) => total / fleet.max(1) as f64,
        None => target.rate,
    }
}

/// Where a target's results go.
#[derive(Clone, Debug)]
pub struct Sinks {
    pub metrics: TargetMetrics,
    pub status: Arc<TargetStatus>,
    /// The target's `max_output_tokens_per_hour`, shared with its prefix-cache check.
    pub budget: Option<Budget>,
}

/// Send arrivals for `prober`'s target until `stop` is cancelled.
pub async fn run(
    prober: Arc<Prober>,
    sinks: Sinks,
    seed: u64,
    stop: CancellationToken,
    ctx: Context,
) {
    let metrics = &sinks.metrics;
    let target = Arc::clone(&prober.target);
    let mut fleet = ctx.fleet.clone();
    let rate = effective_rate(&target, *fleet.borrow_and_update());
    metrics.set_rate(rate);
    let arrivals = match Arrivals::new(rate, target.burstiness, seed) {
        Ok(arrivals) => arrivals,
        Err(e) => {
            tracing::error!(target = %target.id, error = %e, "cannot schedule arrivals");
            return;
        }
    };
    let permits = Arc::new(Semaphore::new(target.max_concurrency));
    let mut schedule = Schedule::new(arrivals, rate, Instant::now());
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            Ok(()) = fleet.changed(), if target.fleet_rate.is_some() => {
                let rate = effective_rate(&target, *fleet.borrow_and_update());
                if let Err(e) = schedule.set_rate(rate, Instant::now()) {
                    tracing::error!(target = %target.id, error = %e, "cannot reschedule arrivals");
                    return;
                }
                metrics.set_rate(rate);
                continue;
            }
            () = sleep_until(schedule.next()) => {}
        }
        let now = Instant::now();
        let due = schedule.fire(now);
        metrics.schedule_lag(due.lag);
        if due.missed > 0 {
            metrics.skipped_many(SkipReason::Late, due.missed);
        }
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            metrics.skipped(SkipReason::Concurrency);
            continue;
        };
        let rng = schedule.rng();
        let request_id = Arc::new(format!(
            "{}{:016x}",
            target.request_id_prefix,
            rng.random::<u64>()
        ));
        let draw = target.prompts.draw(rng);
        if let Some(budget) = &sinks.budget {
            if !budget.try_spend(now, draw.max_tokens) {
                metrics.skipped(SkipReason::Budget);
                continue;
            }
        }
        let (prober, sinks, ctx) = (Arc::clone(&prober), sinks.clone(), ctx.clone());
        ctx.probes.clone().spawn(async move {
            let _permit = permit;
            let _in_flight = sinks.metrics.in_flight();
            let Some(prompt) = build_prompt(&prober.target, draw).await else {
                return;
            };
            let probe = prober
                .probe_sampled(&request_id, &prompt, &ctx.abort, ctx.sample())
                .await
                .judge_workload(&prober.target);
            if probe.retried {
                sinks.metrics.retried();
            }
            if let Some(quota) = &probe.record.response.quota {
                sinks.metrics.quota(quota);
            }
            match &probe.outcome {
                Outcome::Finished(result) => {
                    report::log_probe(&prober.target, &request_id, result, &probe);
                    if let Some(spans) = &ctx.spans {
                        if let Some(span) = crate::otlp::probe_span(
                            &prober.target,
                            &request_id,
                            &probe,
                            result,
                            false,
                        ) {
                            spans.offer(span);
                        }
                    }
                    sinks
                        .metrics
                        .record_without_blocking(
                            ProbeId::new(&request_id, probe.record.trace.as_ref()),
                            result,
                        )
                        .await;
                    sinks.status.push(ProbeSummary::new(
                        &request_id,
                        probe.record.trace.as_ref(),
                        result,
                        &prober.target,
                        probe.media,
                    ));
                    ctx.recorded.fetch_add(1, Ordering::Relaxed);
                }
                Outcome::Cut => {
                    ctx.cut.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(target = %prober.target.id, request_id = %request_id,
                        "probe cut short by shutdown; not counted");
                }
            }
        });
    }
}

/// The prompt of `draw`. A tokenizer's work (exact lengths) runs on the blocking pool, off
/// the runtime workers that stamp other probes' chunks; `None` if the runtime shuts down.
pub(crate) async fn build_prompt(target: &Arc<Target>, draw: Draw) -> Option<Prompt> {
    if !target.prompts.is_heavy() {
        return Some(target.prompts.build(draw));
    }
    let target = Arc::clone(target);
    match tokio::task::spawn_blocking(move || target.prompts.build(draw)).await {
        Ok(prompt) => Some(prompt),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}

/// When each arrival is due. An arrival is sent when its time comes, however late the
/// loop woke for it (the lag is exported); if the *next* one is by then more than
/// [`MAX_LATE`] overdue as well, a pause swallowed it: the arrivals that fell due during
/// the pause are counted as missed and the schedule restarts from now. So a pause of any
/// length ends with exactly one arrival, then a fresh gap, never a burst.
#[derive(Debug)]
pub struct Schedule {
    arrivals: Arrivals,
    rate: f64,
    next: Instant,
}

/// One arrival that fell due.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Due {
    /// How late it is sent.
    pub lag: Duration,
    /// Later arrivals a pause swallowed (estimated from the rate), not to be sent.
    pub missed: u64,
}

impl Schedule {
    /// The first arrival comes at a random offset within one mean gap of `now`.
    pub fn new(mut arrivals: Arrivals, rate: f64, now: Instant) -> Self {
        let next = now + arrivals.start_offset();
        Self {
            arrivals,
            rate,
            next,
        }
    }

    /// When the next arrival is due.
    pub fn next(&self) -> Instant {
        self.next
    }

    /// Arrivals at `rate` from `now` on (the fleet sharing a `fleet_rate` changed size).
    /// Gaps are memoryless for Poisson arrivals, so the next one is drawn afresh.
    pub fn set_rate(&mut self, rate: f64, now: Instant) -> Result<(), rand_distr::GammaError> {
        self.arrivals.set_rate(rate)?;
        self.rate = rate;
        self.next = now + self.arrivals.next_gap();
        Ok(())
    }

    /// The arrival due at [`Self::next`] is sent at `now`: move on to the one after.
    pub fn fire(&mut self, now: Instant) -> Due {
        let lag = now.saturating_duration_since(self.next);
        self.next += self.arrivals.next_gap();
        let behind = now.saturating_duration_since(self.next);
        let mut missed = 0;
        if behind > MAX_LATE {
            missed = 1 + (behind.as_secs_f64() * self.rate) as u64;
            self.next = now + self.arrivals.next_gap();
        }
        Due { lag, missed }
    }

    /// The RNG the arrivals are drawn from; it also draws prompts and request ids, so one
    /// seed makes a whole run repeatable.
    pub fn rng(&mut self) -> &mut StdRng {
        &mut self.arrivals.rng
    }
}

/// The arrival process of one target. Its RNG also draws the target's prompts and
/// request ids, so one seed makes a whole run repeatable.
#[derive(Debug)]
pub struct Arrivals {
    mean_gap: f64,
    burstiness: f64,
    gaps: Gamma<f64>,
    rng: StdRng,
}

impl Arrivals {
    pub fn new(rate: f64, burstiness: f64, seed: u64) -> Result<Self, rand_distr::GammaError> {
        Ok(Self {
            mean_gap: 1.0 / rate,
            burstiness,
            gaps: Gamma::new(burstiness, 1.0 / (rate * burstiness))?,
            rng: StdRng::seed_from_u64(seed),
        })
    }

    /// The same process at another rate; the RNG goes on.
    pub fn set_rate(&mut self, rate: f64) -> Result<(), rand_distr::GammaError> {
        self.gaps = Gamma::new(self.burstiness, 1.0 / (rate * self.burstiness))?;
        self.mean_gap = 1.0 / rate;
        Ok(())
    }

    /// Uniform in one mean gap.
    pub fn start_offset(&mut self) -> Duration {
        Duration::from_secs_f64(self.rng.random_range(0.0..self.mean_gap))
    }

    pub fn next_gap(&mut self) -> Duration {
        // A gamma sample is finite and positive for validated parameters; the fallback
        // keeps a pathological sample from stopping the schedule.
        Duration::try_from_secs_f64(self.gaps.sample(&mut self.rng))
            .unwrap_or(Duration::from_secs_f64(self.mean_gap))
    }
}

/// A target's seed derived from the global one, so targets differ but runs repeat.
pub fn target_seed(global: Option<u64>, name: &str) -> u64 {
    match global {
        // FNV-1a of the name, mixed with the global seed.
        Some(seed) => name.bytes().fold(0xcbf2_9ce4_8422_2325 ^ seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        }),
        None => rand::random(),
    }
}

#[cfg(test)]
mod tests;
