//! Reloading: targets added, removed and changed start, stop and restart alone; a bad
//! configuration keeps the running one and says why; the file can be watched.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{Scrape, start_reloadable, start_sim};
use inferprobe::sim::SimConfig;

fn target(name: &str, url: &str, extra: &str) -> String {
    format!("[[targets]]\nname = \"{name}\"\nurl = \"{url}\"\nmodel = \"m\"\n{extra}\n")
}

fn write(path: &Path, body: &str) {
    write_with(path, "", body);
}

/// `top` holds top-level keys, which must come before `[defaults]`.
fn write_with(path: &Path, top: &str, targets: &str) {
    let text = format!("seed = 1\n{top}\n[defaults]\nrate = 20\noutput_tokens = 2\n{targets}");
    std::fs::write(path, text).unwrap();
}

fn series(s: &Scrape, target: &str) -> usize {
    s.samples
        .iter()
        .filter(|x| x.labels.get("target").map(String::as_str) == Some(target))
        .count()
}

fn reload_ok(s: &Scrape) -> f64 {
    s.sum("inferprobe_config_last_reload_successful", &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_starts_stops_and_restarts_targets_alone() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    })
    .await;
    let url = sim.url();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    write(
        &path,
        &[
            target("keep", &url, ""),
            target("drop", &url, ""),
            target("tune", &url, ""),
        ]
        .concat(),
    );
    let daemon = start_reloadable(&path).await;
    let before = daemon
        .wait_for(Duration::from_secs(10), |s| {
            ["keep", "drop", "tune"]
                .iter()
                .all(|t| s.requests(t) >= 5.0)
        })
        .await;
    assert_eq!(reload_ok(&before), 1.0);

    // keep: unchanged; drop: removed; tune: rate changed (same labels); new: added;
    // relabel: `tune`'s twin with a new model label replaces nothing but starts fresh.
    write(
        &path,
        &[
            target("keep", &url, ""),
            target("tune", &url, "rate = 40"),
            target("new", &url, ""),
        ]
        .concat(),
    );
    let (status, body) = daemon.reload().await;
    assert_eq!((status, body.as_str()), (200, "configuration reloaded\n"));
    let after = daemon
        .wait_for(Duration::from_secs(10), |s| s.requests("new") >= 3.0)
        .await;
    assert_eq!(
        series(&after, "drop"),
        0,
        "a removed target's series disappear"
    );
    assert!(
        after.requests("keep") >= before.requests("keep"),
        "counters continue"
    );
    assert!(
        after.requests("tune") >= before.requests("tune"),
        "same labels: counters continue"
    );
    assert_eq!(reload_ok(&after), 1.0);

    // A bad configuration: the running one stays, the failure is visible.
    std::fs::write(
        &path,
        "[[targets]]\nname = \"keep\"\nurl = \"http://x\"\nmodel = \"m\"\nrate = 0\n",
    )
    .unwrap();
    let (status, body) = daemon.reload().await;
    assert_eq!(status, 500);
    assert!(
        body.contains("`targets[0].rate`") && body.contains("keeping the running configuration"),
        "{body}"
    );
    let failed = daemon.scrape().await;
    assert_eq!(reload_ok(&failed), 0.0);
    let still = daemon
        .wait_for(Duration::from_secs(10), |s| {
            s.requests("new") > failed.requests("new")
                && s.requests("keep") > failed.requests("keep")
        })
        .await;
    assert!(
        series(&still, "tune") > 0,
        "the old configuration keeps running"
    );

    // A model change changes the labels: the old series go, new ones start at zero.
    write(
        &path,
        &[
            target("keep", &url, ""),
            target("new", &url, "").replace("model = \"m\"", "model = \"m2\""),
        ]
        .concat(),
    );
    let (status, _) = daemon.reload().await;
    assert_eq!(status, 200);
    let relabeled = daemon
        .wait_for(Duration::from_secs(10), |s| {
            s.sum(
                "inferprobe_requests_total",
                &[("target", "new"), ("model", "m2")],
            ) >= 1.0
        })
        .await;
    assert_eq!(
        relabeled.sum(
            "inferprobe_requests_total",
            &[("target", "new"), ("model", "m")]
        ),
        0.0
    );
    assert_eq!(series(&relabeled, "tune"), 0);
    assert_eq!(reload_ok(&relabeled), 1.0);
    let report = daemon.stop().await;
    assert_eq!(report.cut, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_file_reloads_itself() {
    let sim = start_sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let top = "watch_config = true\nwatch_interval = \"100ms\"";
    write_with(&path, top, &target("first", &sim.url(), ""));
    let daemon = start_reloadable(&path).await;
    daemon
        .wait_for(Duration::from_secs(10), |s| s.requests("first") >= 1.0)
        .await;
    write_with(&path, top, &target("second", &sim.url(), ""));
    let s = daemon
        .wait_for(Duration::from_secs(10), |s| {
            s.requests("second") >= 1.0 && series(s, "first") == 0
        })
        .await;
    assert_eq!(reload_ok(&s), 1.0);
    let config: serde_json::Value = daemon.get("/config", None).await.json().await.unwrap();
    assert_eq!(
        config["targets"][0]["name"], "second",
        "/config shows the running configuration"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_configuration_says_it_cannot_reload() {
    let sim = start_sim(SimConfig::default()).await;
    let daemon = common::start_daemon(&target("t", &sim.url(), "")).await;
    let (status, body) = daemon.reload().await;
    assert_eq!(status, 503);
    assert!(body.contains("fixed configuration"));
    let get = daemon.get("/-/reload", None).await;
    assert_eq!(get.status(), 405);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_file_reloads_by_itself() {
    let sim = start_sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("api-key");
    std::fs::write(&key, "sk-old\n").unwrap();
    let path = dir.path().join("config.toml");
    let extra = format!("api_key_file = \"{}\"", key.display());
    write_with(
        &path,
        "watch_config = true\nwatch_interval = \"100ms\"",
        &target("keyed", &sim.url(), &extra),
    );
    let daemon = start_reloadable(&path).await;
    let reloaded_at = |s: &Scrape| {
        s.sum(
            "inferprobe_config_last_reload_success_timestamp_seconds",
            &[],
        )
    };
    let before = daemon
        .wait_for(Duration::from_secs(10), |s| s.requests("keyed") >= 1.0)
        .await;
    tokio::time::sleep(Duration::from_millis(1100)).await; // the timestamp has second resolution at best
    std::fs::write(&key, "sk-new\n").unwrap(); // as the kubelet updates a mounted Secret
    let after = daemon
        .wait_for(Duration::from_secs(10), |s| {
            reloaded_at(s) > reloaded_at(&before)
        })
        .await;
    assert_eq!(reload_ok(&after), 1.0);
    daemon.stop().await;
}

/// Issue 61 review: a check taken off a target that keeps its labels takes its series
/// with it. Frozen, a session refusal's count and state would page for an hour on a check
/// no longer running (the tools page's own remedy is to take the session check off).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_taken_off_a_target_takes_its_series() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::ZERO,
        ..SimConfig::default()
    })
    .await;
    let url = sim.url();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let checks = r#"session = { interval = "200ms", human_gap = "5ms", tool_gap = "2ms" }
prefix_cache = { interval = "200ms", objective = 0.9 }"#;
    write(&path, &target("t", &url, checks));
    let daemon = start_reloadable(&path).await;
    daemon
        .wait_for(Duration::from_secs(30), |s| {
            s.sum("inferprobe_sessions_total", &[("target", "t")]) >= 1.0
                && s.sum("inferprobe_prefix_cache_checks_total", &[("target", "t")]) >= 1.0
        })
        .await;
    write(&path, &target("t", &url, ""));
    let (status, _) = daemon.reload().await;
    assert_eq!(status, 200);
    let checks = [
        "inferprobe_session_",
        "inferprobe_sessions_",
        "inferprobe_prefix_cache_",
    ];
    let after = daemon
        .wait_for(Duration::from_secs(10), |s| {
            s.requests("t") >= 1.0
                && !s
                    .samples
                    .iter()
                    .any(|x| checks.iter().any(|c| x.name.starts_with(c)))
        })
        .await;
    for name in [
        "inferprobe_session_",
        "inferprobe_sessions_",
        "inferprobe_prefix_cache_",
    ] {
        let left: Vec<String> = after
            .samples
            .iter()
            .filter(|x| x.name.starts_with(name))
            .map(|x| format!("{} {:?}", x.name, x.labels))
            .collect();
        assert!(left.is_empty(), "{name} series left: {left:?}");
    }
    daemon.stop().await;
}
