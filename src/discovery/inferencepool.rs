//! `source = "inferencepool"`: the members of a Gateway API Inference Extension
//! InferencePool, each probed directly, and optionally the gateway in front of the pool.
//!
//! The pool says which pods are members (a label selector in its namespace) and on which
//! port; both versions of the API are read (field names from
//! kubernetes-sigs/gateway-api-inference-extension):
//! - `inference.networking.k8s.io/v1`: `spec.selector.matchLabels`, `spec.targetPorts[0].number`;
//! - `inference.networking.x-k8s.io/v1alpha2`: `spec.selector` (a map), `spec.targetPortNumber`.
//!
//! The pool is watched, and so are the pods its selector matches: a changed selector or
//! port restarts the pod watch; a deleted pool leaves only the gateway.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::health::Health;
use super::kube::{Step, Watched, pod_endpoint};
use crate::config::{Discovery, Found, PoolVersion, Port, Source};

/// What a pool says about its members.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Membership {
    selector: String,
    port: u16,
}

pub fn api_resource(version: PoolVersion) -> ApiResource {
    let (group, version) = match version {
        PoolVersion::V1 => ("inference.networking.k8s.io", "v1"),
        PoolVersion::V1Alpha2 => ("inference.networking.x-k8s.io", "v1alpha2"),
    };
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: "InferencePool".into(),
        plural: "inferencepools".into(),
    }
}

pub async fn run(
    block: &Discovery,
    client: Client,
    sets: &watch::Sender<Option<Vec<Found>>>,
    health: &mut Health,
    stop: &CancellationToken,
) {
    let Source::InferencePool {
        namespace,
        pool,
        version,
        port,
        node,
        gateway,
    } = &block.source
    else {
        return;
    };
    let gateway = gateway.as_ref().map(|url| Found {
        key: "gateway".into(),
        url: url.as_str().trim_end_matches('/').to_owned(),
        model: None,
        labels: BTreeMap::from([("pool".to_owned(), pool.clone())]),
        origin: format!("the gateway in front of pool {namespace}/{pool}"),
        revision: None,
        workload: None,
        created: None,
    });
    let publish = |members: Vec<Found>| {
        sets.send_replace(Some(members.into_iter().chain(gateway.clone()).collect()));
    };
    let resource = api_resource(*version);
    let pools: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let by_name = format!("metadata.name={pool}");
    // No label selector: the pool is picked by name.
    let mut pool_watch = Watched::new(pools, None, Some(&by_name));
    let mut membership: Option<Membership> = None;
    // Until the pool's first list nothing is known; after it, a missing pool is news too
    // (the gateway is probed with or without members).
    let mut listed = false;
    let mut members: Option<Watched<Pod>> = None;
    loop {
        let step = tokio::select! {
            () = stop.cancelled() => return,
            step = pool_watch.next() => match step {
                Some(Step::Changed) => {
                    health.ok();
                    let now = pool_watch.objects().next().and_then(|p| read_pool(p, *version, *port));
                    if now != membership || !listed {
                        listed = true;
                        membership = now;
                        members = membership.as_ref().map(|m| {
                            let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
                            let node = super::pods::node_field(node.as_deref());
                            Watched::new(api, Some(&m.selector), node.as_deref())
                        });
                        if membership.is_none() {
                            tracing::warn!(discovery = %block.name, pool = %pool,
                                "the InferencePool is gone (or names no selector and port); probing no member");
                            publish(Vec::new());
                        }
                    }
                    continue;
                }
                other => other,
            },
            step = async { members.as_mut()?.next().await }, if members.is_some() => step,
        };
        match step {
            None => return,
            Some(Step::Changed) => {
                health.ok();
                if let (Some(m), Some(watched)) = (&membership, &members) {
                    let port = Port::Number(m.port);
                    publish(
                        watched
                            .objects()
                            .filter_map(|p| pod_endpoint(block, p, &port, Some(pool)))
                            .collect(),
                    );
                }
            }
            Some(Step::Answering) => health.ok(),
            Some(Step::Failed(reason)) => health.failed(reason),
        }
    }
}

/// The member selector and port of a pool object, in either API version.
fn read_pool(pool: &DynamicObject, version: PoolVersion, port: Option<u16>) -> Option<Membership> {
    let spec = pool.data.get("spec")?;
    let (labels, number) = match version {
        PoolVersion::V1 => (
            spec.get("selector")?.get("matchLabels")?,
            spec.get("targetPorts")?.get(0)?.get("number"),
        ),
        PoolVersion::V1Alpha2 => (spec.get("selector")?, spec.get("targetPortNumber")),
    };
    let labels: BTreeMap<&str, &str> = labels
        .as_object()?
        .iter()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
        .collect();
    if labels.is_empty() {
        return None;
    }
    let number = match port {
        Some(port) => port,
        None => number
            .and_then(Value::as_u64)
            .and_then(|n| u16::try_from(n).ok())?,
    };
    let selector = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    Some(Membership {
        selector,
        port: number,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(json: Value) -> DynamicObject {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn both_api_versions_name_their_members() {
        let v1 = object(serde_json::json!({
            "apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"app": "vllm", "tier": "gpu"}},
                     "targetPorts": [{"number": 8000}],
                     "endpointPickerRef": {"name": "p-epp", "portNumber": 9002}}
        }));
        let alpha = object(serde_json::json!({
            "apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferencePool",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"selector": {"app": "vllm", "tier": "gpu"}, "targetPortNumber": 8000,
                     "extensionRef": {"name": "p-epp"}}
        }));
        let want = Some(Membership {
            selector: "app=vllm,tier=gpu".into(),
            port: 8000,
        });
        assert_eq!(read_pool(&v1, PoolVersion::V1, None), want);
        assert_eq!(read_pool(&alpha, PoolVersion::V1Alpha2, None), want);
        assert_eq!(
            read_pool(&v1, PoolVersion::V1, Some(9000)).unwrap().port,
            9000
        );
        // A v1 object read as v1alpha2 has no usable selector: no members, not a guess.
        assert_eq!(read_pool(&v1, PoolVersion::V1Alpha2, None), None);
    }
}
