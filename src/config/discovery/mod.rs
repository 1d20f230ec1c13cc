//! Validation of the `[kubernetes]` section and the `[[discovery]]` blocks, and the
//! [`TargetFactory`] that turns a block's template into a target at run time.
//!
//! Everything is checked here without contacting a cluster, so `inferprobe check` catches a
//! bad selector or template: each block's template is built once into a target with a
//! placeholder address, through the very code that builds configured targets.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use url::Url;

use super::fields::{check_labels, in_range};
use super::prompts::Loaded;
use super::target::{check_name, validate_target};
use super::{ConfigError, RawConfig, RawDiscovery, RawTarget};
use crate::endpoint::Target;

mod groups;
mod source;

pub use source::check_selector;
use source::source;

const DEFAULT_MAX_TARGETS: u64 = 100;
const DEFAULT_REFRESH: Duration = Duration::from_secs(10);
const DEFAULT_NODE_NAME_ENV: &str = "NODE_NAME";
const DEFAULT_FLEET_NAMESPACE_ENV: &str = "POD_NAMESPACE";

/// How to reach the Kubernetes API, and the probe's own fleet.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kubernetes {
    /// `None`: in-cluster, from the ServiceAccount (else `$KUBECONFIG` or `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// The probe's own pods, whose Ready count divides every `fleet_rate`.
    pub fleet: Option<Fleet>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Fleet {
    pub namespace: String,
    pub selector: String,
}

/// One validated discovery block.
#[derive(Debug)]
pub struct Discovery {
    /// The block's name: the `target` label of everything it finds.
    pub name: String,
    pub source: Source,
    pub scheme: &'static str,
    /// A pod label, else a pod annotation, naming the model; else the template's model,
    /// else the endpoint's `/v1/models`.
    pub model_label: Option<String>,
    pub model_annotation: Option<String>,
    /// Pod labels copied onto the series: (Kubernetes key, Prometheus label name).
    pub pod_labels: Vec<(String, String)>,
    pub max_targets: usize,
    /// The block's key path, for errors: `discovery[0]`.
    pub key: String,
    template: RawTarget,
    factory: Arc<TargetFactory>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    Pods {
        namespace: Option<String>,
        selector: String,
        port: Port,
        /// `node_local`: this node's name, sent to the API server as a field selector.
        node: Option<String>,
    },
    EndpointSlices {
        namespace: String,
        service: String,
        port: Option<Port>,
        node: Option<String>,
    },
    InferencePool {
        namespace: String,
        pool: String,
        version: PoolVersion,
        /// Overrides the pool's own target port.
        port: Option<u16>,
        node: Option<String>,
        /// Also probe the pool through its gateway, at this base URL.
        gateway: Option<Url>,
    },
    File {
        path: PathBuf,
        refresh: Duration,
    },
}

impl Source {
    /// Whether the block sees only its own node's replicas (`node_local`).
    pub fn node_local(&self) -> bool {
        match self {
            Self::Pods { node, .. }
            | Self::EndpointSlices { node, .. }
            | Self::InferencePool { node, .. } => node.is_some(),
            Self::File { .. } => false,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::Pods { .. } => "pods",
            Self::EndpointSlices { .. } => "endpointslices",
            Self::InferencePool { .. } => "inferencepool",
            Self::File { .. } => "file",
        }
    }

    /// The labels discovery sets on each target of this source (see `discovery::kube`,
    /// `discovery::endpointslices`, `discovery::file`): a pod label copied under one of
    /// these names would overwrite which replica a series is.
    pub fn labels(&self) -> &'static [&'static str] {
        match self {
            Self::Pods { .. } | Self::EndpointSlices { .. } => &["namespace", "pod", "node"],
            Self::InferencePool { .. } => &["namespace", "pod", "node", "pool"],
            Self::File { .. } => &["address"],
        }
    }

    /// Whether it needs the Kubernetes API.
    pub fn is_kubernetes(&self) -> bool {
        !matches!(self, Self::File { .. })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Port {
    Name(String),
    Number(u16),
}

/// The two InferencePool APIs of the Gateway API Inference Extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolVersion {
    /// `inference.networking.k8s.io/v1`: `spec.selector.matchLabels`, `spec.targetPorts[].number`.
    V1,
    /// `inference.networking.x-k8s.io/v1alpha2`: `spec.selector`, `spec.targetPortNumber`.
    V1Alpha2,
}

