//! How the test API server fails as a real one does, and the watcher recovers: a 403 for
//! missing RBAC, a 404 for a CRD not installed yet, a server that goes away.

use super::*;

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
