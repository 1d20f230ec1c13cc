//! Churn must not leak: hundreds of pods added and removed (with the API's history expiring
//! now and then, so the watcher re-lists too) leave the daemon with the tasks, series and
//! memory it had before. (bench/soak.py churns discovered targets by the thousand against
//! the built binary, with a file_sd file.)

mod common;

use std::time::Duration;

use common::kube_api::KubeApi;
use common::kube_api::objects::pod;
use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::SimConfig;

const NS: &str = "inference";
const CYCLES: usize = 500;
const BATCH: usize = 50;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn series(s: &Scrape) -> usize {
    s.samples
        .iter()
        .filter(|x| x.name.starts_with("inferprobe_"))
        .count()
}

fn tasks(s: &Scrape) -> f64 {
    s.sum("inferprobe_runtime_alive_tasks", &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_pods_coming_and_going_leave_nothing_behind() {
    let api = KubeApi::start().await;
    let server = start_sim(SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    })
    .await;
    let port = server.addr.port();
    let replica = |name: &str| {
        pod(
            NS,
            name,
            "node-1",
            Some("127.0.0.1"),
            true,
            &[("app", "vllm")],
            &[("http", port)],
        )
    };
    api.apply(replica("steady"));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    let daemon = start_daemon(&format!(
        r#"
        [kubernetes]
        kubeconfig = "{}"
        [[discovery]]
        name = "vllm"
        source = "pods"
        namespace = "{NS}"
        selector = "app=vllm"
        port = "http"
        max_targets = 1000
        [discovery.template]
        backend = "openai"
        model = "m"
        rate = 2
        "#,
        kubeconfig.display()
    ))
    .await;
    // The block's own count is set before the daemon applies its set: wait for the series.
    let settled = |s: &Scrape| {
        s.sum("inferprobe_discovery_targets", &[("discovery", "vllm")]) == 1.0
            && s.matching("inferprobe_requests_total", &[("target", "vllm")])
                .count()
                == 1
            && s.sum("inferprobe_requests_in_flight", &[]) == 0.0
    };
    // Pods come in batches, each batch probed as targets before it goes: every one of them
    // is really started and stopped, not coalesced away between two reads of the API.
    let count = |s: &Scrape| {
        s.matching("inferprobe_requests_total", &[("target", "vllm")])
            .count()
    };
    let churn = async |from: usize, to: usize| {
        for batch in (from..to).collect::<Vec<_>>().chunks(BATCH) {
            for i in batch {
                api.apply(replica(&format!("churn-{i}")));
            }
            daemon
                .wait_for(Duration::from_secs(30), |s| count(s) == batch.len() + 1)
                .await;
            for i in batch {
                api.delete("v1", "Pod", NS, &format!("churn-{i}"));
            }
            if batch[0] % 500 < BATCH {
                api.expire_history(); // and the watcher re-lists now and then
            }
            daemon
                .wait_for(Duration::from_secs(30), |s| count(s) == 1)
                .await;
        }
    };
    // Warm up (allocator pools, the first targets' code paths), then measure.
    churn(0, 200).await;
    let before = daemon
        .wait_for(Duration::from_secs(30), |s| {
            settled(s) && s.requests("vllm") >= 2.0
        })
        .await;
    let (rss_before, tasks_before, series_before) = (rss_kib(), tasks(&before), series(&before));
    churn(200, 200 + CYCLES).await;
    let after = daemon.wait_for(Duration::from_secs(60), settled).await;
    // The steady replica was probed throughout, and no churned one is left.
    assert!(after.requests("vllm") > before.requests("vllm"));
    assert_eq!(
        after
            .matching("inferprobe_requests_total", &[("target", "vllm")])
            .count(),
        1,
        "{}",
        after.text
    );
    // Probes and connections of the last stopped targets wind down within moments; a leak
    // never does.
    let after = daemon
        .wait_for(Duration::from_secs(30), |s| tasks(s) <= tasks_before + 2.0)
        .await;
    assert_eq!(series(&after), series_before, "series");
    let grown = rss_kib().saturating_sub(rss_before);
    assert!(
        grown < 16 * 1024,
        "RSS grew {grown} KiB over {CYCLES} add/remove cycles"
    );
    daemon.stop().await;
}
