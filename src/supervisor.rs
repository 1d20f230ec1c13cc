//! Runs one scheduler per target and applies a new configuration target by target.
//!
//! A target whose fingerprint is unchanged keeps running untouched. An added target starts,
//! a removed one stops and its series disappear from /metrics, a changed one restarts
//! alone: its series continue when its labels (and SLO buckets) are the same, and are
//! replaced when they are not. Probes already in flight when their target stops finish
//! and are recorded (into series that may no longer be exported).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::canary::{self, books::Books};
use crate::endpoint::Target;
use crate::metrics::{Metrics, TargetLabels};
use crate::probe::Prober;
use crate::scheduler::{self, Context, Sinks};
use crate::status::Board;

/// What applies to every target of a configuration.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub status_page_probes: usize,
    pub seed: Option<u64>,
}

impl From<&crate::config::Config> for Settings {
    fn from(config: &crate::config::Config) -> Self {
        Self {
            status_page_probes: config.status_page_probes,
            seed: config.seed,
        }
    }
}

struct Running {
    target: Arc<Target>,
    labels: TargetLabels,
    stop: CancellationToken,
}

/// What an apply changed, by target name.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub restarted: Vec<String>,
    pub unchanged: usize,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.restarted.is_empty()
    }
}

impl std::fmt::Display for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} added {:?}, {} removed {:?}, {} restarted {:?}, {} unchanged",
            self.added.len(),
            self.added,
            self.removed.len(),
            self.removed,
            self.restarted.len(),
            self.restarted,
            self.unchanged
        )
    }
}

pub struct Supervisor {
    metrics: Metrics,
    board: Arc<Board>,
    ctx: Context,
    /// Cancelled at shutdown: stops every scheduler.
    shutdown: CancellationToken,
    schedulers: TaskTracker,
    running: BTreeMap<String, Running>,
    /// Canary answers by group (a discovery block's replicas, or a static target).
    books: Arc<Books>,
    /// What the adapter checks of a block's replicas share.
    adapter_fleets: Arc<crate::adapters::Fleets>,
    /// Node-local blocks' pools, for votes (filled by discovery).
    pools: Arc<canary::votes::Pools>,
    /// The running targets `/probe` may probe.
    scrape_probes: Option<Arc<crate::scrape_probe::ScrapeProbes>>,
}

