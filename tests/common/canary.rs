//! The canary's test fixtures: simulators with given weights as replicas (file_sd or pods
//! on the test API server), a daemon checking them every 20 ms, and counts of its checks.

use std::time::Duration;

use inferprobe::sim::SimConfig;
use inferprobe::sim::model::ModelFlags;

use super::{Scrape, Sim, start_sim};

pub fn sim(weights_seed: u64) -> SimConfig {
    SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::from_micros(200),
        model: Box::new(ModelFlags {
            weights_seed,
            ..ModelFlags::default()
        }),
        ..SimConfig::default()
    }
}

pub fn checks(s: &Scrape, labels: &[(&str, &str)], result: &str) -> f64 {
    let mut labels = labels.to_vec();
    labels.push(("result", result));
    s.sum("inferprobe_canary_checks_total", &labels)
}

/// Checks of `pod` that were scored (matched or diverged).
pub fn scored(s: &Scrape, pod: &str) -> f64 {
    let pod = [("pod", pod)];
    checks(s, &pod, "match") + checks(s, &pod, "diverged")
}

/// The scrape once every pod in `pods` had `n` scored checks.
pub async fn scored_by(daemon: &super::Daemon, pods: &[String], n: f64) -> Scrape {
    daemon
        .wait_for(Duration::from_secs(60), |s| {
            pods.iter().all(|pod| scored(s, pod) >= n)
        })
        .await
}

pub fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// A pod to serve: the simulator's weights seed, its node and its labels.
pub type KubePod<'a> = (u64, String, Vec<(&'a str, &'a str)>);

/// A simulator per `(weights seed, node, labels)`, each a Ready pod `llm-<i>` of namespace
/// `inference` on the test API server; the simulators live as long as the returned vector.
pub async fn kube_pods(api: &super::kube_api::KubeApi, pods: &[KubePod<'_>]) -> Vec<Sim> {
    let mut sims = Vec::new();
    for (i, (seed, node, labels)) in pods.iter().enumerate() {
        let sim = start_sim(sim(*seed)).await;
        api.apply(super::kube_api::objects::pod(
            "inference",
            &format!("llm-{i}"),
            node,
            Some("127.0.0.1"),
            true,
            labels,
            &[("http", sim.addr.port())],
        ));
        sims.push(sim);
    }
    sims
}

/// The daemon's configuration for a `pods` block `llm` of namespace `inference` on the
/// test API server: `block` adds to the block, `template` to its template.
pub fn kube_config(kubeconfig: &std::path::Path, block: &str, template: &str) -> String {
    let node = if block.contains("node_local") {
        r#"node_name_env = "INFERPROBE_TEST_NODE_VOTES""#
    } else {
        ""
    };
    format!(
        r#"
        seed = 1
        [kubernetes]
        kubeconfig = "{}"
        {node}
        [[discovery]]
        name = "llm"
        source = "pods"
        namespace = "inference"
        selector = "app=llm"
        port = "http"
        {block}
        [discovery.template]
        backend = "openai-chat"
        rate = 0.001
        canary = {{ interval = "20ms", max_tokens = 16 }}
        {template}
        "#,
        kubeconfig.display()
    )
}

/// A file_sd pool: each simulator a pod `r<i>` labelled with its version.
pub fn version_pool(dir: &std::path::Path, sims: &[(&Sim, &str)]) -> std::path::PathBuf {
    let addresses: Vec<String> = sims.iter().map(|(s, _)| s.addr.to_string()).collect();
    let labels: Vec<[(&str, &str); 2]> = sims
        .iter()
        .map(|&(_, version)| [("model", "m"), ("version", version)])
        .collect();
    let members: Vec<_> = addresses
        .iter()
        .zip(&labels)
        .map(|(a, l)| (a.as_str(), &l[..]))
        .collect();
    super::pool_file(dir, &members)
}

/// A file_sd block `pool` over `file` whose template runs `canary = { CANARY }`.
pub fn pool_config(file: &std::path::Path, canary: &str) -> String {
    format!(
        r#"
        seed = 3
        [[discovery]]
        name = "pool"
        source = "file"
        path = "{}"
        refresh = "100ms"
        [discovery.template]
        backend = "openai-chat"
        rate = 0.001
        canary = {{ {canary} }}
        "#,
        file.display()
    )
}

/// [`pool_config`] checked every 20 ms, 16 tokens, with `group_by` added (`, group_by = …`).
pub fn file_config(file: &std::path::Path, group_by: &str) -> String {
    pool_config(
        file,
        &format!(r#"interval = "20ms", max_tokens = 16{group_by}"#),
    )
}

/// Record a golden file from `url` (the simulator's model `m`, 16 tokens) for `group`.
pub async fn record_golden(url: String, group: &str, path: &std::path::Path) {
    let args = inferprobe::canary::record::RecordArgs {
        url: Some(url),
        model: Some("m".into()),
        max_tokens: Some(16),
        group: Some(group.into()),
        out: path.to_owned(),
        ..Default::default()
    };
    let recorded = inferprobe::canary::record::record(&args).await.unwrap();
    inferprobe::canary::record::write(&recorded, path).unwrap();
}
