//! Kubernetes discovery end to end: the daemon, with kube-rs against the in-process test API
//! server (tests/common/kube_api.rs), probing simulators as the discovered pods' servers.
//!
//! Shown: only this node's pods are probed (the node is a field selector sent to the API
//! server); an unready pod stops and a moved one restarts; an InferencePool is probed member
//! by member and through its gateway, in both API versions, following membership and
//! selector changes; EndpointSlices give a Service's ready endpoints; the fleet divides a
//! `fleet_rate`; and an API that forbids, loses its CRD or goes away keeps the last set
//! probed with `discovery_up` at 0.

mod common;
#[path = "discovery_kube/pools.rs"]
mod pools;

use std::time::Duration;

use common::kube_api::KubeApi;
use common::kube_api::objects::{
    endpoint_slice, inference_pool_v1, inference_pool_v1alpha2, pod, with_labels,
};
use common::{Daemon, Scrape, Sim, start_daemon, start_sim};
use inferprobe::sim::SimConfig;
use serde_json::Value;

const NS: &str = "inference";
const WAIT: Duration = Duration::from_secs(30);

async fn sim() -> Sim {
    start_sim(SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    })
    .await
}

fn vllm(name: &str, node: &str, sim: &Sim, ready: bool, labels: &[(&str, &str)]) -> Value {
    pod(
        NS,
        name,
        node,
        Some("127.0.0.1"),
        ready,
        labels,
        &[("http", sim.addr.port())],
    )
}

/// A kubeconfig for `api` in a directory that lives as long as the returned guard.
fn kubeconfig(api: &KubeApi) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = api.write_kubeconfig(dir.path());
    (dir, path.display().to_string())
}

fn up(s: &Scrape, block: &str) -> f64 {
    s.sum("inferprobe_discovery_up", &[("discovery", block)])
}

