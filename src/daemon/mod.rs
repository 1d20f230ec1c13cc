//! The daemon: wires config, metrics, the supervisor and the HTTP server; reloads on
//! request; drains on shutdown.
//!
//! [`run`] takes an already-bound listener, a configuration and a [`Shutdown`] handle, so
//! tests start the whole daemon in-process on 127.0.0.1:0 and stop it without signals.
//! [`run_reloadable`] also takes a loader, called again on SIGHUP, `POST /-/reload`, or a
//! change of the watched file. A configuration that fails to load or apply leaves the
//! running one in place, is logged with its key and reason, and sets
//! `config_last_reload_successful` to 0.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Config, ConfigError};
use crate::metrics::{Metrics, RuntimeCollector};
use crate::otlp::Spans;
use crate::scheduler::Context;
use crate::scrape_probe::ScrapeProbes;
use crate::server::{self, ReloadRequest, State};
use crate::shutdown::Shutdown;
use crate::status::Board;
use crate::supervisor::Supervisor;

mod targets;
use targets::Targets;

/// Loads the configuration, at start and on every reload.
pub type Loader = Arc<dyn Fn() -> Result<Config, ConfigError> + Send + Sync>;

/// Asks a running daemon to reload (SIGHUP does this).
#[derive(Clone, Debug, Default)]
pub struct ReloadTrigger(Arc<Notify>);

impl ReloadTrigger {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn trigger(&self) {
        self.0.notify_one();
    }
}

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

/// Run a fixed configuration until `shutdown` completes.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: Shutdown,
) -> anyhow::Result<DrainReport> {
    serve(listener, config, None, ReloadTrigger::new(), None, shutdown).await
}

/// Run `config` (as `loader` loaded it), reloading with `loader` on `trigger`,
/// `POST /-/reload`, or (when the config asks for it) a change of `watched`.
pub async fn run_reloadable(
    listener: TcpListener,
    config: Config,
    loader: Loader,
    trigger: ReloadTrigger,
    watched: Option<PathBuf>,
    shutdown: Shutdown,
) -> anyhow::Result<DrainReport> {
    serve(listener, config, Some(loader), trigger, watched, shutdown).await
}

async fn serve(
    listener: TcpListener,
    config: Config,
    loader: Option<Loader>,
    trigger: ReloadTrigger,
    watched: Option<PathBuf>,
    shutdown: Shutdown,
) -> anyhow::Result<DrainReport> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    metrics.set_histograms(config.histograms);
    registry.register_collector(Box::new(RuntimeCollector::new(
        tokio::runtime::Handle::current(),
    )));
    let board = Arc::new(Board::default());
    let (fleet, fleet_size) = watch::channel(1usize);
    // The span exporter runs until the probes are drained, then flushes once.
    let spans_stop = CancellationToken::new();
    let (spans, spans_task) = match &config.tracing {
        Some(export) => {
            let (spans, task) = Spans::start(export, metrics.span_export(), spans_stop.clone())
                .map_err(anyhow::Error::msg)?;
            (Some(spans), Some(task))
        }
        None => (None, None),
    };
    let ctx = Context {
        spans,
        probes: TaskTracker::new(),
        abort: shutdown.immediate().child_token(),
        recorded: Arc::new(AtomicU64::new(0)),
        cut: Arc::new(AtomicU64::new(0)),
        fleet: fleet_size,
    };
    let scrape_probes = Arc::new(ScrapeProbes::new(
        tokio::runtime::Handle::current(),
        ctx.abort.clone(),
    ));
    let supervisor = Supervisor::new(
        metrics.clone(),
        Arc::clone(&board),
        ctx.clone(),
        CancellationToken::new(),
    )
    .with_scrape_probes(Arc::clone(&scrape_probes));
    let (updates, mut discovered) = mpsc::channel(64);
    // A bad target fails the start, loudly, before anything is served.
    let mut targets = Targets::start(supervisor, metrics.clone(), &config, updates, fleet)?;
    metrics.config_loaded(true);

    let (reloads, mut reload_requests) = mpsc::channel::<ReloadRequest>(4);
    let state = Arc::new(
        State::new(
            registry,
            metrics.clone(),
            Arc::clone(&board),
            targets.view(),
            loader.is_some().then_some(reloads),
        )
        .with_scrape_probes(scrape_probes),
    );
    let server_stop = CancellationToken::new();
    let address = listener.local_addr()?;
    let server = server::spawn(listener, Arc::clone(&state), server_stop.clone())?;
    tracing::info!(%address, "serving /, /metrics, /probe, /healthz, /readyz, /config, /-/reload");
    // The config file and the files it reads (API keys, TLS): kept current across reloads.
    let watched_files = Arc::new(std::sync::RwLock::new(Vec::new()));
    if let (Some(interval), Some(path)) = (config.watch, watched) {
        set_watched(&watched_files, &path, &config);
        let files = Arc::clone(&watched_files);
        tokio::spawn(watch(
            files,
            interval,
            trigger.clone(),
            shutdown.graceful().clone(),
        ));
    }
    state.set_ready(true);

    let mut grace = config.shutdown_grace;
    loop {
        let respond = tokio::select! {
            () = shutdown.graceful().cancelled() => break,
            // A closed channel (no loader: `run`, not `run_reloadable`) ends this branch;
            // matching `None` here would loop on it at once, forever: a core at 100%.
            Some(request) = reload_requests.recv() => request,
            () = trigger.0.notified() => None,
            Some(update) = discovered.recv() => {
                let block = update.block.clone();
                match targets.discovered(update) {
                    Some(Ok(changes)) if !changes.is_empty() => {
                        tracing::info!(discovery = %block, %changes, "discovered targets changed");
                    }
                    Some(Err(e)) => tracing::error!(discovery = %block, "cannot apply discovered targets: {e:#}"),
                    _ => {}
                }
                state.set_config(targets.view());
                continue;
            }
        };
        let Some(loader) = &loader else { continue };
        let result = reload(loader, &mut targets, &metrics, &state, config.listen);
        if let Ok(new) = &result {
            grace = new.shutdown_grace;
            // The guard must be gone before set_watched takes the write lock.
            let config_file = watched_files
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .first()
                .cloned();
            if let Some(path) = config_file {
                set_watched(&watched_files, &path, new);
            }
        }
        if let Some(respond) = respond {
            let _ = respond.send(result.map(|_| ()));
        }
    }
    state.set_ready(false);
    targets.stop().await;
    let report = drain(&ctx, &shutdown, grace).await;
    spans_stop.cancel();
    if let Some(task) = spans_task {
        // The last batch, briefly: a collector that is down must not hold the exit.
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    server_stop.cancel();
    server.join().await;
    Ok(report)
}

