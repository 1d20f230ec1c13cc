//! The two shipped examples, as written (only the kubeconfig is added, as a user outside the
//! cluster would), against the test Kubernetes API server: examples/node-local-vllm.toml
//! probes the vLLM pods on this node, examples/inferencepool.toml every member of the
//! pool and the gateway in front of it.

mod common;

use std::path::Path;
use std::time::Duration;

use common::kube_api::KubeApi;
use common::kube_api::objects::{inference_pool_v1, pod};
use common::{Daemon, start_sim};
use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use inferprobe::config::{self, RawConfig};
use inferprobe::sim::SimConfig;
use inferprobe::{Shutdown, run};
use tokio::net::TcpListener;

/// The example, with the test API server's kubeconfig, in the daemon.
async fn start_example(name: &str, kubeconfig: &Path) -> Daemon {
    // What the DaemonSet's downward API would set; both examples read the same values.
    // SAFETY: set before any daemon of this binary reads them, to the same values.
    unsafe {
        std::env::set_var("NODE_NAME", "node-1");
        std::env::set_var("POD_NAME", "inferprobe-abcde");
        std::env::set_var("POD_NAMESPACE", "inferprobe");
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    let raw: RawConfig = Figment::from(Toml::file_exact(&path))
        .merge(Serialized::default("kubernetes.kubeconfig", kubeconfig))
        .extract()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let config = config::validate(&raw).unwrap_or_else(|e| panic!("{name}: {e}"));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = Shutdown::new();
    let handle = tokio::spawn(run(listener, config, shutdown.clone()));
    Daemon::from_parts(addr, shutdown, handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_local_vllm_probes_the_pods_on_this_node() {
    let api = KubeApi::start().await;
    let server = start_sim(SimConfig::default()).await;
    let port = server.addr.port();
    for (name, node) in [
        ("vllm-0", "node-1"),
        ("vllm-1", "node-1"),
        ("vllm-2", "node-2"),
    ] {
        api.apply(pod(
            "inference",
            name,
            node,
            Some("127.0.0.1"),
            true,
            &[
                ("app.kubernetes.io/name", "vllm"),
                ("app.kubernetes.io/version", "0.11.0"),
                ("model", "llama-3.1-8b-instruct"),
            ],
            &[("http", port)],
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = start_example("node-local-vllm.toml", &api.write_kubeconfig(dir.path())).await;
    let s = daemon
        .wait_for(Duration::from_secs(45), |s| {
            s.replica("vllm-local", "vllm-0") >= 1.0 && s.replica("vllm-local", "vllm-1") >= 1.0
        })
        .await;
    daemon.stop().await;
    assert!(
        !s.text.contains("pod=\"vllm-2\""),
        "vllm-2 runs on another node"
    );
    let series = s
        .matching("inferprobe_requests_total", &[("target", "vllm-local")])
        .next()
        .unwrap();
    for (label, value) in [
        ("model", "llama-3.1-8b-instruct"),
        ("node", "node-1"),
        ("namespace", "inference"),
        ("app_kubernetes_io_version", "0.11.0"),
        ("probe_pod", "inferprobe-abcde"),
        ("tier", "gold"),
    ] {
        assert_eq!(
            series.labels.get(label).map(String::as_str),
            Some(value),
            "{label}"
        );
    }
    assert_eq!(s.all_errors("vllm-local"), 0.0, "{}", s.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inferencepool_probes_every_member_and_the_gateway() {
    let api = KubeApi::start().await;
    let server = start_sim(SimConfig::default()).await;
    let port = server.addr.port();
    api.apply(inference_pool_v1(
        "inference",
        "llama-pool",
        &[("app", "llama")],
        port,
    ));
    for (name, node) in [("llama-0", "node-1"), ("llama-1", "node-2")] {
        api.apply(pod(
            "inference",
            name,
            node,
            Some("127.0.0.1"),
            true,
            &[("app", "llama")],
            &[("http", port)],
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = start_example("inferencepool.toml", &api.write_kubeconfig(dir.path())).await;
    // fleet_rate 0.5 with no probe pods listed yet: this pod runs it all, 0.5/s per target.
    let s = daemon
        .wait_for(Duration::from_secs(45), |s| {
            s.replica("llama-pool", "llama-0") >= 1.0
                && s.replica("llama-pool", "llama-1") >= 1.0
                && s.replica("llama-pool", "") >= 1.0
        })
        .await;
    daemon.stop().await;
    // The gateway (inference-gateway.inference.svc.cluster.local) does not resolve here.
    let gateway_failed = s
        .matching(
            "inferprobe_request_errors_total",
            &[("target", "llama-pool")],
        )
        .filter(|x| !x.labels.contains_key("pod"))
        .map(|x| x.value)
        .sum::<f64>();
    assert_eq!(gateway_failed, s.replica("llama-pool", ""), "{}", s.text);
    for member in ["llama-0", "llama-1"] {
        let ok = s
            .matching(
                "inferprobe_e2e_request_latency_seconds_count",
                &[("pod", member)],
            )
            .map(|x| x.value)
            .sum::<f64>();
        assert_eq!(ok, s.replica("llama-pool", member), "{member}: {}", s.text);
    }
    assert_eq!(
        s.sum("inferprobe_target_rate", &[("target", "llama-pool")]),
        1.5,
        "three targets at fleet_rate 0.5 on a fleet of one"
    );
}