impl Supervisor {
    pub fn new(
        metrics: Metrics,
        board: Arc<Board>,
        ctx: Context,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            metrics,
            board,
            ctx,
            shutdown,
            schedulers: TaskTracker::new(),
            running: BTreeMap::new(),
            books: Arc::default(),
            adapter_fleets: Arc::default(),
            pools: Arc::default(),
            scrape_probes: None,
        }
    }

    /// Keep `probes` told which targets run, for `/probe`.
    pub fn with_scrape_probes(mut self, probes: Arc<crate::scrape_probe::ScrapeProbes>) -> Self {
        self.scrape_probes = Some(probes);
        self
    }

    /// Make the running targets `targets` (configured and discovered, by id). Every new or
    /// changed target's HTTP client is built first: if one fails, nothing changes.
    pub fn apply(
        &mut self,
        targets: &[Arc<Target>],
        settings: Settings,
    ) -> anyhow::Result<Changes> {
        let mut changes = Changes::default();
        let mut starting = Vec::new();
        for target in targets {
            match self.running.get(&target.id) {
                Some(running) if running.target.fingerprint == target.fingerprint => {
                    changes.unchanged += 1;
                }
                previous => {
                    let labels = Metrics::labels_of(target);
                    let reattach = previous.is_some_and(|p| p.labels == labels);
                    let metrics = self.metrics.target(target);
                    match Prober::observed(Arc::clone(target), metrics.connection_series()) {
                        Ok(prober) => {
                            starting.push((Arc::new(prober), metrics, previous.is_some()))
                        }
                        Err(e) => {
                            if !reattach {
                                self.metrics.remove_target(&labels);
                            }
                            for (prober, _, _) in &starting {
                                self.forget_unstarted(&prober.target);
                            }
                            anyhow::bail!(
                                "target {}: cannot build its HTTP client: {e}",
                                target.id
                            );
                        }
                    }
                }
            }
        }
        let wanted: HashMap<&str, &Arc<Target>> =
            targets.iter().map(|t| (t.id.as_str(), t)).collect();
        let removed: Vec<String> = self
            .running
            .keys()
            .filter(|name| !wanted.contains_key(name.as_str()))
            .cloned()
            .collect();
        for name in removed {
            if let Some(running) = self.running.remove(&name) {
                running.stop.cancel();
                self.metrics.remove_target(&running.labels);
                self.board.detach(&name);
                if let Some(probes) = &self.scrape_probes {
                    probes.remove(&name);
                }
                tracing::info!(target = %name, "target removed");
                changes.removed.push(name);
            }
        }
        for (prober, metrics, restart) in starting {
            let target = Arc::clone(&prober.target);
            if let Some(old) = self.running.remove(&target.id) {
                old.stop.cancel();
                if old.labels != *metrics.labels() {
                    self.metrics.remove_target(&old.labels);
                } else {
                    self.metrics.remove_dropped_checks(&target);
                }
            }
            prober.started();
            if let Some(probes) = &self.scrape_probes {
                probes.set(Arc::clone(&target));
            }
            let status = self.board.attach(&target, settings.status_page_probes);
            let stop = self.shutdown.child_token();
            let seed = scheduler::target_seed(settings.seed, &target.id);
            tracing::info!(
                target = %target.id,
                backend = %target.backend,
                url = %target.url,
                model = %target.model,
                rate = target.rate,
                "{}",
                if restart { "target restarted" } else { "probing" }
            );
            self.running.insert(
                target.id.clone(),
                Running {
                    target: Arc::clone(&target),
                    labels: metrics.labels().clone(),
                    stop: stop.clone(),
                },
            );
            if let Some(spec) = &target.canary {
                let group = target.canary_group();
                let family = canary::book::group_key(&target.name, &target.model, spec);
                let voters = target.origin.is_some().then(|| {
                    let (answered, failed) = self.metrics.canary_votes(&target.name);
                    canary::votes::Voters {
                        pools: Arc::clone(&self.pools),
                        block: target.name.clone(),
                        group: group.clone(),
                        answered,
                        failed,
                    }
                });
                let sinks = canary::Sinks {
                    metrics: metrics.clone(),
                    status: Arc::clone(&status),
                    book: self.books.group(&family, group.as_deref()),
                    golden: spec.golden_applies(&target.model, group.as_deref()),
                    baseline: canary::baseline::Baseline {
                        books: Arc::clone(&self.books),
                        family,
                        model: target.model.clone(),
                        group,
                        named: spec.baseline.clone(),
                        pool: voters.as_ref().map(|v| canary::baseline::PoolView {
                            pools: Arc::clone(&v.pools),
                            block: v.block.clone(),
                        }),
                    },
                    voters,
                };
                let run = canary::run(
                    Arc::clone(&prober),
                    Arc::clone(spec),
                    sinks,
                    stop.clone(),
                    self.ctx.clone(),
                );
                self.schedulers.spawn(run);
            }
            let budget = target
                .max_output_tokens_per_hour
                .map(crate::budget::Budget::new);
            if let (Some(spec), Some(series)) = (&target.prefix_cache, metrics.prefix_cache()) {
                let sinks = crate::prefix_check::Sinks {
                    series: series.clone(),
                    status: Arc::clone(&status),
                    metrics: metrics.clone(),
                    budget: budget.clone(),
                };
                self.schedulers.spawn(crate::prefix_check::run(
                    Arc::clone(&prober),
                    spec.clone(),
                    sinks,
                    stop.clone(),
                    self.ctx.clone(),
                ));
            }
            if let (Some(spec), Some(series)) = (&target.sampler, metrics.sampler()) {
                let sinks = crate::sampling::Sinks {
                    series: series.clone(),
                    metrics: metrics.clone(),
                    budget: budget.clone(),
                    status: Arc::clone(&status),
                };
                self.schedulers.spawn(crate::sampling::run(
                    Arc::clone(&prober),
                    Arc::clone(spec),
                    sinks,
                    stop.clone(),
                    self.ctx.clone(),
                ));
            }
            if let (Some(spec), Some(series)) = (&target.adapters, metrics.adapters()) {
                let group = target.canary_group().or_else(|| target.revision.clone());
                let family = crate::adapters::family(
                    &target.name,
                    &target.model,
                    group.as_deref().unwrap_or(""),
                    spec,
                );
                let sinks = crate::adapters::Sinks {
                    series: series.clone(),
                    metrics: metrics.clone(),
                    budget: budget.clone(),
                    fleets: Arc::clone(&self.adapter_fleets),
                    status: Arc::clone(&status),
                    family,
                };
                self.schedulers.spawn(crate::adapters::run(
                    Arc::clone(&prober),
                    Arc::clone(spec),
                    sinks,
                    stop.clone(),
                    self.ctx.clone(),
                ));
            }
            if let (Some(spec), Some(series)) = (&target.session, metrics.session()) {
                let sinks = crate::session::Sinks {
                    series: series.clone(),
                    metrics: metrics.clone(),
                    budget: budget.clone(),
                };
                self.schedulers.spawn(crate::session::run(
                    Arc::clone(&prober),
                    Arc::clone(spec),
                    sinks,
                    stop.clone(),
                    self.ctx.clone(),
                ));
            }
            let sinks = Sinks {
                metrics,
                status,
                budget,
            };
            self.schedulers
                .spawn(scheduler::run(prober, sinks, seed, stop, self.ctx.clone()));
            if restart {
                changes.restarted.push(target.id.clone());
            } else {
                changes.added.push(target.id.clone());
            }
        }
        Ok(changes)
    }

    /// Undo `metrics.target` for a prepared target that will not start.
    fn forget_unstarted(&self, target: &Target) {
        let labels = Metrics::labels_of(target);
        if !self.running.values().any(|r| r.labels == labels) {
            self.metrics.remove_target(&labels);
        }
    }

    /// Where discovery puts the node-local blocks' pools.
    pub fn pools(&self) -> Arc<canary::votes::Pools> {
        Arc::clone(&self.pools)
    }

    /// Stop every scheduler and wait for them (probes in flight are drained separately).
    pub async fn stop(&mut self) {
        self.shutdown.cancel();
        self.schedulers.close();
        self.schedulers.wait().await;
        self.running.clear();
    }
}
