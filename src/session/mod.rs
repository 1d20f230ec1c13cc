//! The session check (docs/sessions.md): at its own interval, a conversation an agent
//! would have, the whole history sent every turn: a question that needs the tool, the
//! tool's result (with a secret the answer must quote), a follow-up after a human's think
//! time, two lookups at once and their results, an optional turn after a long gap, and
//! now and then a turn padded to a depth. Every turn is judged (`judge`), timed by kind,
//! and the later ones are judged for the cache: did the previous turn's prompt come back
//! cached. Where the gateway names the backend, a switch of backend within a session is
//! counted. A session's requests run as probe tasks of the target (drained at shutdown
//! like every probe); they reach none of the target's own series.

mod judge;
pub mod script;
mod turns;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use http::{HeaderMap, HeaderName};
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
        ctx.probes.spawn(async move {
            let _permit = permit;
            turns::session(&prober, &spec, &seen, &series, (&stop, &abort)).await;
        });
    }
}

/// The backend a response names: the first of `names` it carries. llm-d's
/// `x-session-token` is the base64 of the pod's `namespace/name`, read as that.
pub fn served_by(headers: &HeaderMap, names: &[HeaderName]) -> Option<String> {
    use base64::Engine;
    names.iter().find_map(|name| {
        let value = headers.get(name)?.to_str().ok()?.trim();
        if value.is_empty() {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(value)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .filter(|s| s.contains('/') && s.chars().all(|c| c.is_ascii_graphic()));
        Some(crate::error::snippet(
            &decoded.unwrap_or_else(|| value.to_owned()),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_is_read_from_the_first_header_that_names_it() {
        let mut headers = HeaderMap::new();
        let names = [
            HeaderName::from_static("x-served-by"),
            HeaderName::from_static("x-session-token"),
        ];
        assert_eq!(served_by(&headers, &names), None);
        headers.insert("x-session-token", "ZGVmYXVsdC92bGxtLTA=".parse().unwrap());
        assert_eq!(
            served_by(&headers, &names).as_deref(),
            Some("default/vllm-0")
        );
        headers.insert("x-served-by", "replica-2".parse().unwrap());
        assert_eq!(served_by(&headers, &names).as_deref(), Some("replica-2"));
        // A plain name that happens to be valid base64 stays itself.
        headers.insert("x-served-by", "abcd".parse().unwrap());
        assert_eq!(served_by(&headers, &names).as_deref(), Some("abcd"));
    }
}
