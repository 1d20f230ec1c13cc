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

use super::fields::{check_labels, duration, in_range};
use super::prompts::Loaded;
use super::validate::{check_name, validate_target};
use super::{ConfigError, RawConfig, RawDiscovery, RawPort, RawTarget};
use crate::target::Target;

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
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Pods { .. } => "pods",
            Self::EndpointSlices { .. } => "endpointslices",
            Self::InferencePool { .. } => "inferencepool",
            Self::File { .. } => "file",
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
        Ok(target)
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
    let placeholder = Found {
        key: "check".into(),
        url: format!("{scheme}://discovered.invalid:8000"),
        model: None,
        labels: BTreeMap::new(),
        origin: String::new(),
    };
    discovery.target(&placeholder, Some("discovered-model"))?;
    Ok(discovery)
}

fn source(
    at: &dyn Fn(&str) -> String,
    b: &RawDiscovery,
    raw: &RawConfig,
) -> Result<Source, ConfigError> {
    let kind = b.source.as_deref().ok_or_else(|| {
        ConfigError::new(
            at("source"),
            "is required: pods, endpointslices, inferencepool or file",
        )
    })?;
    let required = |field: &str, value: &Option<String>| {
        value.clone().filter(|v| !v.is_empty()).ok_or_else(|| {
            ConfigError::new(at(field), format!("is required with source = \"{kind}\""))
        })
    };
    // Keys of other sources are mistakes, not silently ignored settings.
    let allowed: &[&str] = match kind {
        "pods" => &["namespace", "selector", "port", "node_local"],
        "endpointslices" => &["namespace", "service", "port", "node_local"],
        "inferencepool" => &[
            "namespace",
            "pool",
            "pool_version",
            "port",
            "node_local",
            "gateway",
        ],
        "file" => &["path", "refresh"],
        other => {
            return Err(ConfigError::new(
                at("source"),
                format!("`{other}` is not pods, endpointslices, inferencepool or file"),
            ));
        }
    };
    let present = [
        ("namespace", b.namespace.is_some()),
        ("selector", b.selector.is_some()),
        ("service", b.service.is_some()),
        ("pool", b.pool.is_some()),
        ("pool_version", b.pool_version.is_some()),
        ("gateway", b.gateway.is_some()),
        ("port", b.port.is_some()),
        ("node_local", b.node_local.is_some()),
        ("path", b.path.is_some()),
        ("refresh", b.refresh.is_some()),
    ];
    if let Some((field, _)) = present.iter().find(|(f, set)| *set && !allowed.contains(f)) {
        return Err(ConfigError::new(
            at(field),
            format!("does not apply to source = \"{kind}\""),
        ));
    }
    let node = match b.node_local {
        Some(true) => {
            let var = raw
                .kubernetes
                .node_name_env
                .as_deref()
                .unwrap_or(DEFAULT_NODE_NAME_ENV);
            Some(env(var).ok_or_else(|| {
                ConfigError::new(
                    at("node_local"),
                    format!(
                        "needs this node's name: environment variable {var} is not set \
                         (the downward API's spec.nodeName)"
                    ),
                )
            })?)
        }
        _ => None,
    };
    let port = b.port.as_ref().map(|p| port(&at("port"), p)).transpose()?;
    Ok(match kind {
        "pods" => {
            let selector = required("selector", &b.selector)?;
            check_selector(&selector).map_err(|e| ConfigError::new(at("selector"), e))?;
            Source::Pods {
                namespace: b.namespace.clone(),
                selector,
                port: port.ok_or_else(|| {
                    ConfigError::new(
                        at("port"),
                        "is required with source = \"pods\": a port name or number",
                    )
                })?,
                node,
            }
        }
        "endpointslices" => Source::EndpointSlices {
            namespace: required("namespace", &b.namespace)?,
            service: required("service", &b.service)?,
            port,
            node,
        },
        "inferencepool" => Source::InferencePool {
            namespace: required("namespace", &b.namespace)?,
            pool: required("pool", &b.pool)?,
            version: match b.pool_version.as_deref() {
                None | Some("v1") => PoolVersion::V1,
                Some("v1alpha2") => PoolVersion::V1Alpha2,
                Some(other) => {
                    return Err(ConfigError::new(
                        at("pool_version"),
                        format!("`{other}` is not v1 or v1alpha2"),
                    ));
                }
            },
            port: match port {
                None => None,
                Some(Port::Number(n)) => Some(n),
                Some(Port::Name(_)) => {
                    return Err(ConfigError::new(
                        at("port"),
                        "an InferencePool's port is a number",
                    ));
                }
            },
            node,
            gateway: b
                .gateway
                .as_deref()
                .map(|g| {
                    Url::parse(g)
                        .ok()
                        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
                        .ok_or_else(|| {
                            ConfigError::new(at("gateway"), format!("`{g}` is not an http(s) URL"))
                        })
                })
                .transpose()?,
        },
        _ => {
            let path = PathBuf::from(required("path", &b.path)?);
            Source::File {
                refresh: duration(&at("refresh"), b.refresh.as_ref(), DEFAULT_REFRESH)?,
                path,
            }
        }
    })
}

fn port(key: &str, raw: &RawPort) -> Result<Port, ConfigError> {
    match raw {
        RawPort::Number(n) => u16::try_from(*n)
            .ok()
            .filter(|&n| n > 0)
            .map(Port::Number)
            .ok_or_else(|| ConfigError::new(key, format!("{n} is not a port number (1-65535)"))),
        RawPort::Name(name) => {
            // An IANA service name, as a container port's name is (at most 15 characters).
            let valid = (1..=15).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && name.bytes().any(|b| b.is_ascii_lowercase());
            if !valid {
                return Err(ConfigError::new(
                    key,
                    format!("`{name}` is not a port name (1-15 of a-z 0-9 -) or number"),
                ));
            }
            Ok(Port::Name(name.clone()))
        }
    }
}

/// The syntax of a Kubernetes label selector (`app=vllm,tier!=canary,gpu,!spot,zone in (a,b)`),
/// so a typo fails `check` rather than the API server's first list.
pub fn check_selector(selector: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("`{selector}` is not a label selector: {why}"));
    if selector.trim().is_empty() {
        return bad("it is empty");
    }
    for requirement in split_requirements(selector) {
        let r = requirement.trim();
        let key = |k: &str| {
            let k = k.trim();
            let (prefix, name) = k.rsplit_once('/').unwrap_or(("", k));
            !name.is_empty()
                && name.len() <= 63
                && prefix.len() <= 253
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                && prefix
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b))
        };
        let value = |v: &str| {
            let v = v.trim();
            v.len() <= 63
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        };
        let ok = if let Some((k, set)) = r.split_once(" notin ").or_else(|| r.split_once(" in ")) {
            let set = set.trim();
            key(k)
                && set.starts_with('(')
                && set.ends_with(')')
                && set[1..set.len() - 1].split(',').all(value)
        } else if let Some((k, v)) = r
            .split_once("!=")
            .or_else(|| r.split_once("=="))
            .or_else(|| r.split_once('='))
        {
            key(k) && value(v)
        } else {
            key(r.strip_prefix('!').unwrap_or(r))
        };
        if !ok {
            return bad(&format!("cannot read `{r}`"));
        }
    }
    Ok(())
}

/// Requirements are comma-separated, except inside a set's parentheses.
fn split_requirements(selector: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&selector[start..]);
    parts
}
