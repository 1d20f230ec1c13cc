//! `source = "pods"`: pods matching a label selector (in one namespace or all), on one port.
//! With `node_local`, the API server filters by `spec.nodeName` (a field selector): a
//! DaemonSet pod lists only its own node's pods, never the whole cluster.

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::health::Health;
use super::kube::{Watched, follow, pod_endpoint};
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
    let watched = Watched::new(api, Some(selector), node_field(node.as_deref()).as_deref());
    follow(watched, health, stop, |pods| {
        let found = pods
            .objects()
            .filter_map(|pod| pod_endpoint(block, pod, port, None))
            .collect();
        sets.send_replace(Some(found));
    })
    .await;
}

/// This node as a field selector, for the API server to filter by.
pub fn node_field(node: Option<&str>) -> Option<String> {
    node.map(|node| format!("spec.nodeName={node}"))
}
