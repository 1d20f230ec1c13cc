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
pub mod file;
pub mod fleet;
mod health;
mod inferencepool;
mod kube;
mod models;
mod owner;
mod pods;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::canary::votes::Pools;
use crate::config::{Config, Discovery, Found, Source};
use crate::endpoint::Target;
use crate::metrics::{DiscoveryMetrics, Metrics};
use health::Health;

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
    (updates, pools): (mpsc::Sender<Update>, &Arc<Pools>),
    fleet: watch::Sender<usize>,
    stop: &CancellationToken,
) {
    let needs_kube = config.kubernetes.fleet.is_some()
        || config.discovery.iter().any(|b| b.source.is_kubernetes());
    let client = needs_kube.then(|| kube::Connector::new(config.kubernetes.clone(), stop.clone()));
    let mut watched: Vec<&str> = Vec::new();
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
                    tokio::spawn(run_source(
                        Arc::clone(block),
                        client.clone(),
                        sets,
                        health,
                        stop.clone(),
                    ));
                    match block.pool_wide() {
                        Some(wide) => {
                            watched.push(&block.name);
                            let pools = Arc::clone(pools);
                            let up = metrics.discovery_pool_up(&block.name);
                            let health = Health::new(&format!("{}/pool", block.name), up);
                            tokio::spawn(run_pool(
                                wide,
                                client.clone(),
                                pools,
                                health,
                                stop.clone(),
                            ));
                        }
                        None => metrics.remove_discovery_pool(&block.name),
                    }
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
    // Pools of blocks removed, or that watch theirs no more, are forgotten.
    pools.keep_only(&watched);
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

/// Watch a node-local block's whole pool (its source without the node filter) and keep its
/// replicas in `pools`, for canary votes ([`crate::canary::votes`]). Replicas whose model
/// is not named (by a label, an annotation or the template) are left out: asking each for
/// its `/v1/models` is not worth a vote.
async fn run_pool(
    wide: Discovery,
    connector: kube::Connector,
    pools: Arc<Pools>,
    health: Health,
    stop: CancellationToken,
) {
    let wide = Arc::new(wide);
    let (sets, mut found) = watch::channel(None);
    let mut built: HashMap<String, (Found, Arc<Target>)> = HashMap::new();
    tokio::spawn(run_source(
        Arc::clone(&wide),
        connector,
        sets,
        health,
        stop.clone(),
    ));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            changed = found.changed() => if changed.is_err() { return },
        }
        let Some(set) = found.borrow_and_update().clone() else {
            continue;
        };
        let named = set.iter().filter(|f| f.model.is_some() || wide.has_model());
        built = rebuild(built, named, |f| wide.target(f, None).ok().map(Arc::new));
        let targets = built.values().map(|(_, t)| Arc::clone(t)).collect();
        pools.set(&wide.name, targets);
    }
}

/// A pool's targets for the replicas `found` now, built only where a replica is new or
/// changed: a build validates the template's canary, reading its prompts and golden file
/// from disk, and a pool event (any replica on any node) must not do that for every one.
fn rebuild<'a>(
    mut built: HashMap<String, (Found, Arc<Target>)>,
    found: impl Iterator<Item = &'a Found>,
    mut build: impl FnMut(&Found) -> Option<Arc<Target>>,
) -> HashMap<String, (Found, Arc<Target>)> {
    let mut next = HashMap::new();
    for f in found {
        let target = match built.remove(&f.key) {
            Some((was, target)) if was == *f => target,
            _ => match build(f) {
                Some(target) => target,
                None => continue,
            },
        };
        next.insert(f.key.clone(), (f.clone(), target));
    }
    next
}

/// Run the block's Kubernetes source until `stop`.
pub async fn run_source(
    block: Arc<Discovery>,
    connector: kube::Connector,
    sets: watch::Sender<Option<Vec<Found>>>,
    mut health: Health,
    stop: CancellationToken,
) {
    let Some(client) = connector.client(&mut health).await else {
        return;
    };
    match &block.source {
        Source::Pods { .. } => pods::run(&block, client, &sets, &mut health, &stop).await,
        Source::EndpointSlices { .. } => {
            endpointslices::run(&block, client, &sets, &mut health, &stop).await;
        }
        Source::InferencePool { .. } => {
            inferencepool::run(&block, client, &sets, &mut health, &stop).await;
        }
        Source::File { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 31, item 10: a pool event rebuilt every replica's target, re-reading the
    /// template's prompts and golden file for each. Only new or changed ones are built.
    #[test]
    fn a_pool_event_builds_only_what_changed() {
        let config = crate::config::validate(&crate::config::RawConfig {
            targets: vec![crate::config::RawTarget {
                name: Some("t".into()),
                url: Some("http://127.0.0.1:1".into()),
                model: Some("m".into()),
                ..Default::default()
            }],
            ..Default::default()
        })
        .unwrap();
        let target = Arc::clone(&config.targets[0]);
        let found = |key: &str, url: &str| Found {
            key: key.into(),
            url: url.into(),
            model: Some("m".into()),
            labels: Default::default(),
            origin: String::new(),
            revision: None,
            workload: None,
            created: None,
        };
        let builds = std::cell::Cell::new(0);
        let build = |_: &Found| {
            builds.set(builds.get() + 1);
            Some(Arc::clone(&target))
        };
        let first = [found("a", "http://a"), found("b", "http://b")];
        let built = rebuild(HashMap::new(), first.iter(), build);
        let again = [
            found("a", "http://a"),
            found("b", "http://b2"),
            found("c", "http://c"),
        ];
        let built = rebuild(built, again.iter(), build);
        assert_eq!(
            builds.get(),
            4,
            "a and b at first; then b (moved) and c, not a again"
        );
        assert_eq!(built.len(), 3);
        let built = rebuild(built, again[..1].iter(), build);
        assert_eq!(
            (builds.get(), built.len()),
            (4, 1),
            "gone replicas leave, nothing is built"
        );
    }
}
