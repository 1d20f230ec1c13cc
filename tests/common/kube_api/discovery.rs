//! Discovery documents: `/version`, `/api`, `/apis` and `/apis/<group>/<version>` (the
//! non-aggregated forms, which kube's `discovery` module reads), listing only what is
//! installed.

use serde_json::{Value, json};

use super::Shared;
use super::store::{RESOURCES, Resource};

pub fn version_info() -> Value {
    json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0",
        "gitCommit": "60a317eadfcb839692a5551a7f3cb4af4cf9a8e7", "gitTreeState": "clean",
        "buildDate": "2025-04-23T13:00:00Z", "goVersion": "go1.24.2", "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub fn api_versions(shared: &Shared) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": shared.addr.to_string()},
        ],
    })
}

/// The installed non-core groups, each with its versions (the first is preferred).
pub fn group_list(shared: &Shared) -> Value {
    let uninstalled = shared.store.lock().unwrap().uninstalled.clone();
    let mut groups: Vec<Value> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        let gv = r.api_version();
        if uninstalled.contains(&gv) {
            continue;
        }
        let version = json!({"groupVersion": gv, "version": r.version});
        match groups.iter_mut().find(|g| g["name"] == r.group) {
            Some(group) => group["versions"].as_array_mut().unwrap().push(version),
            None => groups.push(json!({
                "name": r.group, "versions": [version.clone()], "preferredVersion": version,
            })),
        }
    }
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn resource_list<'a>(gv: &str, resources: impl Iterator<Item = &'a Resource>) -> Value {
    let resources: Vec<Value> = resources
        .map(|r| {
            json!({
                "name": r.plural,
                "singularName": r.kind.to_lowercase(),
                "namespaced": true,
                "kind": r.kind,
                "verbs": ["get", "list", "watch"],
            })
        })
        .collect();
    json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources,
    })
}
