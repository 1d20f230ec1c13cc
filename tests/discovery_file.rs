//! File discovery end to end: a Prometheus file_sd file names simulator "replicas"; the
//! daemon probes each as its own series (the block's `target` label, the file's labels,
//! `address`), follows the file as it changes, keeps the last good set when the file
//! breaks (discovery_up 0), and refuses what exceeds max_targets.

use crate::common;

use std::time::Duration;

use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::SimConfig;

fn sim() -> SimConfig {
    SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    }
}

fn write(path: &std::path::Path, groups: &[(&[String], &str)]) {
    let json: Vec<String> = groups
        .iter()
        .map(|(targets, labels)| {
            let targets: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
            format!(
                "{{\"targets\": [{}], \"labels\": {{{labels}}}}}",
                targets.join(", ")
            )
        })
        .collect();
    // Write then rename, as a discovery tool should: the daemon never reads half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("[{}]", json.join(", "))).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn series(s: &Scrape, address: &str) -> f64 {
    s.sum(
        "inferprobe_requests_total",
        &[("target", "replicas"), ("address", address)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_sd_file_is_followed_replica_by_replica() {
    let (a, b, c) = (
        start_sim(sim()).await,
        start_sim(sim()).await,
        start_sim(sim()).await,
    );
    let [a, b, c] = [&a, &b, &c].map(|s| s.addr.to_string());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sd.json");
    write(
        &file,
        &[(&[a.clone(), b.clone()], r#""model": "m", "zone": "east""#)],
    );
    let toml = format!(
        r#"
        seed = 5
        [[targets]]
        name = "static"
        url = "http://{a}"
        model = "m"
        rate = 5
        [[discovery]]
        name = "replicas"
        source = "file"
        path = "{}"
        refresh = "100ms"
        max_targets = 2
        [discovery.template]
        backend = "openai"
        rate = 5
        "#,
        file.display()
    );
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(20), |s| {
            series(s, &a) >= 2.0 && series(s, &b) >= 2.0
        })
        .await;
    let up = |s: &Scrape| s.sum("inferprobe_discovery_up", &[("discovery", "replicas")]);
    assert_eq!(up(&s), 1.0);
    assert_eq!(
        s.sum("inferprobe_discovery_targets", &[("discovery", "replicas")]),
        2.0
    );
    let labelled = s
        .matching("inferprobe_requests_total", &[("target", "replicas")])
        .all(|x| {
            x.labels["zone"] == "east"
                && x.labels["model"] == "m"
                && x.labels["backend"] == "openai"
        });
    assert!(labelled, "{}", s.text);
    assert_eq!(s.all_errors("replicas"), 0.0, "{}", s.text);

    // b leaves, c joins: b's series go, c's appear; the static target is untouched.
    write(
        &file,
        &[(&[a.clone(), c.clone()], r#""model": "m", "zone": "east""#)],
    );
    let s = daemon
        .wait_for(Duration::from_secs(20), |s| {
            series(s, &c) >= 1.0
                && s.matching("inferprobe_requests_total", &[("address", &b)])
                    .count()
                    == 0
        })
        .await;
    assert!(s.requests("static") >= 1.0);

    // Three endpoints with max_targets 2: the first two in order are probed, one refused.
    write(
        &file,
        &[(&[a.clone(), b.clone(), c.clone()], r#""model": "m""#)],
    );
    let s = daemon
        .wait_for(Duration::from_secs(20), |s| {
            s.sum(
                "inferprobe_discovery_refused_total",
                &[("discovery", "replicas")],
            ) >= 1.0
        })
        .await;
    assert_eq!(
        s.sum("inferprobe_discovery_targets", &[("discovery", "replicas")]),
        2.0
    );

    // A broken file keeps the last set probed, and says so.
    std::fs::write(&file, "[{\"targets\": [\"no-port\"]}]").unwrap();
    let s = daemon
        .wait_for(Duration::from_secs(20), |s| up(s) == 0.0)
        .await;
    let before = s.requests("replicas");
    let s = daemon
        .wait_for(Duration::from_secs(20), |s| {
            s.requests("replicas") >= before + 4.0
        })
        .await;
    assert_eq!(up(&s), 0.0);
    assert_eq!(
        s.sum("inferprobe_discovery_targets", &[("discovery", "replicas")]),
        2.0
    );

    // /config shows the discovered targets and where they came from.
    let config: serde_json::Value = daemon.get("/config", None).await.json().await.unwrap();
    let discovered = config["discovered"].as_array().unwrap();
    assert_eq!(discovered.len(), 2, "{config:#}");
    assert!(
        discovered[0]["origin"]
            .as_str()
            .unwrap()
            .contains("sd.json")
    );
    let page = daemon.get("/", None).await.text().await.unwrap();
    assert!(
        page.contains("replicas/") && page.contains("discovered:"),
        "{page}"
    );
    daemon.stop().await;
}
