//! A discovery block's source (`pods`, `endpointslices`, `inferencepool`, `file`): its keys,
//! its port, and the syntax of its label selector, checked without a cluster.

use std::path::PathBuf;

use url::Url;

use super::{DEFAULT_NODE_NAME_ENV, DEFAULT_REFRESH, PoolVersion, Port, Source, env};
use crate::config::fields::duration;
use crate::config::{ConfigError, RawConfig, RawDiscovery, RawPort};

pub(super) fn source(
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
