//! The Kubernetes test API server (tests/common/kube_api.rs) against the real client: kube's
//! `Client` from the kubeconfig it writes and kube-runtime's `watcher`, so the fixture is
//! shown to speak the list/watch protocol kube-rs expects; then the wire format itself,
//! read with a plain HTTP client. Every test is time-bounded.

use crate::common;
#[path = "kube_api/failures.rs"]
mod failures;
#[path = "kube_api/resources.rs"]
mod resources;

use std::time::Duration;

use common::kube_api::KubeApi;
use common::kube_api::client::{
    EVENT_LIMIT, Events, bounded, describe, drive, events, next, until,
};
use common::kube_api::objects::{self, endpoint_slice, vllm_pod, with_labels};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

const NS: &str = "inference";

/// The same pod in another namespace.
fn elsewhere(name: &str, ip: &str) -> Value {
    let mut pod = vllm_pod(NS, name, "node-1", ip, true);
    pod["metadata"]["namespace"] = json!("elsewhere");
    pod
}

fn ready_condition(pod: &Pod) -> String {
    let conditions = pod.status.as_ref().unwrap().conditions.as_ref().unwrap();
    let ready = conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    ready.status.clone()
}

/// List requests (not watches) the server received.
fn lists(api: &KubeApi) -> usize {
    api.requests()
        .iter()
        .filter(|r| !r.contains("watch="))
        .count()
}

const NOTHING: [&str; 0] = [];

async fn pod_events(api: &KubeApi, config: watcher::Config) -> Events<Pod> {
    events(Api::namespaced(api.client().await, NS), config)
}

#[tokio::test]
async fn selectors_are_sent_to_the_server_and_applied_there() {
    bounded(async {
        let api = KubeApi::start().await;
        api.apply(vllm_pod(NS, "a", "node-1", "10.1.0.1", true));
        api.apply(vllm_pod(NS, "b", "node-2", "10.1.0.2", true));
        api.apply(with_labels(
            vllm_pod(NS, "c", "node-1", "10.1.0.3", true),
            &[("app", "x")],
        ));
        let pods: Api<Pod> = Api::all(api.client().await);
        let config = watcher::Config::default()
            .labels("app=vllm")
            .fields("spec.nodeName=node-1");
        let mut events = events(pods, config);
        let listed = until(&mut events, "InitDone").await;
        assert_eq!(listed, ["Init", "InitApply(a)", "InitDone"]);

        api.apply(vllm_pod(NS, "d", "node-2", "10.1.0.4", true)); // other node
        api.apply(vllm_pod(NS, "e", "node-1", "10.1.0.5", true));
        assert_eq!(describe(&next(&mut events).await), "Apply(e)");
        // Relabelled out of the selector: the server sends DELETED to this watch.
        api.apply(with_labels(
            vllm_pod(NS, "e", "node-1", "10.1.0.5", true),
            &[("app", "x")],
        ));
        assert_eq!(describe(&next(&mut events).await), "Delete(e)");

        let requests = api.requests();
        let selectors = "fieldSelector=spec.nodeName=node-1&labelSelector=app=vllm";
        let list = format!("GET /api/v1/pods?{selectors}&limit=500");
        assert!(requests.contains(&list), "{requests:#?}");
        let watch = format!(
            "GET /api/v1/pods?watch=true&timeoutSeconds=290&{selectors}\
             &allowWatchBookmarks=true&resourceVersion="
        );
        assert!(requests[1].starts_with(&watch), "{requests:#?}");
        // Nothing but the list and the watch: no discovery calls for a typed Api.
        assert_eq!(requests.len(), 2, "{requests:#?}");
    })
    .await;
}

