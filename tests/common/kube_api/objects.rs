//! Object builders shaped like the API server's objects: pods and EndpointSlices are built
//! from k8s-openapi's typed structs (so names and nesting are the real ones, with the
//! defaults the server fills in), InferencePools from the CRD's Go types
//! (kubernetes-sigs/gateway-api-inference-extension, api/v1 and api/v1alpha2).

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ContainerState, ContainerStateRunning, ContainerStateWaiting,
    ContainerStatus, HostIP, ObjectReference, Pod, PodCondition, PodIP, PodSpec, PodStatus,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// The image of every built pod's container.
pub const IMAGE: &str = "vllm/vllm-openai:v0.10.1";

/// When built pods started and their conditions last changed.
pub const SINCE: &str = "2025-06-02T10:00:00Z";

/// The current time as the API serializes it (`2025-01-01T00:00:00Z`).
pub fn now() -> Value {
    serde_json::to_value(Time(Timestamp::now())).unwrap()
}

/// The uid the server gives an object when first created (what an EndpointSlice's
/// `targetRef.uid` names).
pub fn uid(api_version: &str, kind: &str, namespace: &str, name: &str) -> String {
    let key = (
        api_version.into(),
        kind.into(),
        namespace.into(),
        name.into(),
    );
    super::store::uid_for(&key, 0)
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A node's InternalIP, derived from its name so a node keeps one address.
fn host_ip(node: &str) -> String {
    let mut h = DefaultHasher::new();
    node.hash(&mut h);
    let n = h.finish();
    format!("10.0.{}.{}", (n >> 8) % 250, n % 250 + 1)
}

/// A vLLM pod in `namespace`: label `app=vllm`, port `http` 8000.
pub fn vllm_pod(namespace: &str, name: &str, node: &str, ip: &str, ready: bool) -> Value {
    pod(
        namespace,
        name,
        node,
        Some(ip),
        ready,
        &[("app", "vllm")],
        &[("http", 8000)],
    )
}

/// A pod on `node` with one container `server` exposing `ports` (name, containerPort).
/// `ip` None is a Pending pod (no podIP yet); otherwise Running, with the Ready and
/// ContainersReady conditions and the container's `ready` following `ready`.
pub fn pod(
    namespace: &str,
    name: &str,
    node: &str,
    ip: Option<&str>,
    ready: bool,
    labels: &[(&str, &str)],
    ports: &[(&str, u16)],
) -> Value {
    // Fixed, so a builder is a pure function of its arguments: building the same pod twice
    // and applying it is a no-op, as re-applying an unchanged object is on the server.
    let since = Some(Time(SINCE.parse().unwrap()));
    // `why`: the reason the kubelet/scheduler gives when the condition is False.
    let condition = |kind: &str, ok: bool, why: Option<&str>| PodCondition {
        type_: kind.to_owned(),
        status: if ok { "True" } else { "False" }.to_owned(),
        last_transition_time: since.clone(),
        reason: why.filter(|_| !ok).map(str::to_owned),
        message: (why == Some("ContainersNotReady") && !ok)
            .then(|| "containers with unready status: [server]".to_owned()),
        ..PodCondition::default()
    };
    let running = ip.is_some();
    let host = (!node.is_empty()).then(|| host_ip(node));
    let state = if running {
        ContainerState {
            running: Some(ContainerStateRunning {
                started_at: since.clone(),
            }),
            ..ContainerState::default()
        }
    } else {
        ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ContainerCreating".to_owned()),
                ..ContainerStateWaiting::default()
            }),
            ..ContainerState::default()
        }
    };
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: (!labels.is_empty()).then(|| map(labels)),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: (!node.is_empty()).then(|| node.to_owned()),
            containers: vec![Container {
                name: "server".to_owned(),
                image: Some(IMAGE.to_owned()),
                image_pull_policy: Some("IfNotPresent".to_owned()),
                ports: Some(
                    ports
                        .iter()
                        .map(|(port_name, port)| ContainerPort {
                            name: (!port_name.is_empty()).then(|| port_name.to_string()),
                            container_port: i32::from(*port),
                            protocol: Some("TCP".to_owned()),
                            ..ContainerPort::default()
                        })
                        .collect(),
                ),
                termination_message_path: Some("/dev/termination-log".to_owned()),
                termination_message_policy: Some("File".to_owned()),
                ..Container::default()
            }],
            restart_policy: Some("Always".to_owned()),
            termination_grace_period_seconds: Some(30),
            dns_policy: Some("ClusterFirst".to_owned()),
            service_account_name: Some("default".to_owned()),
            scheduler_name: Some("default-scheduler".to_owned()),
            enable_service_links: Some(true),
            priority: Some(0),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some(if running { "Running" } else { "Pending" }.to_owned()),
            conditions: Some(vec![
                condition("PodReadyToStartContainers", running, None),
                condition("Initialized", true, None),
                condition("Ready", ready, Some("ContainersNotReady")),
                condition("ContainersReady", ready, Some("ContainersNotReady")),
                condition("PodScheduled", !node.is_empty(), Some("Unschedulable")),
            ]),
            host_ip: host.clone(),
            host_ips: host.map(|ip| vec![HostIP { ip }]),
            pod_ip: ip.map(str::to_owned),
            pod_ips: ip.map(|ip| vec![PodIP { ip: ip.to_owned() }]),
            start_time: since.clone(),
            qos_class: Some("BestEffort".to_owned()),
            container_statuses: Some(vec![ContainerStatus {
                name: "server".to_owned(),
                image: IMAGE.to_owned(),
                image_id: format!("docker.io/{IMAGE}@sha256:{:064x}", 0xfeed),
                container_id: running.then(|| format!("containerd://{:064x}", 0xbeef)),
                ready,
                restart_count: 0,
                started: Some(running),
                state: Some(state),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        }),
    };
    serde_json::to_value(pod).unwrap()
}

