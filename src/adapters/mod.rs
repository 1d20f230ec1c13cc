//! The adapter check (docs/adapters.md): is each LoRA adapter a replica serves available,
//! really applied, and leaving the base model alone? A multi-LoRA server's worst failure
//! is silent: the request for an adapter succeeds, at normal speed, with the base model's
//! answer (vllm#55193), or a loaded adapter corrupts the base model's own requests
//! (vllm#42008). What a server and its controllers say (`vllm:lora_requests_info`, a
//! resource's status) is that an adapter is loaded, never that it is applied.
//!
//! Every interval a replica gets a round: its `/v1/models` read for the adapters whose
//! `parent` is the target's model (and the configured names); one greedy prompt, in turn,
//! asked of the base model and of the next `per_round` adapters. Each answer is compared
//! by the canary's rule with its reference (a majority of the block's replicas, as the
//! canary learns one: [`fleet`]), and an adapter's also with the base model's, which
//! tells `applied` from `base_served` ([`judge`]). The rounds' requests reach none of the
//! target's own series.

mod fleet;
mod judge;
mod listing;
mod llama;
mod plan;
mod record;
mod round;

pub use fleet::Fleets;
pub use record::{record, record_golden};

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::budget::Budget;
use crate::endpoint::adapters::AdapterSpec;
use crate::metrics::{AdapterSeries, SkipReason, TargetMetrics};
use crate::probe::Prober;
use crate::scheduler::Context;
use crate::ticker::{Ticker, Warmup};

/// The most rounds of a warm-up (past it, the interval's pace).
const WARM_MOST: usize = 256;

/// Where a check's outcomes go, and what the block's replicas share.
pub struct Sinks {
    pub series: AdapterSeries,
    /// The target's own series: a round its budget has no room for is a skipped arrival.
    pub metrics: TargetMetrics,
    pub budget: Option<Budget>,
    pub fleets: Arc<Fleets>,
    /// The status page's recent checks.
    pub status: Arc<crate::status::TargetStatus>,
    /// The family of replicas whose answers are compared: the block, the model, the
    /// version it serves and the settings that shape an answer.
    pub family: String,
}

/// The family key of a target's adapter check.
pub fn family(name: &str, model: &str, group: &str, spec: &AdapterSpec) -> String {
    format!(
        "{name}\u{0}{model}\u{0}{group}\u{0}{}\u{0}{}\u{0}{}",
        spec.max_tokens, spec.top_logprobs, spec.margin
    )
}

/// Run a round every interval until `stop`, each as a probe task of `ctx` (drained at
/// shutdown like every probe); a round still running when the next is due delays it.
pub async fn run(
    prober: Arc<Prober>,
    spec: Arc<AdapterSpec>,
    sinks: Sinks,
    stop: CancellationToken,
    ctx: Context,
) {
    // A replica just found is asked back to back, its first prompts at least, and on until
    // each adapter placed on it has had its warm-up (`plan::Replica::warmed`): every
    // adapter's references are learned, and a rollout's gate has its evidence, within
    // seconds, not after a turn of the adapters per prompt. An adapter placed later (a
    // controller loads adapters after the pod is ready) gets a warm-up of its own.
    let prompts = spec.prompts.len();
    let warmup = |least: usize| Warmup {
        least,
        most: WARM_MOST,
        at_once: 1,
    };
    let mut ticker = Ticker::with_warmup(spec.interval, warmup(prompts.min(8)));
    let mut pace = ticker.pace();
    let state = Arc::new(Mutex::new(plan::Replica::new(&prober.target, &sinks)));
    let sinks = Arc::new(sinks);
    let mut warming = true;
    while let Some((now, permit)) = ticker.tick(&stop).await {
        if !ticker.warming() {
            let mut replica = state.lock().unwrap_or_else(|e| e.into_inner());
            if warming {
                replica.warm_ended();
            } else if replica.needs_warmup() {
                // A warm-up for what was placed since, starting at once. This tick's
                // permit is the only round's (none runs now): dropped, so the warm-up's
                // rounds never run beside another.
                drop((replica, permit));
                ticker = Ticker::with_warmup(spec.interval, warmup(1));
                pace = ticker.pace();
                warming = true;
                continue;
            }
        }
        warming = ticker.warming();
        let cost = (1 + spec.per_round as u32) * spec.max_tokens;
        if let Some(budget) = &sinks.budget {
            if !budget.try_spend(now, cost) {
                sinks.metrics.skipped(SkipReason::Budget);
                continue;
            }
        }
        let (prober, spec, state, sinks, abort, pace) = (
            Arc::clone(&prober),
            Arc::clone(&spec),
            Arc::clone(&state),
            Arc::clone(&sinks),
            ctx.abort.clone(),
            Arc::clone(&pace),
        );
        ctx.probes.spawn(async move {
            let _permit = permit;
            match round::run(&prober, &spec, &state, &sinks, &abort).await {
                Some(true) => pace.succeeded(),
                Some(false) => pace.failed(),
                None => {}
            }
            let warmed = state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .warmed(spec.prompts.len());
            pace.settle(warmed);
        });
    }
}