#[tokio::test]
async fn added_modified_deleted_are_apply_apply_delete() {
    bounded(async {
        let api = KubeApi::start().await;
        let mut events = pod_events(&api, watcher::Config::default()).await;
        assert_eq!(until(&mut events, "InitDone").await, ["Init", "InitDone"]);
        assert_eq!(
            api.open_watches(),
            0,
            "the watch starts once polled past InitDone"
        );

        api.apply(vllm_pod(NS, "a", "node-1", "10.1.0.1", true));
        let Ok(Event::Apply(added)) = next(&mut events).await else {
            panic!("not Apply")
        };
        assert_eq!(ready_condition(&added), "True");
        assert_eq!(api.open_watches(), 1);
        api.apply(vllm_pod(NS, "a", "node-1", "10.1.0.1", false));
        let Ok(Event::Apply(modified)) = next(&mut events).await else {
            panic!("not Apply")
        };
        assert_eq!(ready_condition(&modified), "False");
        let (old, new) = (&added.metadata, &modified.metadata);
        assert_eq!(
            (&new.uid, &new.creation_timestamp),
            (&old.uid, &old.creation_timestamp)
        );
        let rv = |p: &Pod| p.resource_version().unwrap().parse::<u64>().unwrap();
        assert!(rv(&modified) > rv(&added));
        api.apply(vllm_pod(NS, "a", "node-1", "10.1.0.1", false)); // identical: no event
        api.apply(elsewhere("z", "10.1.0.9")); // other namespace
        api.delete("v1", "Pod", NS, "a");
        let Ok(Event::Delete(deleted)) = next(&mut events).await else {
            panic!("not Delete")
        };
        assert_eq!(deleted.metadata.uid, added.metadata.uid);
        assert_eq!(rv(&deleted), api.resource_version());

        // The client going away closes the stream on the server (noticed on a write).
        drop(events);
        let deadline = tokio::time::Instant::now() + EVENT_LIMIT;
        while api.open_watches() > 0 {
            assert!(tokio::time::Instant::now() < deadline, "watch still open");
            api.bookmark_now();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn expired_history_makes_the_watcher_relist() {
    bounded(async {
        let api = KubeApi::start().await;
        api.apply(vllm_pod(NS, "a", "node-1", "10.1.0.1", true));
        let mut events = pod_events(&api, watcher::Config::default()).await;
        let listed = until(&mut events, "InitDone").await;
        assert_eq!(listed, ["Init", "InitApply(a)", "InitDone"]);
        assert_eq!(lists(&api), 1);

        api.expire_history();
        api.drop_watches();
        api.apply(vllm_pod(NS, "b", "node-1", "10.1.0.2", true));
        let seen = until(&mut events, "InitDone").await;
        let expired = "Err(error returned by apiserver during watch: too old resource version";
        assert!(
            seen[0].starts_with(expired) && seen[0].ends_with("Expired)"),
            "{seen:#?}"
        );
        assert_eq!(
            seen[1..],
            ["Init", "InitApply(a)", "InitApply(b)", "InitDone"]
        );
        assert_eq!(lists(&api), 2, "a re-list: {:#?}", api.requests());

        api.apply(vllm_pod(NS, "c", "node-1", "10.1.0.3", true));
        assert_eq!(describe(&next(&mut events).await), "Apply(c)");
    })
    .await;
}

#[tokio::test]
async fn bookmarks_are_consumed_and_move_the_resume_point() {
    bounded(async {
        let api = KubeApi::start().await;
        api.set_bookmark_interval(Duration::from_millis(200));
        let mut events = pod_events(&api, watcher::Config::default()).await;
        assert_eq!(until(&mut events, "InitDone").await, ["Init", "InitDone"]);
        let before = api.bookmarks_sent();
        assert_eq!(
            drive(&mut events, Duration::from_millis(1500)).await,
            NOTHING
        );
        assert!(api.bookmarks_sent() >= before + 2, "periodic bookmarks");

        // Changes elsewhere move the resourceVersion; a bookmark hands it to the watcher,
        // which resumes from it after a dropped connection (no events replayed, no re-list).
        api.apply(elsewhere("x", "10.1.0.8"));
        api.apply(elsewhere("y", "10.1.0.9"));
        api.bookmark_now();
        let rv = api.resource_version();
        assert_eq!(
            drive(&mut events, Duration::from_millis(300)).await,
            NOTHING
        );
        api.drop_watches();
        let resumed = format!("allowWatchBookmarks=true&resourceVersion={rv}");
        let deadline = tokio::time::Instant::now() + EVENT_LIMIT;
        while !api.requests().iter().any(|r| r.ends_with(&resumed)) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{:#?}",
                api.requests()
            );
            assert_eq!(drive(&mut events, Duration::from_millis(50)).await, NOTHING);
        }
        api.apply(vllm_pod(NS, "a", "node-1", "10.1.0.1", true));
        assert_eq!(describe(&next(&mut events).await), "Apply(a)");
        assert_eq!(lists(&api), 1);
    })
    .await;
}

fn pool_resource(group: &str, version: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk(group, version, "InferencePool");
    ApiResource::from_gvk_with_plural(&gvk, "inferencepools")
}

const V1: &str = "inference.networking.k8s.io";
const V1ALPHA2: &str = "inference.networking.x-k8s.io";
