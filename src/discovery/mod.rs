//! Discovery: targets found at run time, watched continuously. A `[[discovery]]` block turns
//! what one source sees (pods, a Service's EndpointSlices, an InferencePool's members, a
//! file_sd file) into targets built from the block's template.
//!
//! Each source (one file each) reports the *complete* set it sees now, as [`Found`]s, and
//! whether it is healthy. The block's runner ([`run_block`]) caps the set at `max_targets`,
//! asks endpoints that name no model for theirs (`/v1/models`), builds the targets and
//! hands the daemon the block's whole set ([`Update`]); the supervisor then starts, restarts
//! and stops targets exactly as on a reload. A source that fails keeps its last set: the
//! block's targets stay probed, `inferprobe_discovery_up` drops to 0, and the source
//! retries with backoff.
//!
//! The probe's own fleet ([`fleet`]) is watched the same way: its Ready pod count divides
//! every `fleet_rate`.

mod endpointslices;
mod file;
pub mod fleet;
mod inferencepool;
mod kube;
mod models;
mod pods;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Discovery, Found, Source};
use crate::metrics::{DiscoveryMetrics, Metrics};
use crate::target::Target;

/// A block's complete set of targets, replacing the previous one.
#[derive(Debug)]
pub struct Update {
    /// Which start of discovery produced it: after a reload, stale updates are ignored.
    pub generation: u64,
    pub block: String,
    pub targets: Vec<Arc<Target>>,
}

/// Endpoints whose model could not be learnt yet are asked again this often.
const MODEL_RETRY: Duration = Duration::from_secs(15);

/// Start every block of `config`, and the fleet watcher. Everything stops with `stop`.
pub fn start(
    config: &Config,
    metrics: &Metrics,
    generation: u64,
    updates: mpsc::Sender<Update>,
    fleet: watch::Sender<usize>,
    stop: &CancellationToken,
) {
    let needs_kube = config.kubernetes.fleet.is_some()
        || config.discovery.iter().any(|b| b.source.is_kubernetes());
    let client = needs_kube.then(|| kube::Connector::new(config.kubernetes.clone(), stop.clone()));
    for block in &config.discovery {
        let (sets, found) = watch::channel(None);
        let block_metrics = metrics.discovery(&block.name);
        let health = Health::new(&block.name, block_metrics.up.clone());
        match &block.source {
            Source::File { path, refresh } => {
                tokio::spawn(file::run(
                    path.clone(),
                    *refresh,
                    block.scheme,
                    sets,
                    health,
                    stop.clone(),
                ));
            }
            _ => {
                if let Some(client) = &client {
                    tokio::spawn(kube::run_source(
                        Arc::clone(block),
                        client.clone(),
                        sets,
                        health,
                        stop.clone(),
                    ));
                }
            }
        }
        tokio::spawn(run_block(
            Arc::clone(block),
            found,
            block_metrics,
            generation,
            updates.clone(),
            stop.clone(),
        ));
    }
    if let (Some(settings), Some(client)) = (&config.kubernetes.fleet, client) {
        tokio::spawn(fleet::run(
            settings.clone(),
            client,
            fleet,
            metrics.fleet_size(),
            stop.clone(),
        ));
    }
}

/// Whether a source is answering, in the block's `discovery_up` and the log: one line when
/// it starts failing (and when the reason changes), one when it recovers.
pub struct Health {
    block: String,
    up: prometheus_client::metrics::gauge::Gauge,
    failing: Option<String>,
}

impl Health {
    pub fn new(block: &str, up: prometheus_client::metrics::gauge::Gauge) -> Self {
        Self {
            block: block.to_owned(),
            up,
            failing: Some(String::new()),
        }
    }

    pub fn ok(&mut self) {
        if let Some(reason) = self.failing.take() {
            if !reason.is_empty() {
                tracing::info!(discovery = %self.block, "discovery recovered");
            }
        }
        self.up.set(1);
    }

    pub fn failed(&mut self, reason: String) {
        self.up.set(0);
        if self.failing.as_deref() != Some(reason.as_str()) {
            tracing::warn!(discovery = %self.block, %reason,
                "discovery failing; its last known targets are kept and probed");
            self.failing = Some(reason);
        }
    }
}

/// Turn a source's sets into the block's targets, until `stop`.
async fn run_block(
    block: Arc<Discovery>,
    mut sets: watch::Receiver<Option<Vec<Found>>>,
    metrics: DiscoveryMetrics,
    generation: u64,
    updates: mpsc::Sender<Update>,
    stop: CancellationToken,
) {
    let mut models = models::Models::new();
    let mut refused = BTreeSet::new();
    let mut unresolved = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            changed = sets.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(MODEL_RETRY), if unresolved => {}
        }
        let Some(mut found) = sets.borrow_and_update().clone() else {
            continue;
        };
        // A wrong selector must not probe a thousand pods: the first max_targets (in key
        // order, so the choice is stable) are probed, the rest refused and counted once.
        found.sort_by(|a, b| a.key.cmp(&b.key));
        let over = found.split_off(found.len().min(block.max_targets));
        for f in &over {
            if refused.insert(f.key.clone()) {
                metrics.refused.inc();
            }
        }
        if !over.is_empty() {
            tracing::warn!(discovery = %block.name, refused = over.len(), max_targets = block.max_targets,
                "more endpoints than max_targets; the rest are not probed");
        }
        refused.retain(|key| over.iter().any(|f| &f.key == key));
        let needs_model: Vec<&Found> = found
            .iter()
            .filter(|f| f.model.is_none() && !block.has_model())
            .collect();
        models.resolve(&needs_model, &block.name).await;
        unresolved = false;
        let mut targets = Vec::with_capacity(found.len());
        for f in &found {
            let model = models.get(&f.url);
            if f.model.is_none() && !block.has_model() && model.is_none() {
                unresolved = true;
                continue;
            }
            match block.target(f, model) {
                Ok(target) => targets.push(Arc::new(target)),
                Err(e) => tracing::warn!(discovery = %block.name, endpoint = %f.key, error = %e,
                    "cannot build a target for a discovered endpoint"),
            }
        }
        metrics.targets.set(targets.len() as i64);
        let update = Update {
            generation,
            block: block.name.clone(),
            targets,
        };
        if updates.send(update).await.is_err() {
            return;
        }
    }
}
