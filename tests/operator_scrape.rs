//! The runbook's queries hold for the shipped PodMonitor (issue 33, item 4).
//!
//! The Prometheus Operator turns a PodMonitor into a scrape job whose relabelings set
//! `namespace`, `container` and `pod` from the pod, `job` to `<namespace>/<name>` (or to
//! the pod label `spec.jobLabel` names, when the pod has it), `endpoint` to the port's
//! name, then apply the PodMonitor's own relabelings (prometheus-operator,
//! `generatePodMonitorConfig`). This test renders config/kubernetes/podmonitor.yaml into
//! that scrape job, with the pod's metadata as the `__meta_kubernetes_*` labels Kubernetes
//! service discovery would give it, has Debian's Prometheus scrape the daemon with it, and
//! runs every query of docs/alerts.md that selects a `job`.

use crate::common;

use std::time::Duration;

use common::{start_daemon, start_sim};
use inferprobe::sim::SimConfig;
use serde_json::Value;

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A label name as the Operator sanitizes it (`app.kubernetes.io/name` → `app_kubernetes_io_name`).
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn yaml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("'{i}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// The scrape job the Operator writes for `monitor`'s first endpoint, scraping `address`
/// as the pod `pod` of the DaemonSet on `node`.
fn operator_job(monitor: &Value, address: &str, pod: &str, node: &str) -> String {
    let meta = &monitor["metadata"];
    let (namespace, name) = (
        meta["namespace"].as_str().unwrap(),
        meta["name"].as_str().unwrap(),
    );
    let spec = &monitor["spec"];
    let endpoint = &spec["podMetricsEndpoints"][0];
    let port = endpoint["port"].as_str().unwrap();
    let pod_labels: Vec<(String, String)> = spec["selector"]["matchLabels"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    let mut sd = vec![
        (
            "__meta_kubernetes_namespace".to_owned(),
            namespace.to_owned(),
        ),
        ("__meta_kubernetes_pod_name".to_owned(), pod.to_owned()),
        (
            "__meta_kubernetes_pod_node_name".to_owned(),
            node.to_owned(),
        ),
        (
            "__meta_kubernetes_pod_container_name".to_owned(),
            "inferprobe".to_owned(),
        ),
        (
            "__meta_kubernetes_pod_container_port_name".to_owned(),
            port.to_owned(),
        ),
    ];
    for (k, v) in &pod_labels {
        sd.push((
            format!("__meta_kubernetes_pod_label_{}", sanitize(k)),
            v.clone(),
        ));
        sd.push((
            format!("__meta_kubernetes_pod_labelpresent_{}", sanitize(k)),
            "true".into(),
        ));
    }
    let mut relabel = Vec::new();
    for (k, v) in &pod_labels {
        let k = sanitize(k);
        relabel.push(format!(
            "      - action: keep\n        source_labels: ['__meta_kubernetes_pod_label_{k}', '__meta_kubernetes_pod_labelpresent_{k}']\n        regex: '({v});true'\n"
        ));
    }
    relabel.push(format!(
        "      - action: keep\n        source_labels: ['__meta_kubernetes_pod_container_port_name']\n        regex: '{port}'\n"
    ));
    for (source, target) in [
        ("__meta_kubernetes_namespace", "namespace"),
        ("__meta_kubernetes_pod_container_name", "container"),
        ("__meta_kubernetes_pod_name", "pod"),
    ] {
        relabel.push(format!(
            "      - source_labels: ['{source}']\n        target_label: {target}\n"
        ));
    }
    relabel.push(format!(
        "      - target_label: job\n        replacement: '{namespace}/{name}'\n"
    ));
    if let Some(job_label) = spec["jobLabel"].as_str() {
        relabel.push(format!(
            "      - source_labels: ['__meta_kubernetes_pod_label_{}']\n        target_label: job\n        regex: '(.+)'\n        replacement: '${{1}}'\n",
            sanitize(job_label)
        ));
    }
    relabel.push(format!(
        "      - target_label: endpoint\n        replacement: '{port}'\n"
    ));
    for r in endpoint["relabelings"].as_array().into_iter().flatten() {
        let mut item = String::from("      - ");
        let mut first = true;
        for (key, value) in r.as_object().unwrap() {
            let key = match key.as_str() {
                "sourceLabels" => "source_labels",
                "targetLabel" => "target_label",
                other => other,
            };
            let value = match value {
                Value::Array(a) => yaml_list(
                    &a.iter()
                        .map(|v| v.as_str().unwrap().to_owned())
                        .collect::<Vec<_>>(),
                ),
                Value::String(s) => format!("'{s}'"),
                other => other.to_string(),
            };
            if !first {
                item.push_str("        ");
            }
            item.push_str(&format!("{key}: {value}\n"));
            first = false;
        }
        relabel.push(item);
    }
    let labels: Vec<String> = sd.iter().map(|(k, v)| format!("{k}: '{v}'")).collect();
    format!(
        "  - job_name: 'podMonitor/{namespace}/{name}/0'\n    honor_labels: {}\n    metrics_path: {}\n    static_configs:\n      - targets: ['{address}']\n        labels: {{{}}}\n    relabel_configs:\n{}",
        endpoint["honorLabels"].as_bool().unwrap_or(false),
        endpoint["path"].as_str().unwrap_or("/metrics"),
        labels.join(", "),
        relabel.concat()
    )
}

/// Every backticked query in docs/alerts.md that selects a `job`.
fn runbook_job_queries() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("docs/alerts.md")).unwrap();
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| span.contains("job="))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runbooks_job_queries_find_the_daemon_as_the_operator_labels_it() {
    let queries = runbook_job_queries();
    assert!(!queries.is_empty(), "docs/alerts.md names no job");
    let shipped: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root().join("config/kubernetes/podmonitor.yaml")).unwrap(),
    )
    .unwrap();
    // The same PodMonitor without jobLabel, under another name: what the Operator does
    // by default, to show the rendering applies it.
    let mut control = shipped.clone();
    control["metadata"]["name"] = "control".into();
    control["spec"].as_object_mut().unwrap().remove("jobLabel");

    let sim = start_sim(SimConfig::default()).await;
    let toml = format!(
        "[labels]\nnode = \"node-1\"\nprobe_pod = \"inferprobe-x7k2p\"\n[[targets]]\nname = \"t\"\nurl = \"{}\"\nmodel = \"m\"\nrate = 2\n",
        sim.url()
    );
    let daemon = start_daemon(&toml).await;
    let address = daemon.addr.to_string();
    let jobs = [
        operator_job(&shipped, &address, "inferprobe-x7k2p", "node-1"),
        operator_job(&control, &address, "inferprobe-x7k2p", "node-1"),
    ]
    .concat();
    let Some(prometheus) = common::prometheus::Prometheus::start_with(&jobs).await else {
        return;
    };
    prometheus
        .wait_for("count(up) >= 2", Duration::from_secs(30))
        .await;
    for query in &queries {
        let found = prometheus.query(query).await.unwrap();
        assert!(
            !found.is_empty(),
            "`{query}` (docs/alerts.md) finds nothing"
        );
        assert!(found.iter().all(|v| *v == 1.0), "`{query}`: {found:?}");
    }
    // The control: the Operator's default job, which the runbook's queries would miss.
    let default = prometheus
        .query("up{job=\"inferprobe/control\"}")
        .await
        .unwrap();
    assert_eq!(default, [1.0]);
    // The PodMonitor's own promises: the probe's node and pod on the daemon's own series,
    // and no Prometheus `pod`/`namespace` read as if a configured target ran in the probe.
    let process = prometheus
        .query("process_start_time_seconds{job=\"inferprobe\",node=\"node-1\",probe_pod=\"inferprobe-x7k2p\",pod=\"\",namespace=\"\"}")
        .await
        .unwrap();
    assert_eq!(process.len(), 1, "{process:?}");
    daemon.stop().await;
}
