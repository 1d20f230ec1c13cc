//! Shutdown and restart: a probe in flight when shutdown begins completes and is counted;
//! SIGTERM makes the binary drain and exit 0, and in the middle of a burst every request the
//! server saw is measured; a hard stop cuts probes without counting them; after SIGKILL a
//! restarted daemon probes again within one interval.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::process::DaemonProcess;
use common::{start_daemon, start_sim};
use inferprobe::sim::SimConfig;

const LOG_WAIT: Duration = Duration::from_secs(15);

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
    let mut daemon = DaemonProcess::spawn(&path);
    // Once probing starts an arrival comes every ~50 ms and takes 800 ms to its first
    // token, so 400 ms later exactly one probe is in flight (max_concurrency = 1).
    daemon.wait_for("probing", LOG_WAIT);
    tokio::time::sleep(Duration::from_millis(400)).await;
    daemon.signal("TERM");
    let summary = daemon.wait_for("shutdown complete", LOG_WAIT);
    let status = daemon.wait();
    assert!(status.success(), "exit status {status}");
    let log = &daemon.log;
    assert_eq!(summary["in_flight"], 1, "{log:#?}");
    assert_eq!(summary["completed"], 1);
    assert_eq!(summary["cut"], 0);
    assert!(
        log.iter().any(|l| l.contains("\"probe ok\"")),
        "the in-flight probe finished successfully: {log:#?}"
    );
}

/// SIGTERM in the middle of a burst: every request the server saw is measured and logged,
/// none is cut, and the drain report accounts for all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_burst_loses_no_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let timeline = dir.path().join("timeline.jsonl");
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(300),
        itl: Duration::from_millis(30),
        timeline_file: Some(timeline.clone()),
        ..SimConfig::default()
    })
    .await;
    let path = dir.path().join("config.toml");
    let targets: String = ["burst-a", "burst-b"]
        .iter()
        .map(|name| {
            format!(
                "[[targets]]\nname = \"{name}\"\nurl = \"{}\"\nmodel = \"m\"\nrate = 40\n\
                 burstiness = 0.3\nmax_concurrency = 64\noutput_tokens = 10\n",
                sim.url()
            )
        })
        .collect();
    let toml = format!("listen = \"127.0.0.1:0\"\nshutdown_grace = \"20s\"\n{targets}");
    std::fs::write(&path, toml).unwrap();
    let mut daemon = DaemonProcess::spawn(&path);
    daemon.wait_for("probing", LOG_WAIT);
    daemon.wait_for("probing", LOG_WAIT);
    // Probes take ~0.6 s: after 1.5 s at 80 arrivals/s dozens are in flight.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    daemon.signal("TERM");
    let summary = daemon.wait_for("shutdown complete", LOG_WAIT);
    assert!(daemon.wait().success());
    let in_flight = summary["in_flight"].as_u64().unwrap();
    assert!(in_flight >= 10, "not a burst: {summary}");
    assert_eq!(summary["completed"], in_flight, "{summary}");
    assert_eq!(summary["cut"], 0, "{summary}");

    let measured: BTreeSet<String> = daemon
        .log
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["message"] == "probe ok" || l["message"] == "probe failed")
        .map(|l| l["request_id"].as_str().unwrap().to_owned())
        .collect();
    // The simulator writes a response's line once its last byte is out.
    let mut served = BTreeSet::new();
    for _ in 0..100 {
        served = std::fs::read_to_string(&timeline)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|l| l["request_id"].as_str().unwrap().to_owned())
            .collect();
        if served.len() >= measured.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        served, measured,
        "every request the server saw has a measurement"
    );
}

/// After SIGKILL (no drain, no goodbye) a restarted daemon binds the same port at once and
/// sends its first probe within one mean interval of starting: the random start offset is
/// drawn within one gap, never a full gap plus a wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_and_restart_resume_probing_within_one_interval() {
    let sim = start_sim(SimConfig::default()).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let interval = Duration::from_secs(2);
    let toml = format!(
        "listen = \"127.0.0.1:{port}\"\n[[targets]]\nname = \"t\"\nurl = \"{}\"\n\
         model = \"m\"\nrate = 0.5\noutput_tokens = 4\n",
        sim.url()
    );
    std::fs::write(&path, toml).unwrap();
    for life in 0..3 {
        let mut daemon = DaemonProcess::spawn(&path);
        daemon.wait_for("probing", LOG_WAIT);
        let started = Instant::now();
        let first = daemon.wait_for("probe ok", interval + LOG_WAIT);
        let e2el = Duration::from_secs_f64(first["e2el_ms"].as_f64().unwrap() / 1e3);
        let sent_after = started.elapsed().saturating_sub(e2el);
        assert!(
            sent_after <= interval + Duration::from_millis(500),
            "life {life}: first probe sent {sent_after:?} after start; the mean interval is {interval:?}"
        );
        let ready = reqwest::get(format!("http://127.0.0.1:{port}/readyz")).await;
        assert_eq!(ready.unwrap().status(), 200, "life {life}");
        daemon.signal("KILL");
        assert!(!daemon.wait().success());
    }
}
