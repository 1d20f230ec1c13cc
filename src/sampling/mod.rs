//! The sampler check (docs/sampling.md): every interval, one round of sampled requests for
//! random words (a prompt with many plausible next tokens), each sampled token judged
//! against the distribution its request asked for. The canary asks greedily and so never
//! reaches a server's sampler; production traffic with `temperature > 0` always does.
//!
//! - With logprobs whose meaning is established for the server (`support`): each token
//!   is inside the set temperature, top-k, top-p and min-p allow, or `outside_support`,
//!   which no correct sampler draws; and its randomized PIT goes to a calibration window
//!   (`calibration`) that a wrong temperature, forced greedy decoding or a stuck random
//!   generator fails. A twin (the request again, short, without logprobs) drawn alike
//!   where the first answer's probabilities make that rare is `sampling_ignored`: the
//!   faults whose every token looks well drawn (a generator stuck for every request).
//! - Without (hosted APIs, TGI, TensorRT-LLM, SGLang): `samples` answers to one prompt
//!   at temperature 1; all identical is `sampling_ignored`.
//!
//! Rounds rotate through the configured settings, so each truncation is exercised. Their
//! requests reach none of the target's own series.

pub mod calibration;
mod round;
pub use twin::DIVERSE_MIN_CHARS;
pub mod support;
mod twin;

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::budget::Budget;
use crate::endpoint::sampling::{SamplingSpec, Server};
use crate::metrics::{SamplerSeries, SkipReason, TargetMetrics};
use crate::otlp::CheckTrace;
use crate::probe::Prober;
use crate::scheduler::Context;
use crate::status::TargetStatus;
use crate::ticker::{Ticker, Warmup};
use calibration::Window;

/// Where a check's outcomes go.
pub struct Sinks {
    pub series: SamplerSeries,
    /// The target's own series: a round its budget has no room for is a skipped arrival.
    pub metrics: TargetMetrics,
    pub budget: Option<Budget>,
    /// The status page's server semantics, recent rounds and last window.
    pub status: Arc<TargetStatus>,
}

/// What a target's rounds share: the server's semantics once known, and the window.
#[derive(Debug)]
struct State {
    server: Mutex<Option<Server>>,
    /// What a server said to list raw logprobs has shown it lists (`None`: not yet).
    listing: Mutex<Option<support::Semantics>>,
    window: Mutex<Calibration>,
    /// The status page's (the rounds report theirs to it).
    status: Arc<TargetStatus>,
}

#[derive(Debug)]
struct Calibration {
    window: Window,
    /// Windows in a row that failed.
    in_row: u32,
}

/// Run a round every interval until `stop`, each as a probe task of `ctx` (drained at
/// shutdown like every probe); a round still running when the next is due delays it.
pub async fn run(
    prober: Arc<Prober>,
    spec: Arc<SamplingSpec>,
    sinks: Sinks,
    stop: CancellationToken,
    ctx: Context,
) {
    // A replica just found (a rollout's new version) is asked every setting back to back,
    // one at a time, so a gate has each truncation exercised in seconds.
    let n = spec.settings.len();
    let warmup = Warmup {
        least: n,
        most: n,
        at_once: 1,
    };
    let mut ticker = Ticker::with_warmup(spec.interval, warmup);
    let pace = ticker.pace();
    let known = (spec.server != Server::Auto).then_some(spec.server);
    if let Some(known) = known {
        sinks.status.sampler_server(known.as_str(), "configured");
    }
    let state = Arc::new(State {
        server: Mutex::new(known),
        listing: Mutex::new(None),
        window: Mutex::new(Calibration {
            window: Window::new(spec.window, spec.alpha),
            in_row: 0,
        }),
        status: sinks.status,
    });
    let series = Arc::new(sinks.series);
    let mut round: u64 = 0;
    while let Some((now, permit)) = ticker.tick(&stop).await {
        let server = resolve(&prober, &state).await;
        let seeded = spec.seed_every > 0 && (round + 1) % u64::from(spec.seed_every) == 0;
        // What the round asks for at least: a twin that repeats the answer (rare), and
        // one that reaches past a preamble listed alone, ask more, uncharged.
        let cost = match server.semantics() {
            Some(_) => spec.max_tokens + spec.twin_tokens(),
            None => spec.max_tokens * spec.samples,
        } + if seeded { 2 * spec.max_tokens } else { 0 };
        if let Some(budget) = &sinks.budget {
            if !budget.try_spend(now, cost) {
                sinks.metrics.skipped(SkipReason::Budget);
                continue;
            }
        }
        let settings = spec.settings[(round % spec.settings.len() as u64) as usize];
        round += 1;
        let trace = CheckTrace::new(
            ctx.spans.clone(),
            ctx.sample(),
            &prober.target,
            format!("sampler {}", prober.target.model),
            "inferprobe.sampler.result",
        );
        let (prober, spec, state, series, abort, pace) = (
            Arc::clone(&prober),
            Arc::clone(&spec),
            Arc::clone(&state),
            Arc::clone(&series),
            ctx.abort.clone(),
            Arc::clone(&pace),
        );
        ctx.probes.spawn(async move {
            let _permit = permit;
            let asked = round::Asked {
                spec: &spec,
                settings,
                server,
                seeded,
            };
            match round::run(&prober, asked, (&state, &series), &abort, trace).await {
                Some(true) => pace.succeeded(),
                Some(false) => pace.failed(),
                None => {}
            }
        });
    }
}

/// The server's semantics: configured, or read once from `/v1/models`'s `owned_by` (asked
/// again each round until it answers).
async fn resolve(prober: &Prober, state: &State) -> Server {
    if let Some(known) = *state.server.lock().unwrap_or_else(|e| e.into_inner()) {
        return known;
    }
    let target = &prober.target;
    let server = match prober.model_entry().await {
        Ok(entry) => {
            let owned_by = entry
                .as_ref()
                .and_then(|m| m.get("owned_by"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            let server = Server::from_owned_by(owned_by);
            let said = match entry {
                Some(_) => format!("/v1/models: owned_by {owned_by:?}"),
                None => "/v1/models lists no model".to_owned(),
            };
            state.status.sampler_server(server.as_str(), said);
            tracing::info!(target = %target.id, owned_by, server = server.as_str(),
                "sampler check: the server's sampling semantics{}",
                if server.semantics().is_none() { " are not established: the diversity test only (docs/sampling.md)" } else { "" });
            server
        }
        Err(e) => {
            tracing::debug!(target = %target.id, error = %e, "sampler check: /v1/models unread; this round compares answers");
            let unread = format!(
                "/v1/models unread ({}): this round compares answers; asked again next round",
                crate::report::redact(&e, target)
            );
            state
                .status
                .sampler_server(Server::Unknown.as_str(), unread);
            return Server::Unknown;
        }
    };
    *state.server.lock().unwrap_or_else(|e| e.into_inner()) = Some(server);
    server
}
