//! InferencePools: probed member by member and through the gateway, in both API
//! versions, following membership and selector changes; a pool that is missing still has
//! its gateway probed.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inference_pool_is_probed_member_by_member_and_through_its_gateway() {
    for version in ["v1", "v1alpha2"] {
        let api = KubeApi::start().await;
        let (members, gateway) = (sim().await, sim().await);
        let port = members.addr.port();
        let pool = |selector: &[(&str, &str)]| match version {
            "v1" => inference_pool_v1(NS, "llama", selector, port),
            _ => inference_pool_v1alpha2(NS, "llama", selector, port),
        };
        api.apply(pool(&[("app", "llama")]));
        for (name, app) in [("m1", "llama"), ("m2", "llama"), ("m3", "other")] {
            api.apply(vllm(name, "node-1", &members, true, &[("app", app)]));
        }
        let (_dir, kubeconfig) = kubeconfig(&api);
        let daemon = start_daemon(&format!(
            r#"
            [kubernetes]
            kubeconfig = "{kubeconfig}"
            [[discovery]]
            name = "llama"
            source = "inferencepool"
            namespace = "{NS}"
            pool = "llama"
            pool_version = "{version}"
            gateway = "{}"
            [discovery.template]
            backend = "openai"
            model = "m"
            rate = 8
            "#,
            gateway.url()
        ))
        .await;
        let s = wait(&daemon, |s| {
            ["m1", "m2", ""]
                .iter()
                .all(|p| s.replica("llama", p) >= 2.0)
        })
        .await;
        assert!(!s.has_replica("llama", "m3"), "{version}: not a member");
        assert!(
            s.matching("inferprobe_requests_total", &[("target", "llama")])
                .all(|x| x.labels["pool"] == "llama"),
            "{version}: {}",
            s.text
        );

        // Membership follows pod labels: m2 leaves, m3 joins.
        api.apply(vllm("m2", "node-1", &members, true, &[("app", "other")]));
        api.apply(vllm("m3", "node-1", &members, true, &[("app", "llama")]));
        let s = wait(&daemon, |s| {
            !s.has_replica("llama", "m2") && s.replica("llama", "m3") >= 1.0
        })
        .await;
        assert!(s.has_replica("llama", "m1"));

        // The pool's own selector changes: only pods labelled for it remain.
        api.apply(with_labels(
            vllm("m2", "node-1", &members, true, &[("app", "other")]),
            &[("pool", "next")],
        ));
        api.apply(pool(&[("pool", "next")]));
        let s = wait(&daemon, |s| {
            !s.has_replica("llama", "m1")
                && !s.has_replica("llama", "m3")
                && s.replica("llama", "m2") >= 1.0
        })
        .await;
        assert!(s.replica("llama", "") >= 2.0, "the gateway stays");
        daemon.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_pool_still_probes_its_gateway() {
    let api = KubeApi::start().await;
    let (members, gateway) = (sim().await, sim().await);
    let (_dir, kubeconfig) = kubeconfig(&api);
    let daemon = start_daemon(&format!(
        r#"
        [kubernetes]
        kubeconfig = "{kubeconfig}"
        [[discovery]]
        name = "llama"
        source = "inferencepool"
        namespace = "{NS}"
        pool = "llama"
        gateway = "{}"
        [discovery.template]
        backend = "openai"
        model = "m"
        rate = 8
        "#,
        gateway.url()
    ))
    .await;
    let s = wait(&daemon, |s| s.replica("llama", "") >= 2.0).await;
    assert_eq!(up(&s, "llama"), 1.0, "no pool yet is not a failure");
    // The pool appears: its members join the gateway.
    api.apply(inference_pool_v1(
        NS,
        "llama",
        &[("app", "llama")],
        members.addr.port(),
    ));
    api.apply(vllm("m1", "node-1", &members, true, &[("app", "llama")]));
    wait(&daemon, |s| s.replica("llama", "m1") >= 1.0).await;
    // And goes: only the gateway is left.
    api.delete(
        "inference.networking.k8s.io/v1",
        "InferencePool",
        NS,
        "llama",
    );
    let s = wait(&daemon, |s| !s.has_replica("llama", "m1")).await;
    assert!(s.has_replica("llama", ""));
    daemon.stop().await;
}
