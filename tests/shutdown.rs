//! Shutdown: a probe in flight when shutdown begins completes and is counted; SIGTERM
//! makes the binary drain and exit 0; a hard stop cuts probes without counting them.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{start_daemon, start_sim};
use inferprobe::sim::SimConfig;

fn slow_sim() -> SimConfig {
    SimConfig {
        ttft: Duration::from_millis(800),
        itl: Duration::from_millis(10),
        ..SimConfig::default()
    }
}

fn config(url: &str, grace: &str) -> String {
    format!(
        r#"
        seed = 5
        shutdown_grace = "{grace}"
        [[targets]]
        name = "t"
        url = "{url}"
        model = "m"
        rate = 20
        max_concurrency = 1
        output_tokens = 4
        "#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_in_flight_at_shutdown_completes_and_is_counted() {
    let sim = start_sim(slow_sim()).await;
    let daemon = start_daemon(&config(&sim.url(), "10s")).await;
    daemon
        .wait_for(Duration::from_secs(10), |s| {
            s.sum("inferprobe_requests_in_flight", &[("target", "t")]) == 1.0
        })
        .await;
    let report = daemon.stop().await;
    assert_eq!(report.in_flight, 1);
    assert_eq!(
        report.completed, 1,
        "recorded in the metrics during the drain"
    );
    assert_eq!(report.cut, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grace_period_bounds_the_drain() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_secs(30),
        ..slow_sim()
    })
    .await;
    let daemon = start_daemon(&config(&sim.url(), "200ms")).await;
    daemon
        .wait_for(Duration::from_secs(10), |s| {
            s.sum("inferprobe_requests_in_flight", &[("target", "t")]) == 1.0
        })
        .await;
    let started = std::time::Instant::now();
    let report = daemon.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!((report.in_flight, report.completed, report.cut), (1, 0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_then_exits_zero() {
    let sim = start_sim(slow_sim()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let toml = config(&sim.url(), "10s").replace("seed = 5", "seed = 5\nlisten = \"127.0.0.1:0\"");
    std::fs::write(&path, toml).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args([
            "run",
            "--config",
            path.to_str().unwrap(),
            "--log-format",
            "json",
            "--log-level",
            "debug",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut log = Vec::new();
    let mut next_line = || {
        let line = lines_rx
            .recv_timeout(Duration::from_secs(15))
            .expect("daemon log ended");
        log.push(line.clone());
        serde_json::from_str::<serde_json::Value>(&line).unwrap()
    };
    // Once probing starts an arrival comes every ~50 ms and takes 800 ms to its first
    // token, so 400 ms later exactly one probe is in flight (max_concurrency = 1).
    while next_line()["message"] != "probing" {}
    tokio::time::sleep(Duration::from_millis(400)).await;
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();

    let summary = loop {
        let line = next_line();
        if line["message"] == "shutdown complete" {
            break line;
        }
    };
    let status = child.wait().unwrap();
    assert!(status.success(), "exit status {status}");
    assert_eq!(summary["in_flight"], 1, "{log:#?}");
    assert_eq!(summary["completed"], 1);
    assert_eq!(summary["cut"], 0);
    assert!(
        log.iter().any(|l| l.contains("\"probe ok\"")),
        "the in-flight probe finished successfully: {log:#?}"
    );
}
