//! The targets the daemon runs: the configuration's own, and whatever each discovery block
//! finds. Both go through the one supervisor, so a discovered endpoint that appears,
//! changes address or goes away starts, restarts or stops its target exactly as a reload
//! would, and its series appear and disappear the same way.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::discovery::{self, Update};
use crate::endpoint::Target;
use crate::metrics::Metrics;
use crate::supervisor::{Changes, Settings, Supervisor};

pub struct Targets {
    supervisor: Supervisor,
    metrics: Metrics,
    configured: Vec<Arc<Target>>,
    settings: Settings,
    /// The configuration as `/config` shows it.
    redacted: Value,
    /// What the discovery blocks found, by block.
    discovered: BTreeMap<String, Vec<Arc<Target>>>,
    blocks: Vec<String>,
    /// The running discovery's generation (updates of an earlier one are stale) and stop.
    discovery: (u64, CancellationToken),
    updates: mpsc::Sender<Update>,
    fleet: watch::Sender<usize>,
}

impl Targets {
    /// Run `config`'s targets and start its discovery. A bad target fails the start.
    pub fn start(
        mut supervisor: Supervisor,
        metrics: Metrics,
        config: &Config,
        updates: mpsc::Sender<Update>,
        fleet: watch::Sender<usize>,
    ) -> anyhow::Result<Self> {
        supervisor.apply(&config.targets, Settings::from(config))?;
        let mut targets = Self {
            supervisor,
            metrics,
            configured: config.targets.clone(),
            settings: Settings::from(config),
            redacted: config.redacted.clone(),
            discovered: BTreeMap::new(),
            blocks: Vec::new(),
            discovery: (0, CancellationToken::new()),
            updates,
            fleet,
        };
        targets.start_discovery(config);
        Ok(targets)
    }

    /// Apply a reloaded configuration. Discovery restarts with it (new templates, rotated
    /// key files); meanwhile what the blocks still configured had found stays probed, until
    /// the restarted blocks report again.
    pub fn reconfigure(&mut self, config: &Config) -> anyhow::Result<Changes> {
        self.discovered
            .retain(|block, _| config.discovery.iter().any(|b| &b.name == block));
        let wanted: Vec<Arc<Target>> = config
            .targets
            .iter()
            .cloned()
            .chain(self.all_discovered())
            .collect();
        let changes = self.supervisor.apply(&wanted, Settings::from(config))?;
        self.configured = config.targets.clone();
        self.settings = Settings::from(config);
        self.redacted = config.redacted.clone();
        self.start_discovery(config);
        Ok(changes)
    }

    /// A block's new set; `None` when it came from a discovery since replaced.
    pub fn discovered(&mut self, update: Update) -> Option<anyhow::Result<Changes>> {
        if update.generation != self.discovery.0 {
            return None;
        }
        self.discovered.insert(update.block, update.targets);
        let wanted: Vec<Arc<Target>> = self
            .configured
            .iter()
            .cloned()
            .chain(self.all_discovered())
            .collect();
        Some(self.supervisor.apply(&wanted, self.settings))
    }

    /// What `/config` serves: the configuration, and every discovered target with where it
    /// came from.
    pub fn view(&self) -> Value {
        let mut view = self.redacted.clone();
        let discovered: Vec<Value> = self
            .all_discovered()
            .iter()
            .map(|t| {
                let mut url = t.url.clone();
                url.set_query(None);
                json!({
                    "id": t.id, "target": t.name, "url": url.as_str(), "model": t.model,
                    "labels": t.labels.iter().cloned().collect::<BTreeMap<_, _>>(),
                    "origin": t.origin, "rate": t.rate, "fleet_rate": t.fleet_rate,
                })
            })
            .collect();
        if let Value::Object(map) = &mut view {
            map.insert("discovered".into(), Value::Array(discovered));
        }
        view
    }

    /// Stop discovering and every scheduler (in-flight probes are drained by the caller).
    pub async fn stop(&mut self) {
        self.discovery.1.cancel();
        self.supervisor.stop().await;
    }

    fn all_discovered(&self) -> Vec<Arc<Target>> {
        self.discovered.values().flatten().cloned().collect()
    }

    fn start_discovery(&mut self, config: &Config) {
        self.discovery.1.cancel();
        for gone in &self.blocks {
            if !config.discovery.iter().any(|b| &b.name == gone) {
                self.metrics.remove_discovery(gone);
            }
        }
        self.blocks = config.discovery.iter().map(|b| b.name.clone()).collect();
        let generation = self.discovery.0 + 1;
        let stop = CancellationToken::new();
        discovery::start(
            config,
            &self.metrics,
            generation,
            (self.updates.clone(), &self.supervisor.pools()),
            self.fleet.clone(),
            &stop,
        );
        self.discovery = (generation, stop);
    }
}