/// The config file first, then the files the configuration reads.
fn set_watched(
    files: &std::sync::RwLock<Vec<PathBuf>>,
    config_file: &std::path::Path,
    config: &Config,
) {
    let mut files = files.write().unwrap_or_else(|e| e.into_inner());
    *files = std::iter::once(config_file.to_owned())
        .chain(config.files.iter().cloned())
        .collect();
}

/// Load and apply a new configuration; on any error keep the running one.
fn reload(
    loader: &Loader,
    targets: &mut Targets,
    metrics: &Metrics,
    state: &State,
    listen: std::net::SocketAddr,
) -> Result<Config, String> {
    let outcome = loader()
        .map_err(|e| {
            tracing::error!(key = %e.key, reason = %e.reason, "reload failed; keeping the running configuration: {e}");
            e.to_string()
        })
        .and_then(|config| match targets.reconfigure(&config) {
            Ok(changes) => {
                if config.listen != listen {
                    tracing::warn!(old = %listen, new = %config.listen, "a new listen address applies after a restart");
                }
                tracing::info!(%changes, "configuration reloaded");
                metrics.set_histograms(config.histograms);
                state.set_config(targets.view());
                Ok(config)
            }
            Err(e) => {
                tracing::error!("reload failed; keeping the running configuration: {e:#}");
                Err(format!("{e:#}"))
            }
        });
    metrics.config_loaded(outcome.is_ok());
    outcome
}

/// Trigger a reload when the contents of a watched file change (Kubernetes swaps a
/// Secret's files by symlink, so contents, not modification times, are compared).
async fn watch(
    files: Arc<std::sync::RwLock<Vec<PathBuf>>>,
    interval: Duration,
    trigger: ReloadTrigger,
    stop: CancellationToken,
) {
    let read = || {
        let files = files.read().unwrap_or_else(|e| e.into_inner()).clone();
        files
            .into_iter()
            .map(|path| {
                let contents = std::fs::read(&path).ok();
                (path, contents)
            })
            .collect::<Vec<_>>()
    };
    let mut last = read();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        let now = read();
        if now != last {
            let changed = now
                .iter()
                .find(|f| !last.contains(f))
                .map(|(p, _)| p.display().to_string());
            tracing::info!(file = changed.unwrap_or_default(), "watched file changed");
            last = now;
            trigger.trigger();
        }
    }
}

async fn drain(ctx: &Context, shutdown: &Shutdown, grace: Duration) -> DrainReport {
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
