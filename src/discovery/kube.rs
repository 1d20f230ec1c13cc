//! What the Kubernetes sources share: the client (in-cluster from the ServiceAccount, or a
//! kubeconfig), folding a watcher's events into the current set of objects, reading a pod
//! as an endpoint, and saying why the API failed in words an operator acts on.
//!
//! Watching is kube-runtime's `watcher`: list, then watch from the list's resourceVersion,
//! re-list on 410 Gone, bookmarks, and (with `default_backoff`) retries with backoff; its
//! errors are reported, never fatal.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use super::health::Health;
use crate::config::{Discovery, Found, Kubernetes, Port};

/// How long to wait before trying to build the client again (no service account yet, a
/// kubeconfig being rotated).
const CLIENT_RETRY: Duration = Duration::from_secs(10);

/// The one Kubernetes client of a discovery start, built on first use and shared.
#[derive(Clone)]
pub struct Connector {
    settings: Arc<Kubernetes>,
    client: Arc<OnceCell<Client>>,
    stop: CancellationToken,
}

impl Connector {
    pub fn new(settings: Kubernetes, stop: CancellationToken) -> Self {
        Self {
            settings: Arc::new(settings),
            client: Arc::new(OnceCell::new()),
            stop,
        }
    }

    /// The client, once one can be built; `None` when stopped first.
    pub async fn client(&self, health: &mut Health) -> Option<Client> {
        loop {
            let built = self.client.get_or_try_init(|| build(&self.settings)).await;
            match built {
                Ok(client) => return Some(client.clone()),
                Err(reason) => health.failed(reason),
            }
            tokio::select! {
                () = self.stop.cancelled() => return None,
                () = tokio::time::sleep(CLIENT_RETRY) => {}
            }
        }
    }
}

async fn build(settings: &Kubernetes) -> Result<Client, String> {
    let config = match &settings.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::infer().await.map_err(|e| {
            format!(
                "no Kubernetes API: not in a cluster (no ServiceAccount) and no kubeconfig: {e}"
            )
        })?,
    };
    Client::try_from(config).map_err(|e| format!("cannot build the Kubernetes client: {e}"))
}

/// A watcher's events folded into the objects that exist now, keyed `namespace/name`.
pub struct Fold<K> {
    objects: BTreeMap<String, K>,
    /// Objects of a re-list in progress (between `Init` and `InitDone`).
    listing: Option<BTreeMap<String, K>>,
    /// The first complete list arrived.
    listed: bool,
}

impl<K: Resource + Clone> Fold<K> {
    pub fn new() -> Self {
        Self {
            objects: BTreeMap::new(),
            listing: None,
            listed: false,
        }
    }

    /// Take one event; `true` when the current set is complete and may have changed.
    pub fn apply(&mut self, event: watcher::Event<K>) -> bool {
        match event {
            watcher::Event::Init => {
                self.listing = Some(BTreeMap::new());
                false
            }
            watcher::Event::InitApply(object) => {
                if let Some(listing) = &mut self.listing {
                    listing.insert(key(&object), object);
                }
                false
            }
            watcher::Event::InitDone => {
                self.objects = self.listing.take().unwrap_or_default();
                self.listed = true;
                true
            }
            watcher::Event::Apply(object) => {
                self.objects.insert(key(&object), object);
                self.listed
            }
            watcher::Event::Delete(object) => {
                self.objects.remove(&key(&object));
                self.listed
            }
        }
    }

    pub fn objects(&self) -> impl Iterator<Item = &K> {
        self.objects.values()
    }
}

fn key<K: Resource>(object: &K) -> String {
    format!(
        "{}/{}",
        object.meta().namespace.as_deref().unwrap_or(""),
        object.meta().name.as_deref().unwrap_or("")
    )
}

/// Why the API failed, for the log and the block's health.
pub fn describe(error: &watcher::Error) -> String {
    let api = match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => match e {
            kube::Error::Api(status) => Some(status.as_ref()),
            other => return format!("Kubernetes API unreachable or failing: {other}"),
        },
        watcher::Error::WatchError(status) => Some(status.as_ref()),
        watcher::Error::NoResourceVersion => None,
    };
    match api {
        Some(status) if status.code == 403 => format!(
            "forbidden (403): the ServiceAccount may not list/watch this (RBAC): {}",
            status.message
        ),
        Some(status) if status.code == 404 => format!(
            "not found (404): the API is not served here (is the CRD installed?): {}",
            status.message
        ),
        Some(status) => format!(
            "the API server answered {}: {}",
            status.code, status.message
        ),
        None => error.to_string(),
    }
}

