//! `source = "endpointslices"`: the ready endpoints of a Service, from its EndpointSlices
//! (`discovery.k8s.io/v1`, labelled `kubernetes.io/service-name`). With `node_local`, only
//! endpoints whose `nodeName` is this node. An endpoint whose `ready` condition is absent
//! counts as ready, as the API documents; terminating ones do not.

use std::collections::BTreeMap;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::health::Health;
use super::kube::{Watched, follow, socket};
use crate::config::{Discovery, Found, Port, Source};

pub async fn run(
    block: &Discovery,
    client: Client,
    sets: &watch::Sender<Option<Vec<Found>>>,
    health: &mut Health,
    stop: &CancellationToken,
) {
    let Source::EndpointSlices {
        namespace,
        service,
        port,
        node,
    } = &block.source
    else {
        return;
    };
    let api: Api<EndpointSlice> = Api::namespaced(client, namespace);
    let selector = format!("kubernetes.io/service-name={service}");
    follow(
        Watched::new(api, Some(&selector), None),
        health,
        stop,
        |slices| {
            let mut found = BTreeMap::new();
            for slice in slices.objects() {
                for endpoint in endpoints(block, slice, port.as_ref(), node.as_deref()) {
                    found.insert(endpoint.key.clone(), endpoint);
                }
            }
            sets.send_replace(Some(found.into_values().collect()));
        },
    )
    .await;
}

fn endpoints(
    block: &Discovery,
    slice: &EndpointSlice,
    port: Option<&Port>,
    node: Option<&str>,
) -> Vec<Found> {
    let ports = slice.ports.iter().flatten();
    let number = match port {
        Some(Port::Number(n)) => ports.clone().find(|p| p.port == Some(i32::from(*n))),
        Some(Port::Name(name)) => ports
            .clone()
            .find(|p| p.name.as_deref() == Some(name.as_str())),
        // Without a port setting, a Service with exactly one port is unambiguous.
        None => ports.clone().next().filter(|_| ports.count() == 1),
    }
    .and_then(|p| p.port)
    .and_then(|p| u16::try_from(p).ok());
    let Some(number) = number else {
        return Vec::new();
    };
    let namespace = slice.metadata.namespace.clone().unwrap_or_default();
    slice
        .endpoints
        .iter()
        .filter(|e| {
            let c = e.conditions.as_ref();
            c.and_then(|c| c.ready) != Some(false) && c.and_then(|c| c.terminating) != Some(true)
        })
        .filter(|e| node.is_none() || e.node_name.as_deref() == node)
        .filter_map(|e| {
            let ip = e.addresses.first()?;
            let pod = e
                .target_ref
                .as_ref()
                .filter(|r| r.kind.as_deref() == Some("Pod"))
                .and_then(|r| r.name.clone());
            let address = socket(ip, number);
            let mut labels = BTreeMap::from([("namespace".to_owned(), namespace.clone())]);
            if let Some(pod) = &pod {
                labels.insert("pod".into(), pod.clone());
            }
            if let Some(node) = &e.node_name {
                labels.insert("node".into(), node.clone());
            }
            let key = format!("{namespace}/{}", pod.as_deref().unwrap_or(ip));
            Some(Found {
                origin: format!(
                    "endpoint {key} of service {namespace}/{} on node {} ({address})",
                    slice
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get("kubernetes.io/service-name"))
                        .map_or("?", String::as_str),
                    e.node_name.as_deref().unwrap_or("?")
                ),
                key,
                url: format!("{}://{address}", block.scheme),
                model: None,
                labels,
                // A slice's endpoints name their pods but carry none of their labels.
                revision: None,
                workload: None,
                created: None,
            })
        })
        .collect()
}
