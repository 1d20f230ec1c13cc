//! The Kubernetes test API server (tests/common/kube_api.rs) against the real client: kube's
//! `Client` from the kubeconfig it writes and kube-runtime's `watcher`, so the fixture is
//! shown to speak the list/watch protocol kube-rs expects; then the wire format itself,
//! read with a plain HTTP client. Every test is time-bounded.

mod common;

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

fn api_status(item: &Result<Event<impl Sized>, watcher::Error>) -> (u16, &str) {
    match item {
        Err(watcher::Error::InitialListFailed(kube::Error::Api(status))) => {
            (status.code, &status.reason)
        }
        _ => panic!("expected an API error from the initial list"),
    }
}

#[tokio::test]
async fn forbidden_is_an_error_and_the_watcher_recovers() {
    bounded(async {
        let api = KubeApi::start().await;
        api.apply(vllm_pod(NS, "a", "node-1", "10.1.0.1", true));
        api.forbid("pods", true);
        let mut events = pod_events(&api, watcher::Config::default()).await;
        assert_eq!(describe(&next(&mut events).await), "Init");
        let error = next(&mut events).await;
        assert_eq!(api_status(&error), (403, "Forbidden"));
        let message = "pods is forbidden: User \"system:anonymous\" cannot list resource \
                       \"pods\" in API group \"\" in the namespace \"inference\"";
        assert!(describe(&error).contains(message), "{}", describe(&error));

        api.forbid("pods", false);
        let listed = until(&mut events, "InitDone").await;
        assert_eq!(listed, ["Init", "InitApply(a)", "InitDone"]);
    })
    .await;
}

fn pool_resource(group: &str, version: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk(group, version, "InferencePool");
    ApiResource::from_gvk_with_plural(&gvk, "inferencepools")
}

const V1: &str = "inference.networking.k8s.io";
const V1ALPHA2: &str = "inference.networking.x-k8s.io";

#[tokio::test]
async fn missing_crd_is_a_404_and_the_watcher_recovers_once_installed() {
    bounded(async {
        let api = KubeApi::start().await;
        api.install_group("inference.networking.k8s.io/v1", false);
        api.apply(objects::inference_pool_v1(
            NS,
            "pool",
            &[("app", "vllm")],
            8000,
        ));
        let resource = pool_resource(V1, "v1");
        let pools: Api<DynamicObject> = Api::namespaced_with(api.client().await, NS, &resource);
        let mut events = events(pools, watcher::Config::default());
        assert_eq!(describe(&next(&mut events).await), "Init");
        let error = next(&mut events).await;
        assert_eq!(api_status(&error), (404, "NotFound"));
        assert!(describe(&error).contains("the server could not find the requested resource"));

        api.install_group("inference.networking.k8s.io/v1", true);
        let listed = until(&mut events, "InitDone").await;
        assert_eq!(listed, ["Init", "InitApply(pool)", "InitDone"]);
    })
    .await;
}

#[tokio::test]
async fn unreachable_server_is_an_error_and_the_watch_resumes() {
    bounded(async {
        let api = KubeApi::start().await;
        api.set_down(true);
        let mut events = pod_events(&api, watcher::Config::default()).await;
        assert_eq!(describe(&next(&mut events).await), "Init");
        let error = next(&mut events).await;
        let refused = matches!(error, Err(watcher::Error::InitialListFailed(_)));
        assert!(refused, "{}", describe(&error));
        assert!(
            api.requests().is_empty(),
            "refused before any request was read"
        );
        api.set_down(false);
        assert_eq!(until(&mut events, "InitDone").await, ["Init", "InitDone"]);

        // Down while watching: the open stream is cut; the change made meanwhile is
        // replayed from history when the watch resumes from its resourceVersion.
        assert_eq!(
            drive(&mut events, Duration::from_millis(200)).await,
            NOTHING
        );
        api.set_down(true);
        api.apply(vllm_pod(NS, "a", "node-1", "10.1.0.1", true));
        let seen = until(&mut events, "Err").await;
        let failed = seen.last().unwrap().contains("failed to start watching");
        assert!(failed, "{seen:#?}");
        api.set_down(false);
        assert_eq!(until(&mut events, "Apply").await, ["Apply(a)"]);
        assert_eq!(lists(&api), 1, "resumed, not re-listed");
    })
    .await;
}