/// What discovery found: a base URL and the labels of the object behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// Unique within the block (`inference/vllm-0`, `10.0.0.7:8000`, `gateway`).
    pub key: String,
    /// `scheme://address:port`.
    pub url: String,
    /// The model, when the object names it.
    pub model: Option<String>,
    /// `pod`, `namespace`, `node`, `pool` and chosen pod labels; they win over the
    /// configuration's global labels of the same name.
    pub labels: BTreeMap<String, String>,
    /// Where it came from, for the status page and /config.
    pub origin: String,
    /// The revision of the controller that made the pod (a Deployment's ReplicaSet, a
    /// StatefulSet's or an Argo Rollout's): which version of the spec it runs. Not a label.
    pub revision: Option<String>,
    /// The workload that owns the pod (`namespace/kind/name` of its controlling owner, a
    /// ReplicaSet's name without its revision hash): replicas of one workload at two
    /// revisions are a rollout of it, never a reference for each other. Not a label.
    pub workload: Option<String>,
    /// When the pod was created (its `creationTimestamp`, Unix seconds): the canary's
    /// baseline is the group whose oldest pod is oldest, the same on every node and after
    /// any restart of inferprobe. Not a label.
    pub created: Option<i64>,
}

impl Discovery {
    /// The target for `found`: the template with its address, model and labels, built
    /// exactly as a configured target is. `model` is the model to use when neither the
    /// object nor the template names one (from the endpoint's `/v1/models`).
    pub fn target(&self, found: &Found, model: Option<&str>) -> Result<Target, ConfigError> {
        let mut raw = self.template.clone();
        raw.name = Some(self.name.clone());
        raw.url = Some(found.url.clone());
        if let Some(model) = found.model.as_deref().or(model) {
            raw.model = Some(model.to_owned());
        }
        let mut labels = raw.labels.take().unwrap_or_default();
        labels.extend(found.labels.clone());
        raw.labels = Some(labels);
        let mut target = self.factory.build(&format!("{}.template", self.key), raw)?;
        target.id = format!("{}/{}", self.name, found.key);
        target.origin = Some(found.origin.clone());
        target.revision = found.revision.clone();
        target.workload = found.workload.clone();
        target.created = found.created;
        Ok(target)
    }

    /// The target the template makes for a placeholder replica (what `check` shows).
    pub fn example(&self) -> Result<Target, ConfigError> {
        let placeholder = Found {
            key: "check".into(),
            url: format!("{}://discovered.invalid:8000", self.scheme),
            model: None,
            labels: BTreeMap::new(),
            origin: String::new(),
            revision: None,
            workload: None,
            created: None,
        };
        // The model when the template names none: each replica's comes from its /v1/models.
        self.target(&placeholder, Some("discovered-model"))
    }

    /// For a node-local block whose template runs a canary: the same block without the node
    /// filter, whose replicas on other nodes vote for the reference of a group too small on
    /// this node (`canary::votes`), and answer for the block's baseline where this node
    /// runs none of it (`canary::baseline`). With `votes = 0` none is asked: no watch.
    pub fn pool_wide(&self) -> Option<Discovery> {
        if self.template.canary.as_ref()?.votes == Some(0) {
            return None;
        }
        let mut source = self.source.clone();
        match &mut source {
            Source::Pods { node, .. }
            | Source::EndpointSlices { node, .. }
            | Source::InferencePool { node, .. } => {
                node.take()?;
            }
            Source::File { .. } => return None,
        }
        if let Source::InferencePool { gateway, .. } = &mut source {
            *gateway = None;
        }
        Some(Discovery {
            name: self.name.clone(),
            source,
            scheme: self.scheme,
            model_label: self.model_label.clone(),
            model_annotation: self.model_annotation.clone(),
            pod_labels: self.pod_labels.clone(),
            max_targets: self.max_targets,
            key: self.key.clone(),
            template: self.template.clone(),
            factory: Arc::clone(&self.factory),
        })
    }

    /// Whether the template names the model itself (no `/v1/models` needed).
    pub fn has_model(&self) -> bool {
        self.template.model.is_some()
    }
}

/// Builds targets after the configuration was loaded, sharing what it loaded (global
/// labels; tokenizers and datasets, read once however many targets use them).
pub struct TargetFactory {
    global_labels: BTreeMap<String, String>,
    loaded: Mutex<Loaded>,
}

impl std::fmt::Debug for TargetFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetFactory").finish_non_exhaustive()
    }
}

impl TargetFactory {
    pub(super) fn new(global_labels: BTreeMap<String, String>, loaded: Loaded) -> Self {
        Self {
            global_labels,
            loaded: Mutex::new(loaded),
        }
    }

    fn build(&self, key: &str, raw: RawTarget) -> Result<Target, ConfigError> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        validate_target(key, raw, &self.global_labels, &mut loaded)
    }
}

