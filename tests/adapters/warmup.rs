//! The adapter check's warm-up and its turns (issue 58, after review): an adapter placed
//! after the replica's warm-up gets one of its own, asking it alone; configured names on a
//! server that lists no adapter are asked at once; an adapter unloaded everywhere is never
//! counted missing.

use std::time::Duration;

use crate::common;
use common::adapters::{BAD, checks, lone_config, pool_config, pool_file, post, sim};
use common::{Scrape, start_daemon, start_sim};

/// An adapter loaded after the replica's warm-up (a controller loads adapters once the pod
/// is ready) gets a warm-up of its own: five judged answers each within seconds of the
/// next round, where one round an interval (20 s) would take 100 s. A configured name the
/// replica lists later is never `missing`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_loaded_after_the_warm_up_gets_its_own() {
    let server = start_sim(sim(&[], &[])).await;
    let config = lone_config(&server.url(), r#"interval = "20s", names = ["y"]"#);
    let daemon = start_daemon(&config).await;
    // The replica's own warm-up: the base model's rounds, nothing placed yet.
    let base = |s: &Scrape| s.sum("inferprobe_adapter_base_checks_total", &[]);
    daemon
        .wait_for(Duration::from_secs(30), |s| base(s) >= 8.0)
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for name in ["x", "y"] {
        let load = serde_json::json!({"lora_name": name, "lora_path": format!("/v1/{name}")});
        assert_eq!(
            post(&server.url(), "/v1/load_lora_adapter", load).await,
            200
        );
    }
    let count = |s: &Scrape, name: &str, result: &str| {
        let labels = [("adapter", name), ("result", result)];
        s.sum("inferprobe_adapter_checks_total", &labels)
    };
    let judged = |s: &Scrape, name: &str| {
        ["applied", "base_served", "diverged"]
            .iter()
            .map(|r| count(s, name, r))
            .sum::<f64>()
    };
    // The next round (within the interval) finds them and warms them up back to back.
    let loaded = std::time::Instant::now();
    let s = daemon
        .wait_for(Duration::from_secs(60), |s| {
            judged(s, "x") >= 5.0 && judged(s, "y") >= 5.0
        })
        .await;
    let took = loaded.elapsed();
    daemon.stop().await;
    assert!(took < Duration::from_secs(45), "{took:?}");
    for name in ["x", "y"] {
        for bad in BAD {
            assert_eq!(count(&s, name, bad), 0.0, "{name} {bad}");
        }
    }
}

/// One adapter loaded later beside 19 warmed ones: its warm-up asks it alone (each round the
/// base model and it), five judged answers in a few rounds, not a turn of all twenty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_adapter_s_warm_up_asks_it_alone() {
    let names: Vec<String> = (0..19).map(|i| format!("lora-{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let server = start_sim(sim(&refs, &[])).await;
    let config = lone_config(&server.url(), r#"interval = "10s""#);
    let daemon = start_daemon(&config).await;
    let base = |s: &Scrape| s.sum("inferprobe_adapter_base_checks_total", &[]);
    let judged = |s: &Scrape, name: &str| {
        ["applied", "base_served", "diverged"]
            .iter()
            .map(|r| {
                s.sum(
                    "inferprobe_adapter_checks_total",
                    &[("adapter", name), ("result", r)],
                )
            })
            .sum::<f64>()
    };
    // The first warm-up: every adapter five judged answers (or every prompt).
    daemon
        .wait_for(Duration::from_secs(60), |s| {
            names.iter().all(|n| judged(s, n) >= 5.0)
        })
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = daemon.scrape().await;
    let load = serde_json::json!({"lora_name": "zz", "lora_path": "/v1/zz"});
    assert_eq!(
        post(&server.url(), "/v1/load_lora_adapter", load).await,
        200
    );
    let after = daemon
        .wait_for(Duration::from_secs(60), |s| judged(s, "zz") >= 5.0)
        .await;
    daemon.stop().await;
    let rounds = base(&after) - base(&before);
    let others: f64 = names
        .iter()
        .map(|n| judged(&after, n) - judged(&before, n))
        .sum();
    // A round at the interval may fall in between (it asks two of the twenty).
    assert!(rounds <= 12.0, "{rounds} rounds for one late adapter");
    assert!(
        others <= 4.0,
        "{others} answers of the warmed adapters in its warm-up"
    );
}

/// Configured names on a server whose listing is not followed (`discover = false`) are
/// asked from the first rounds, not after the grace for late loading.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_names_of_a_server_that_lists_none_are_asked_at_once() {
    let server = start_sim(sim(&["a"], &[])).await;
    let config = lone_config(
        &server.url(),
        r#"interval = "4s", names = ["a"], discover = false"#,
    );
    let started = std::time::Instant::now();
    let daemon = start_daemon(&config).await;
    let applied = [("adapter", "a"), ("result", "applied")];
    daemon
        .wait_for(Duration::from_secs(60), |s| {
            s.sum("inferprobe_adapter_checks_total", &applied) >= 3.0
        })
        .await;
    let took = started.elapsed();
    daemon.stop().await;
    assert!(took < Duration::from_secs(4), "{took:?}: the grace is 12 s");
}

/// An adapter unloaded from every replica, one after the other, is never counted missing,
/// though the first replica's next round still sees the other's listing from before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_unloaded_everywhere_is_never_missing() {
    let (r0, r1) = (
        start_sim(sim(&["a"], &[])).await,
        start_sim(sim(&["a"], &[])).await,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = pool_file(dir.path(), &[&r0, &r1]);
    let daemon = start_daemon(&pool_config(&file, r#"interval = "1s""#)).await;
    daemon
        .wait_for(Duration::from_secs(60), |s| {
            checks(s, "r0", "a", "applied") >= 3.0 && checks(s, "r1", "a", "applied") >= 3.0
        })
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for r in [&r0, &r1] {
        let unload = serde_json::json!({"lora_name": "a"});
        assert_eq!(post(&r.url(), "/v1/unload_lora_adapter", unload).await, 200);
    }
    let mut missing = 0.0_f64;
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(6) {
        let s = daemon.scrape().await;
        let now = ["r0", "r1"].map(|pod| checks(&s, pod, "a", "missing"));
        missing = missing.max(now[0] + now[1]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let page = daemon.get("/", None).await.text().await.unwrap();
    let s = daemon.scrape().await;
    daemon.stop().await;
    assert_eq!(missing, 0.0);
    assert!(!page.contains("not listed here"));
    // Its series went with it.
    let series = s.matching("inferprobe_adapter_checks_total", &[("adapter", "a")]);
    assert_eq!(series.count(), 0);
}
