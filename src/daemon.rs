//! The daemon: wires config, metrics, schedulers and the HTTP server, and drains on
//! shutdown.
//!
//! [`run`] takes an already-bound listener and a [`Shutdown`] handle, so tests start the
//! whole daemon in-process on 127.0.0.1:0 and stop it without signals.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::probe::Prober;
use crate::scheduler::{self, Context};
use crate::server::{self, State};
use crate::shutdown::Shutdown;

/// How the drain went, for the final log line and for tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainReport {
    /// Probes in flight when the shutdown began.
    pub in_flight: u64,
    /// Of those, probes that finished and were recorded in the metrics.
    pub completed: u64,
    /// Of those, probes stopped by the end of the grace period (not counted in metrics).
    pub cut: u64,
}

/// Run the daemon until `shutdown` completes.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: Shutdown,
) -> anyhow::Result<DrainReport> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    metrics.config_loaded(true);

    // Build every client before serving anything: a bad target fails the start, loudly.
    let mut probers = Vec::with_capacity(config.targets.len());
    for target in &config.targets {
        let prober = Prober::new(Arc::clone(target)).map_err(|e| {
            anyhow::anyhow!("target {}: cannot build HTTP client: {e}", target.name)
        })?;
        probers.push(Arc::new(prober));
    }

    let state = Arc::new(State::new(registry, metrics.clone()));
    let server_stop = CancellationToken::new();
    let address = listener.local_addr()?;
    let server = tokio::spawn(server::serve(
        listener,
        Arc::clone(&state),
        server_stop.clone(),
    ));
    tracing::info!(%address, "serving /metrics, /healthz, /readyz");

    let ctx = Context {
        probes: TaskTracker::new(),
        abort: shutdown.immediate().child_token(),
        recorded: Arc::new(AtomicU64::new(0)),
        cut: Arc::new(AtomicU64::new(0)),
    };
    let schedulers = TaskTracker::new();
    for prober in probers {
        let target = &prober.target;
        tracing::info!(
            target = %target.name,
            backend = %target.backend,
            url = %target.url,
            model = %target.model,
            rate = target.rate,
            "probing"
        );
        let metrics = metrics.target(target);
        let seed = scheduler::target_seed(config.seed, &target.name);
        let stop = shutdown.graceful().clone();
        schedulers.spawn(scheduler::run(prober, metrics, seed, stop, ctx.clone()));
    }
    schedulers.close();
    state.set_ready(true);

    shutdown.graceful().cancelled().await;
    state.set_ready(false);
    schedulers.wait().await;
    let report = drain(&ctx, &shutdown, config.shutdown_grace).await;
    server_stop.cancel();
    let _ = server.await;
    Ok(report)
}

async fn drain(ctx: &Context, shutdown: &Shutdown, grace: std::time::Duration) -> DrainReport {
    ctx.probes.close();
    let in_flight = ctx.probes.len() as u64;
    let recorded_before = ctx.recorded.load(Ordering::Relaxed);
    if in_flight > 0 {
        tracing::info!(in_flight, ?grace, "waiting for in-flight probes");
    }
    tokio::select! {
        () = ctx.probes.wait() => {}
        () = tokio::time::sleep(grace) => {
            tracing::warn!(remaining = ctx.probes.len(), "grace period over; cutting probes");
        }
        () = shutdown.immediate().cancelled() => {}
    }
    ctx.abort.cancel();
    ctx.probes.wait().await;
    let report = DrainReport {
        in_flight,
        completed: ctx.recorded.load(Ordering::Relaxed) - recorded_before,
        cut: ctx.cut.load(Ordering::Relaxed),
    };
    tracing::info!(
        in_flight = report.in_flight,
        completed = report.completed,
        cut = report.cut,
        "shutdown complete"
    );
    report
}
