//! Raw configuration → typed [`Config`]: the whole file's settings, its targets (each by
//! [`super::target`]), its discovery blocks and tracing, and the cross-target rules.
//!
//! Every check reports the full key path of the offending value so `inferprobe check` can
//! point at it.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::discovery::TargetFactory;
use super::fields::{check_labels, duration, in_range};
use super::operations::{env_labels, fill_defaults, redacted};
use super::prompts::Loaded;
use super::target::validate_target;
use super::{Config, ConfigError, RawConfig, RawTarget};

const DEFAULT_LISTEN: &str = "0.0.0.0:9464";
const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(25); // under k8s' default 30 s
pub fn validate(raw: &RawConfig) -> Result<Config, ConfigError> {
    let listen_text = raw.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
    let listen: SocketAddr = listen_text.parse().map_err(|_| {
        ConfigError::new(
            "listen",
            format!("`{listen_text}` is not an IP:port address"),
        )
    })?;
    let shutdown_grace = duration(
        "shutdown_grace",
        raw.shutdown_grace.as_ref(),
        DEFAULT_SHUTDOWN_GRACE,
    )?;
    check_labels("labels", &raw.labels)?;
    check_labels("labels_from_env", &raw.labels_from_env)?;
    // On every series a discovered replica's `pod` and `namespace` name that replica
    // (docs/deploying.md): a daemon-wide one would name the probe on some series and the
    // replica on others.
    for (key, labels) in [
        ("labels", &raw.labels),
        ("labels_from_env", &raw.labels_from_env),
    ] {
        if let Some(name) = ["pod", "namespace"]
            .into_iter()
            .find(|n| labels.contains_key(*n))
        {
            return Err(ConfigError::new(
                format!("{key}.{name}"),
                "names the replica probed on a discovered target's series (docs/deploying.md): give the probe's own another name, as `probe_pod`",
            ));
        }
    }
    if let Some(both) = raw
        .labels
        .keys()
        .find(|k| raw.labels_from_env.contains_key(*k))
    {
        return Err(ConfigError::new(
            format!("labels_from_env.{both}"),
            "is also a static label; set it in one place",
        ));
    }
    let mut global_labels = raw.labels.clone();
    global_labels.extend(env_labels(&raw.labels_from_env)?);
    let watch = match raw.watch_config {
        Some(true) => Some(duration(
            "watch_interval",
            raw.watch_interval.as_ref(),
            Duration::from_secs(5),
        )?)
        .filter(|d| !d.is_zero()),
        _ => None,
    };
    let status_page_probes = in_range(
        "status_page_probes",
        raw.status_page_probes.unwrap_or(50),
        1,
        10_000,
    )? as usize;
    if raw.defaults.name.is_some() {
        return Err(ConfigError::new(
            "defaults.name",
            "a name cannot be inherited; set it on each target",
        ));
    }
    if raw.targets.is_empty() && raw.discovery.is_empty() {
        return Err(ConfigError::new(
            "targets",
            "at least one [[targets]] entry (or [[discovery]] block) is required",
        ));
    }
    let mut names = HashSet::new();
    let mut loaded = Loaded::default();
    loaded.skip_secrets = raw.skip_secrets;
    let kubernetes = super::discovery::kubernetes(raw)?;
    let mut targets = Vec::with_capacity(raw.targets.len());
    let mut merged = Vec::with_capacity(raw.targets.len());
    for (i, target) in raw.targets.iter().enumerate() {
        let key = format!("targets[{i}]");
        let inherited = target.clone().inherit(&raw.defaults);
        merged.push(inherited.clone());
        let target = validate_target(&key, inherited, &global_labels, &mut loaded)?;
        if let Some(spec) = &target.canary {
            super::canary::golden_serves(spec, &target.model, &key)?;
        }
        if !names.insert(target.name.clone()) {
            return Err(ConfigError::new(
                format!("{key}.name"),
                format!("duplicate target name `{}`", target.name),
            ));
        }
        targets.push(Arc::new(target));
    }
    let factory = Arc::new(TargetFactory::new(global_labels, loaded));
    let discovery = super::discovery::blocks(raw, &names, &factory)?;
    if kubernetes.fleet.is_none() {
        let templates = raw.discovery.iter().enumerate().map(|(i, b)| {
            let fleet = b.template.as_ref().and_then(|t| t.fleet_rate);
            (format!("discovery[{i}].template"), fleet)
        });
        let statics = merged
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("targets[{i}]"), t.fleet_rate));
        if let Some((key, _)) = statics.chain(templates).find(|(_, f)| f.is_some()) {
            return Err(ConfigError::new(
                format!("{key}.fleet_rate"),
                "is divided among the probe's pods: set kubernetes.fleet_selector to find them",
            ));
        }
    }
    let tracing = super::tracing::tracing(&raw.tracing, raw.skip_secrets)?;
    let histograms = match raw.metrics.histograms.as_deref() {
        None | Some("both") => crate::metrics::HistogramMode::Both,
        Some("classic") => crate::metrics::HistogramMode::Classic,
        Some("native") => crate::metrics::HistogramMode::Native,
        Some(other) => {
            return Err(ConfigError::new(
                "metrics.histograms",
                format!("`{other}` is not classic, native or both"),
            ));
        }
    };
    let mut shown = redacted(raw, &merged);
    for (i, target) in targets.iter().enumerate() {
        if let Some(t) = shown.get_mut("targets").and_then(|t| t.get_mut(i)) {
            fill_defaults(t, target);
        }
    }
    for (i, block) in discovery.iter().enumerate() {
        let template = shown
            .get_mut("discovery")
            .and_then(|d| d.get_mut(i))
            .and_then(|b| b.get_mut("template"));
        if let (Some(t), Ok(example)) = (template, block.example()) {
            fill_defaults(t, &example);
        }
    }
    Ok(Config {
        tracing,
        histograms,
        listen,
        seed: raw.seed,
        shutdown_grace,
        watch,
        status_page_probes,
        redacted: shown,
        files: merged.iter().flat_map(read_files).collect(),
        targets,
        kubernetes,
        discovery,
    })
}

/// The secret and TLS files a target reads, for the config watcher.
fn read_files(t: &RawTarget) -> Vec<std::path::PathBuf> {
    [
        &t.api_key_file,
        &t.tls_ca_file,
        &t.tls_client_cert_file,
        &t.tls_client_key_file,
    ]
    .into_iter()
    .flatten()
    .map(std::path::PathBuf::from)
    .collect()
}