/// `object` with `metadata.annotations` set to `annotations` (any kind of object).
pub fn with_annotations(mut object: Value, annotations: &[(&str, &str)]) -> Value {
    object["metadata"]["annotations"] = json!(map(annotations));
    object
}

/// `object` with `metadata.labels` replaced by `labels` (any kind of object).
pub fn with_labels(mut object: Value, labels: &[(&str, &str)]) -> Value {
    object["metadata"]["labels"] = json!(map(labels));
    object
}

/// One EndpointSlice endpoint: (ip, node, pod name, ready). `ready` None leaves the
/// conditions unset ("unknown", which consumers must treat as ready).
pub type SliceEndpoint<'a> = (&'a str, &'a str, &'a str, Option<bool>);

/// The slice the EndpointSlice controller writes for `service`, one port.
pub fn endpoint_slice(
    namespace: &str,
    name: &str,
    service: &str,
    port_name: &str,
    port: u16,
    endpoints: &[SliceEndpoint<'_>],
) -> Value {
    let slice = EndpointSlice {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(map(&[
                ("kubernetes.io/service-name", service),
                (
                    "endpointslice.kubernetes.io/managed-by",
                    "endpointslice-controller.k8s.io",
                ),
            ])),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".to_owned(),
        endpoints: endpoints
            .iter()
            .map(|(ip, node, pod_name, ready)| Endpoint {
                addresses: vec![ip.to_string()],
                conditions: Some(EndpointConditions {
                    ready: *ready,
                    serving: *ready,
                    terminating: ready.map(|_| false),
                }),
                node_name: (!node.is_empty()).then(|| node.to_string()),
                target_ref: Some(ObjectReference {
                    kind: Some("Pod".to_owned()),
                    namespace: Some(namespace.to_owned()),
                    name: Some(pod_name.to_string()),
                    uid: Some(uid("v1", "Pod", namespace, pod_name)),
                    ..ObjectReference::default()
                }),
                ..Endpoint::default()
            })
            .collect(),
        ports: Some(vec![EndpointPort {
            name: Some(port_name.to_owned()),
            port: Some(i32::from(port)),
            protocol: Some("TCP".to_owned()),
            ..EndpointPort::default()
        }]),
    };
    serde_json::to_value(slice).unwrap()
}

/// An `inference.networking.k8s.io/v1` InferencePool, with the CRD's defaults applied
/// (`endpointPickerRef.group` "" and `kind` Service, as the server stores them).
pub fn inference_pool_v1(
    namespace: &str,
    name: &str,
    match_labels: &[(&str, &str)],
    port: u16,
) -> Value {
    json!({
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": map(match_labels)},
            "targetPorts": [{"number": port}],
            "endpointPickerRef": {
                "group": "",
                "kind": "Service",
                "name": format!("{name}-epp"),
                "portNumber": 9002,
                "failureMode": "FailClose",
            },
        },
    })
}

/// An `inference.networking.x-k8s.io/v1alpha2` InferencePool (selector a plain map).
pub fn inference_pool_v1alpha2(
    namespace: &str,
    name: &str,
    selector: &[(&str, &str)],
    port: u16,
) -> Value {
    json!({
        "apiVersion": "inference.networking.x-k8s.io/v1alpha2",
        "kind": "InferencePool",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": map(selector),
            "targetPortNumber": port,
            "extensionRef": {
                "group": "",
                "kind": "Service",
                "name": format!("{name}-epp"),
                "portNumber": 9002,
                "failureMode": "FailClose",
            },
        },
    })
}
