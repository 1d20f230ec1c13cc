//! The other resources discovery reads: InferencePools of both API versions as dynamic
//! objects, a Service's EndpointSlices, streaming lists, and API discovery of installed groups.

use super::*;

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
