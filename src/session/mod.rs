//! The session check (docs/sessions.md): at its own interval, a conversation an agent
//! would have, the whole history sent every turn: a question that needs the tool, the
//! tool's result (with a secret the answer must quote), a follow-up after a human's think
//! time, two lookups at once and their results, an optional turn after a long gap, and
//! now and then a turn padded to a depth. Every turn is judged (`judge`), timed by kind,
//! and the later ones are judged for the cache: did the previous turn's prompt come back
//! cached. Where the gateway names the backend, a switch of backend within a session is
//! counted. A session's requests run as probe tasks of the target (drained at shutdown
//! like every probe); they reach none of the target's own series.

mod depth;
mod judge;
pub mod script;
mod trace;
mod turns;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use tokio_util::sync::CancellationToken;

use crate::budget::Budget;
use crate::endpoint::session::SessionSpec;
use crate::metrics::{SessionSeries, SkipReason, TargetMetrics};
use crate::probe::Prober;
use crate::scheduler::Context;
use crate::ticker::Ticker;
pub use judge::{Expect, Reason, Turn, Verdict, judge};
pub use turns::{CacheJudge, judge_cache};

/// Where a check's outcomes go.
pub struct Sinks {
    pub series: SessionSeries,
    /// The target's own series: a session its budget has no room for is a skipped arrival.
    pub metrics: TargetMetrics,
    /// The target's `max_output_tokens_per_hour`, shared with its workload.
    pub budget: Option<Budget>,
}

/// What a target's sessions have shown so far, shared by its sessions.
#[derive(Debug, Default)]
pub struct Seen {
    /// The server reported cached tokens: from then on, usage without a count is none.
    pub reported: AtomicBool,
    /// Sessions started: every other one omits the affinity headers.
    pub started: AtomicU64,
    /// A session's counts were set aside (said once in the log).
    pub set_aside: AtomicBool,
}

/// Run a session every interval until `stop`; a session still running when the next is
/// due delays it.
pub async fn run(
    prober: Arc<Prober>,
    spec: Arc<SessionSpec>,
    sinks: Sinks,
    stop: CancellationToken,
    ctx: Context,
) {
    let mut ticker = Ticker::new(spec.interval);
    let seen = Arc::new(Seen::default());
    let series = sinks.series;
    while let Some((now, permit)) = ticker.tick(&stop).await {
        if let Some(budget) = &sinks.budget {
            let turns = spec.turns() as u32 + u32::from(spec.depth.is_some());
            if !budget.try_spend(now, turns.saturating_mul(spec.max_tokens)) {
                sinks.metrics.skipped(SkipReason::Budget);
                continue;
            }
        }
        let (prober, spec, seen, series, abort, stop) = (
            Arc::clone(&prober),
            Arc::clone(&spec),
            Arc::clone(&seen),
            series.clone(),
            ctx.abort.clone(),
            stop.clone(),
        );
        // One sampling decision per session: its turns are one trace.
        let trace = trace::SessionTrace::new(&ctx, &prober.target);
        ctx.probes.spawn(async move {
            let _permit = permit;
            turns::session(&prober, &spec, &seen, &series, (&stop, &abort), trace).await;
        });
    }
}
