//! `source = "pods"`: pods matching a label selector (in one namespace or all), on one port.
//! With `node_local`, the API server filters by `spec.nodeName` (a field selector): a
//! DaemonSet pod lists only its own node's pods, never the whole cluster.

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Health;
use super::kube::{pod_endpoint, watch_objects};
use crate::config::{Discovery, Found, Source};

pub async fn run(
    block: &Discovery,
    client: Client,
    sets: &watch::Sender<Option<Vec<Found>>>,
    health: &mut Health,
    stop: &CancellationToken,
) {
    let Source::Pods {
        namespace,
        selector,
        port,
        node,
    } = &block.source
    else {
        return;
    };
    let api: Api<Pod> = match namespace {
        Some(namespace) => Api::namespaced(client, namespace),
        None => Api::all(client),
    };
    watch_objects(
        api,
        selection(selector, node.as_deref()),
        health,
        stop,
        |pods| {
            let found = pods
                .objects()
                .filter_map(|pod| pod_endpoint(block, pod, port, None))
                .collect();
            sets.send_replace(Some(found));
        },
    )
    .await;
}

/// The watcher's selectors: the label selector, and this node as a field selector.
pub fn selection(selector: &str, node: Option<&str>) -> watcher::Config {
    let config = watcher::Config::default().labels(selector);
    match node {
        Some(node) => config.fields(&format!("spec.nodeName={node}")),
        None => config,
    }
}
