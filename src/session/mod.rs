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
mod pages;
pub mod script;
mod trace;
mod turns;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
    /// Whether each refusal the pages are about still holds.
    pub pages: pages::Pages,
    /// The greatest common divisor of the cached-token counts seen (0: none yet): the
    /// cache's block, or a multiple of it, where `block_tokens` is unset.
    pub block: AtomicU64,
}

impl Seen {
    /// A cached-token count, for the block a cache serves in: a cache of whole blocks
    /// reports multiples of its block, so their greatest common divisor is the block or a
    /// multiple of it. A larger block judges fewer turns, never a healthy one a miss; the
    /// unset `block_tokens` (1) judged them misses on a block cache.
    pub fn saw_cached(&self, cached: u64) {
        if cached > 0 {
            let _ = self
                .block
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                    Some(gcd(b, cached))
                });
        }
    }

    /// The block inferred so far (1 before any count).
    pub fn inferred_block(&self) -> u32 {
        u32::try_from(self.block.load(Ordering::Relaxed).max(1)).unwrap_or(u32::MAX)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    match b {
        0 => a,
        _ => gcd(b, a % b),
    }
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
    // A target started again (a reload) starts with nothing refused, as its state does.
    for refusal in crate::metrics::Refusal::ALL {
        sinks.series.refusal_open(refusal, false);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_inferred_from_the_cached_counts() {
        let seen = Seen::default();
        assert_eq!(seen.inferred_block(), 1);
        seen.saw_cached(0);
        assert_eq!(seen.inferred_block(), 1);
        // One count: its multiple of the block.
        seen.saw_cached(768);
        assert_eq!(seen.inferred_block(), 768);
        seen.saw_cached(384);
        seen.saw_cached(1152);
        assert_eq!(seen.inferred_block(), 384);
        seen.saw_cached(640);
        assert_eq!(seen.inferred_block(), 128);
        // Exact counts (llama.cpp's cache_n) bring it down to what they share.
        seen.saw_cached(129);
        assert_eq!(seen.inferred_block(), 1);
    }
}