pub(super) fn kubernetes(raw: &RawConfig) -> Result<Kubernetes, ConfigError> {
    let k = &raw.kubernetes;
    let kubeconfig = match &k.kubeconfig {
        None => None,
        Some(path) => {
            let path = PathBuf::from(path);
            if !path.is_file() {
                return Err(ConfigError::new(
                    "kubernetes.kubeconfig",
                    format!("{} is not a file", path.display()),
                ));
            }
            Some(path)
        }
    };
    let fleet = match &k.fleet_selector {
        None => None,
        Some(selector) => {
            check_selector(selector)
                .map_err(|e| ConfigError::new("kubernetes.fleet_selector", e))?;
            let namespace = match &k.fleet_namespace {
                Some(namespace) => namespace.clone(),
                None => env(DEFAULT_FLEET_NAMESPACE_ENV).ok_or_else(|| {
                    ConfigError::new(
                        "kubernetes.fleet_namespace",
                        format!(
                            "is needed with fleet_selector: set it, or {DEFAULT_FLEET_NAMESPACE_ENV} \
                             from the downward API (metadata.namespace)"
                        ),
                    )
                })?,
            };
            Some(Fleet {
                namespace,
                selector: selector.clone(),
            })
        }
    };
    Ok(Kubernetes { kubeconfig, fleet })
}

fn env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// Every block, checked; `taken` holds the configured targets' names (a block's name is
/// the `target` label of what it finds, so it must not also be a configured target's).
pub(super) fn blocks(
    raw: &RawConfig,
    taken: &HashSet<String>,
    factory: &Arc<TargetFactory>,
) -> Result<Vec<Arc<Discovery>>, ConfigError> {
    let mut names = HashSet::new();
    let mut blocks = Vec::with_capacity(raw.discovery.len());
    for (i, block) in raw.discovery.iter().enumerate() {
        let key = format!("discovery[{i}]");
        let discovery = block_of(&key, block, raw, factory)?;
        if taken.contains(&discovery.name) || !names.insert(discovery.name.clone()) {
            return Err(ConfigError::new(
                format!("{key}.name"),
                format!(
                    "`{}` is already the name of a target or another discovery block",
                    discovery.name
                ),
            ));
        }
        blocks.push(Arc::new(discovery));
    }
    Ok(blocks)
}

fn block_of(
    key: &str,
    b: &RawDiscovery,
    raw: &RawConfig,
    factory: &Arc<TargetFactory>,
) -> Result<Discovery, ConfigError> {
    let at = |field: &str| format!("{key}.{field}");
    let name = b
        .name
        .clone()
        .ok_or_else(|| ConfigError::new(at("name"), "is required"))?;
    check_name(&at("name"), &name)?;
    let source = source(&at, b, raw)?;
    let scheme = match b.scheme.as_deref() {
        None | Some("http") => "http",
        Some("https") => "https",
        Some(other) => {
            return Err(ConfigError::new(
                at("scheme"),
                format!("`{other}` is not http or https"),
            ));
        }
    };
    let pods = matches!(source, Source::Pods { .. } | Source::InferencePool { .. });
    for (field, set) in [
        ("model_label", b.model_label.is_some()),
        ("model_annotation", b.model_annotation.is_some()),
        ("pod_labels", b.pod_labels.is_some()),
    ] {
        if set && !pods {
            return Err(ConfigError::new(
                at(field),
                format!(
                    "reads pods: it applies to source = \"pods\" or \"inferencepool\", not \"{}\"",
                    source.kind()
                ),
            ));
        }
    }
    let mut pod_labels = Vec::new();
    for label in b.pod_labels.iter().flatten() {
        let name: String = label
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let name = name
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .to_owned();
        check_labels(
            &at("pod_labels"),
            &BTreeMap::from([(name.clone(), String::new())]),
        )?;
        if source.labels().contains(&name.as_str()) {
            return Err(ConfigError::new(
                format!("{}.{label}", at("pod_labels")),
                format!(
                    "would be stored as `{name}`, a label discovery sets to say which replica \
                     a series is; a pod label cannot replace it"
                ),
            ));
        }
        pod_labels.push((label.clone(), name));
    }
    let max_targets = in_range(
        &at("max_targets"),
        b.max_targets.unwrap_or(DEFAULT_MAX_TARGETS),
        1,
        10_000,
    )? as usize;
    let own = b.template.clone().unwrap_or_default();
    for (field, set) in [("name", own.name.is_some()), ("url", own.url.is_some())] {
        if set {
            return Err(ConfigError::new(
                at(&format!("template.{field}")),
                "comes from discovery; remove it from the template",
            ));
        }
    }
    // Everything else of [defaults] applies, as to a configured target; its url cannot.
    let mut template = own.inherit(&raw.defaults);
    template.url = None;
    groups::check(key, &source, &pod_labels, &mut template)?;
    let discovery = Discovery {
        name,
        source,
        scheme,
        model_label: b.model_label.clone(),
        model_annotation: b.model_annotation.clone(),
        pod_labels,
        max_targets,
        key: key.to_owned(),
        template,
        factory: Arc::clone(factory),
    };
    // The template must make a target: build one with a placeholder address now, so a
    // mistake fails `check` rather than every discovered endpoint later.
    discovery.example()?;
    Ok(discovery)
}