/// A pod as an endpoint: only a Ready pod with an IP that is not being deleted, on `port`
/// (a container port's name, or a number). Its labels: namespace, pod, node, the pool's
/// name when it is a pool member, and the block's chosen pod labels.
pub fn pod_endpoint(
    block: &Discovery,
    pod: &Pod,
    port: &Port,
    pool: Option<&str>,
) -> Option<Found> {
    let status = pod.status.as_ref()?;
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let ip = status.pod_ip.as_deref().filter(|ip| !ip.is_empty())?;
    if !ready || pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let number = match port {
        Port::Number(n) => *n,
        Port::Name(name) => pod
            .spec
            .as_ref()?
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok())?,
    };
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let mut labels = BTreeMap::from([
        ("namespace".to_owned(), namespace.clone()),
        ("pod".to_owned(), name.clone()),
    ]);
    if let Some(node) = &node {
        labels.insert("node".into(), node.clone());
    }
    if let Some(pool) = pool {
        labels.insert("pool".into(), pool.to_owned());
    }
    let pod_labels = pod.labels();
    for (key, label) in &block.pod_labels {
        if let Some(value) = pod_labels.get(key) {
            labels.insert(label.clone(), value.clone());
        }
    }
    let model = block
        .model_label
        .as_ref()
        .and_then(|l| pod_labels.get(l))
        .or_else(|| {
            block
                .model_annotation
                .as_ref()
                .and_then(|a| pod.annotations().get(a))
        })
        .filter(|m| !m.is_empty())
        .cloned();
    let address = socket(ip, number);
    let revision = super::owner::revision(pod);
    let workload = super::owner::workload(pod, revision.as_deref());
    Some(Found {
        revision,
        workload,
        created: pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second()),
        key: format!("{namespace}/{name}"),
        url: format!("{}://{address}", block.scheme),
        model,
        labels,
        origin: format!(
            "pod {namespace}/{name} on node {} ({address})",
            node.as_deref().unwrap_or("?")
        ),
    })
}

/// `ip:port`, bracketing IPv6.
pub fn socket(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// What a [`Watched`] saw.
pub enum Step {
    /// The complete set may have changed: read [`Watched::objects`].
    Changed,
    /// The API answered (an event, or a recheck while failing).
    Answering,
    /// The API failed; the watcher retries with backoff.
    Failed(String),
}

/// How often a failing watch is rechecked with a small list. A watch that resumes with
/// nothing new to say yields no event, so without this a recovered API would look down.
const RECHECK: Duration = Duration::from_secs(5);

/// A watch of the objects `api` has under a label (and optional field) selector: the
/// watcher, its events folded into the current set, and rechecks while it fails.
pub struct Watched<K: 'static> {
    events: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = watcher::Result<watcher::Event<K>>> + Send>,
    >,
    fold: Fold<K>,
    api: kube::Api<K>,
    list: kube::api::ListParams,
    recheck: Option<tokio::time::Instant>,
}

impl<K> Watched<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// `labels` and `fields` are sent to the API server, for it to filter.
    pub fn new(api: kube::Api<K>, labels: Option<&str>, fields: Option<&str>) -> Self {
        use kube::runtime::WatchStreamExt;
        let mut config = watcher::Config::default();
        let mut list = kube::api::ListParams::default().limit(1);
        if let Some(labels) = labels {
            config = config.labels(labels);
            list = list.labels(labels);
        }
        if let Some(fields) = fields {
            config = config.fields(fields);
            list = list.fields(fields);
        }
        Self {
            events: Box::pin(watcher(api.clone(), config).default_backoff()),
            fold: Fold::new(),
            api,
            list,
            recheck: None,
        }
    }

    /// The next thing worth telling; `None` once the watch ended (it does not, normally).
    pub async fn next(&mut self) -> Option<Step> {
        use futures_util::StreamExt;
        loop {
            let recheck = self.recheck;
            let event = tokio::select! {
                event = self.events.next() => event,
                () = tokio::time::sleep_until(recheck.unwrap_or_else(tokio::time::Instant::now)), if recheck.is_some() => {
                    return Some(match self.api.list(&self.list).await {
                        Ok(_) => {
                            self.recheck = None;
                            Step::Answering
                        }
                        Err(e) => {
                            self.recheck = Some(tokio::time::Instant::now() + RECHECK);
                            Step::Failed(describe(&watcher::Error::InitialListFailed(e)))
                        }
                    });
                }
            };
            return Some(match event? {
                Ok(event) => {
                    self.recheck = None;
                    if self.fold.apply(event) {
                        Step::Changed
                    } else {
                        continue;
                    }
                }
                Err(e) => {
                    self.recheck
                        .get_or_insert(tokio::time::Instant::now() + RECHECK);
                    Step::Failed(describe(&e))
                }
            });
        }
    }

    pub fn objects(&self) -> impl Iterator<Item = &K> {
        self.fold.objects()
    }
}

/// Watch `watched` until `stop`, reporting health and calling `publish` on every change.
pub async fn follow<K>(
    mut watched: Watched<K>,
    health: &mut Health,
    stop: &CancellationToken,
    mut publish: impl FnMut(&Watched<K>),
) where
    K: Resource + Clone + serde::de::DeserializeOwned + Debug + Send + Sync + 'static,
{
    loop {
        let step = tokio::select! {
            () = stop.cancelled() => return,
            step = watched.next() => step,
        };
        match step {
            None => return,
            Some(Step::Changed) => {
                health.ok();
                publish(&watched);
            }
            Some(Step::Answering) => health.ok(),
            Some(Step::Failed(reason)) => health.failed(reason),
        }
    }
}