#[tokio::test]
async fn inference_pools_of_both_versions_list_and_watch_as_dynamic_objects() {
    bounded(async {
        let api = KubeApi::start().await;
        let (vllm_app, sgl_app) = ([("app", "vllm")], [("app", "sgl")]);
        api.apply(objects::inference_pool_v1(NS, "pool-a", &vllm_app, 8000));
        api.apply(objects::inference_pool_v1alpha2(
            NS, "pool-b", &sgl_app, 30000,
        ));
        let client = api.client().await;

        let v1 = pool_resource(V1, "v1");
        let pools: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &v1);
        let list = pools.list(&ListParams::default()).await.unwrap();
        assert_eq!(list.items.len(), 1);
        let spec = &list.items[0].data["spec"];
        assert_eq!(spec["selector"]["matchLabels"]["app"], "vllm");
        assert_eq!(spec["targetPorts"][0]["number"], 8000);
        let picker = &spec["endpointPickerRef"];
        assert_eq!(
            (&picker["name"], &picker["portNumber"]),
            (&json!("pool-a-epp"), &json!(9002))
        );
        assert_eq!(picker["failureMode"], "FailClose");
        let one = pools.get("pool-a").await.unwrap();
        assert_eq!(
            one.types.unwrap().api_version,
            "inference.networking.k8s.io/v1"
        );
        assert!(one.metadata.uid.is_some() && one.metadata.creation_timestamp.is_some());

        let old: Api<DynamicObject> = Api::all_with(client, &pool_resource(V1ALPHA2, "v1alpha2"));
        let mut events = events(old, watcher::Config::default());
        let listed = until(&mut events, "InitDone").await;
        assert_eq!(listed, ["Init", "InitApply(pool-b)", "InitDone"]);
        api.apply(objects::inference_pool_v1alpha2(
            NS, "pool-b", &sgl_app, 30001,
        ));
        let Ok(Event::Apply(pool)) = next(&mut events).await else {
            panic!("not Apply")
        };
        let spec = &pool.data["spec"];
        assert_eq!(
            (&spec["targetPortNumber"], &spec["selector"]["app"]),
            (&json!(30001), &json!("sgl"))
        );
        let extension = &spec["extensionRef"];
        assert_eq!(
            (&extension["name"], &extension["portNumber"]),
            (&json!("pool-b-epp"), &json!(9002))
        );

        // The two versions are separate resources: a v1 change is not a v1alpha2 event.
        api.apply(objects::inference_pool_v1(NS, "pool-c", &vllm_app, 8000));
        assert_eq!(
            drive(&mut events, Duration::from_millis(300)).await,
            NOTHING
        );
        // With the ApiResource given, kube makes no discovery requests.
        assert!(api.requests().iter().all(|r| r.contains("/inferencepools")));
    })
    .await;
}