async fn wait(daemon: &Daemon, done: impl Fn(&Scrape) -> bool) -> Scrape {
    daemon.wait_for(WAIT, done).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pods_on_this_node_are_probed_one_by_one() {
    // SAFETY: only this test reads this variable.
    unsafe { std::env::set_var("INFERPROBE_TEST_NODE_PODS", "node-1") };
    let api = KubeApi::start().await;
    let (a, b, c) = (sim().await, sim().await, sim().await);
    let labels = [("app", "vllm"), ("model", "llama")];
    api.apply(vllm("vllm-a", "node-1", &a, true, &labels));
    api.apply(vllm("vllm-b", "node-1", &b, true, &labels));
    api.apply(vllm("vllm-c", "node-2", &c, true, &labels));
    let (_dir, kubeconfig) = kubeconfig(&api);
    let daemon = start_daemon(&format!(
        r#"
        seed = 1
        [kubernetes]
        kubeconfig = "{kubeconfig}"
        node_name_env = "INFERPROBE_TEST_NODE_PODS"
        [[discovery]]
        name = "vllm"
        source = "pods"
        namespace = "{NS}"
        selector = "app=vllm"
        port = "http"
        node_local = true
        model_label = "model"
        [discovery.template]
        backend = "openai"
        rate = 8
        "#
    ))
    .await;
    let s = wait(&daemon, |s| {
        s.replica("vllm", "vllm-a") >= 2.0 && s.replica("vllm", "vllm-b") >= 2.0
    })
    .await;
    assert!(!s.has_replica("vllm", "vllm-c"), "another node's pod");
    let series: Vec<_> = s
        .matching("inferprobe_requests_total", &[("target", "vllm")])
        .collect();
    assert!(
        series.iter().all(|x| x.labels["node"] == "node-1"
            && x.labels["namespace"] == NS
            && x.labels["model"] == "llama"),
        "{}",
        s.text
    );
    assert_eq!(s.all_errors("vllm"), 0.0, "{}", s.text);
    assert_eq!(up(&s, "vllm"), 1.0);
    // The node was a field selector the API server applied, not a filter after listing
    // the cluster.
    let requests = api.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.contains("fieldSelector=spec.nodeName=node-1")),
        "{requests:#?}"
    );

    // vllm-b goes unready: its series go; vllm-a's stay.
    api.apply(vllm("vllm-b", "node-1", &b, false, &labels));
    let s = wait(&daemon, |s| !s.has_replica("vllm", "vllm-b")).await;
    assert!(s.has_replica("vllm", "vllm-a"));

    // vllm-a moves to another port (c's server): same series, new address.
    let before = s.replica("vllm", "vllm-a");
    api.apply(vllm("vllm-a", "node-1", &c, true, &labels));
    let moved = |config: &Value| {
        config["discovered"].as_array().is_some_and(|d| {
            d.iter().any(|t| {
                t["url"]
                    .as_str()
                    .unwrap_or("")
                    .contains(&c.addr.port().to_string())
            })
        })
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    while !moved(&daemon.get("/config", None).await.json().await.unwrap()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "vllm-a did not move"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = wait(&daemon, |s| s.replica("vllm", "vllm-a") >= before + 2.0).await;
    assert_eq!(s.all_errors("vllm"), 0.0);

    // And away: nothing left to probe.
    api.delete("v1", "Pod", NS, "vllm-a");
    let s = wait(&daemon, |s| !s.has_replica("vllm", "vllm-a")).await;
    assert_eq!(
        s.sum("inferprobe_discovery_targets", &[("discovery", "vllm")]),
        0.0
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_services_ready_endpoints_are_probed() {
    // SAFETY: only this test reads this variable.
    unsafe { std::env::set_var("INFERPROBE_TEST_NODE_SLICES", "node-1") };
    let api = KubeApi::start().await;
    let server = sim().await;
    let port = server.addr.port();
    api.apply(endpoint_slice(
        NS,
        "vllm-abc12",
        "vllm",
        "http",
        port,
        &[
            ("127.0.0.1", "node-1", "vllm-0", Some(true)),
            ("127.0.0.2", "node-1", "vllm-1", Some(false)),
            ("127.0.0.3", "node-2", "vllm-2", Some(true)),
            ("127.0.0.4", "node-1", "vllm-3", None),
        ],
    ));
    let (_dir, kubeconfig) = kubeconfig(&api);
    let daemon = start_daemon(&format!(
        r#"
        [kubernetes]
        kubeconfig = "{kubeconfig}"
        node_name_env = "INFERPROBE_TEST_NODE_SLICES"
        [[discovery]]
        name = "svc"
        source = "endpointslices"
        namespace = "{NS}"
        service = "vllm"
        node_local = true
        [discovery.template]
        backend = "openai"
        model = "m"
        rate = 8
        connect_timeout = "200ms"
        "#
    ))
    .await;
    // vllm-0 (ready, this node) and vllm-3 (ready unknown: ready) on node-1; vllm-1 is
    // unready; vllm-2 is on another node. (127.0.0.4 answers nobody: connect errors.)
    let s = wait(&daemon, |s| {
        s.replica("svc", "vllm-0") >= 2.0 && s.replica("svc", "vllm-3") >= 1.0
    })
    .await;
    assert!(!s.has_replica("svc", "vllm-1") && !s.has_replica("svc", "vllm-2"));
    assert!(
        api.requests()
            .iter()
            .any(|r| r.contains("labelSelector=kubernetes.io/service-name=vllm")),
        "{:#?}",
        api.requests()
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_rate_is_divided_by_the_ready_probe_pods() {
    let api = KubeApi::start().await;
    let server = sim().await;
    let (_dir, kubeconfig) = kubeconfig(&api);
    let daemon = start_daemon(&format!(
        r#"
        [kubernetes]
        kubeconfig = "{kubeconfig}"
        fleet_selector = "app.kubernetes.io/name=inferprobe"
        fleet_namespace = "monitoring"
        [[targets]]
        name = "gateway"
        url = "{}"
        model = "m"
        backend = "openai"
        fleet_rate = 8
        "#,
        server.url()
    ))
    .await;
    let rate = |s: &Scrape| s.sum("inferprobe_target_rate", &[("target", "gateway")]);
    let fleet = |s: &Scrape| s.sum("inferprobe_fleet_size", &[]);
    let s = wait(&daemon, |s| s.requests("gateway") >= 1.0).await;
    assert_eq!(
        (fleet(&s), rate(&s)),
        (1.0, 8.0),
        "no probe pods listed yet"
    );

    let probe = |name: &str, ready: bool| {
        pod(
            "monitoring",
            name,
            "node-x",
            Some("10.9.0.1"),
            ready,
            &[("app.kubernetes.io/name", "inferprobe")],
            &[("metrics", 9464)],
        )
    };
    for i in 0..4 {
        api.apply(probe(&format!("inferprobe-{i}"), true));
    }
    let s = wait(&daemon, |s| fleet(s) == 4.0).await;
    assert_eq!(rate(&s), 2.0);
    api.apply(probe("inferprobe-3", false));
    let s = wait(&daemon, |s| fleet(s) == 3.0).await;
    assert!((rate(&s) - 8.0 / 3.0).abs() < 1e-9, "{}", rate(&s));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_api_keeps_the_last_targets_probed() {
    let api = KubeApi::start().await;
    let server = sim().await;
    api.apply(vllm("p", "node-1", &server, true, &[("app", "vllm")]));
    let (_dir, kubeconfig) = kubeconfig(&api);
    let daemon = start_daemon(&format!(
        r#"
        [kubernetes]
        kubeconfig = "{kubeconfig}"
        [[discovery]]
        name = "pods"
        source = "pods"
        selector = "app=vllm"
        port = "http"
        [discovery.template]
        backend = "openai"
        model = "m"
        rate = 8
        [[discovery]]
        name = "pool"
        source = "inferencepool"
        namespace = "{NS}"
        pool = "llama"
        [discovery.template]
        backend = "openai"
        model = "m"
        rate = 8
        "#
    ))
    .await;
    let s = wait(&daemon, |s| s.replica("pods", "p") >= 2.0).await;
    assert_eq!(up(&s, "pods"), 1.0);

    // RBAC withdrawn: the next watch is refused. The pod stays probed.
    api.forbid("pods", true);
    api.drop_watches();
    let s = wait(&daemon, |s| up(s, "pods") == 0.0).await;
    let before = s.replica("pods", "p");
    wait(&daemon, |s| s.replica("pods", "p") >= before + 3.0).await;
    api.forbid("pods", false);
    wait(&daemon, |s| up(s, "pods") == 1.0).await;

    // The API server goes away: the same.
    api.set_down(true);
    let s = wait(&daemon, |s| up(s, "pods") == 0.0).await;
    let before = s.replica("pods", "p");
    wait(&daemon, |s| s.replica("pods", "p") >= before + 3.0).await;
    api.set_down(false);
    wait(&daemon, |s| up(s, "pods") == 1.0).await;

    // The InferencePool CRD is not installed: a 404, until it is.
    api.install_group("inference.networking.k8s.io/v1", false);
    api.drop_watches();
    wait(&daemon, |s| up(s, "pool") == 0.0).await;
    api.install_group("inference.networking.k8s.io/v1", true);
    api.apply(inference_pool_v1(
        NS,
        "llama",
        &[("app", "vllm")],
        server.addr.port(),
    ));
    api.apply(vllm("member", "node-1", &server, true, &[("app", "vllm")]));
    let s = wait(&daemon, |s| {
        up(s, "pool") == 1.0 && s.replica("pool", "member") >= 1.0
    })
    .await;
    assert!(s.replica("pods", "p") >= 1.0);
    daemon.stop().await;
}