#[tokio::test]
async fn endpoint_slices_of_a_service_list_and_watch() {
    bounded(async {
        let api = KubeApi::start().await;
        let slice = |name, service, port, endpoints: &[_]| {
            endpoint_slice(NS, name, service, "http", port, endpoints)
        };
        let two = [
            ("10.1.0.1", "node-1", "vllm-0", Some(true)),
            ("10.1.0.2", "node-2", "vllm-1", Some(false)),
        ];
        api.apply(slice("vllm-abcde", "vllm", 8000, &two));
        let theirs = [("10.1.0.7", "node-1", "sgl-0", None)];
        api.apply(slice("sgl-xyz12", "sgl", 30000, &theirs));
        let slices: Api<EndpointSlice> = Api::namespaced(api.client().await, NS);
        let selector = "kubernetes.io/service-name=vllm";
        let listed = slices.list(&ListParams::default().labels(selector)).await;
        let listed = listed.unwrap().items;
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].address_type, "IPv4");
        let conditions = |s: &EndpointSlice| -> Vec<_> {
            s.endpoints
                .iter()
                .map(|e| e.conditions.clone().unwrap().ready)
                .collect()
        };
        assert_eq!(conditions(&listed[0]), [Some(true), Some(false)]);
        let target = listed[0].endpoints[0].target_ref.clone().unwrap();
        assert_eq!(target.name.as_deref(), Some("vllm-0"));
        assert_eq!(target.uid, Some(objects::uid("v1", "Pod", NS, "vllm-0")));
        assert_eq!(listed[0].ports.as_ref().unwrap()[0].port, Some(8000));

        let mut events = events(slices, watcher::Config::default().labels(selector));
        let listed = until(&mut events, "InitDone").await;
        assert_eq!(listed, ["Init", "InitApply(vllm-abcde)", "InitDone"]);
        api.apply(slice("sgl-xyz12", "sgl", 30001, &theirs));
        api.apply(slice("vllm-abcde", "vllm", 8000, &two[..1]));
        let Ok(Event::Apply(scaled)) = next(&mut events).await else {
            panic!("not Apply")
        };
        assert_eq!(conditions(&scaled), [Some(true)]);
        api.delete("discovery.k8s.io/v1", "EndpointSlice", NS, "vllm-abcde");
        assert_eq!(describe(&next(&mut events).await), "Delete(vllm-abcde)");
        let sent = format!("labelSelector={selector}");
        let has_selector = |r: &String| r.split(['?', '&']).any(|p| p == sent);
        assert!(
            api.requests().iter().all(has_selector),
            "{:#?}",
            api.requests()
        );
    })
    .await;
}

#[tokio::test]
async fn streaming_lists_end_with_the_initial_events_bookmark() {
    bounded(async {
        let api = KubeApi::start().await;
        api.apply(vllm_pod(NS, "a", "node-1", "10.1.0.1", true));
        let mut events = pod_events(&api, watcher::Config::default().streaming_lists()).await;
        let listed = until(&mut events, "InitDone").await;
        assert_eq!(listed, ["Init", "InitApply(a)", "InitDone"]);
        api.apply(vllm_pod(NS, "b", "node-1", "10.1.0.2", true));
        assert_eq!(describe(&next(&mut events).await), "Apply(b)");
        let requests = api.requests();
        assert_eq!(requests.len(), 1, "no list: {requests:#?}");
        let initial = "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0";
        assert!(requests[0].contains(initial));
    })
    .await;
}

#[tokio::test]
async fn discovery_sees_installed_groups_only() {
    bounded(async {
        let api = KubeApi::start().await;
        let client = api.client().await;
        assert_eq!(
            client.default_namespace(),
            "default",
            "the kubeconfig's context"
        );
        let group = kube::discovery::group(&client, V1).await.unwrap();
        let (resource, caps) = group.recommended_resources().into_iter().next().unwrap();
        assert_eq!(resource.plural, "inferencepools");
        assert_eq!(resource.api_version, "inference.networking.k8s.io/v1");
        assert!(caps.supports_operation(kube::discovery::verbs::WATCH));
        let version = client.apiserver_version().await.unwrap();
        assert_eq!(
            (version.major.as_str(), version.minor.as_str()),
            ("1", "33")
        );

        api.install_group("inference.networking.k8s.io/v1", false);
        assert!(kube::discovery::group(&client, V1).await.is_err());
        let old = kube::discovery::group(&client, V1ALPHA2).await.unwrap();
        assert_eq!(old.preferred_version_or_latest(), "v1alpha2");
    })
    .await;
}
