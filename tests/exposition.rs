//! The /metrics exposition and the other endpoints, as a scraper sees them.

use crate::common;

use std::time::Duration;

use common::{start_daemon, start_sim};
use inferprobe::sim::{Fault, SimConfig};

async fn busy_daemon() -> (common::Sim, common::Daemon) {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        faults: vec![(Fault::Http500, 0.2), (Fault::Reset, 0.2)],
        seed: Some(1),
        ..SimConfig::default()
    })
    .await;
    let toml = format!(
        r#"
        seed = 6
        [labels]
        node = "node-1"
        [defaults]
        url = "{}"
        model = "m"
        rate = 30
        output_tokens = 4
        [[targets]]
        name = "chat"
        continuous_usage_stats = true
        [[targets]]
        name = "completions"
        backend = "openai"
        labels = {{ quoted = "a \"b\" \\ c" }}
        "#,
        sim.url()
    );
    let daemon = start_daemon(&toml).await;
    daemon
        .wait_for(Duration::from_secs(20), |s| {
            ["chat", "completions"]
                .iter()
                .all(|t| s.successes(t) >= 2.0 && s.all_errors(t) >= 2.0)
        })
        .await;
    (sim, daemon)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_check_metrics_reports_nothing() {
    let (_sim, daemon) = busy_daemon().await;
    let response = daemon.get("/metrics", None).await;
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = response.text().await.unwrap();
    daemon.stop().await;
    for name in [
        "inferprobe_time_to_first_token_seconds_bucket",
        "inferprobe_time_per_output_token_seconds_bucket",
        "inferprobe_inter_token_latency_seconds_bucket",
        "inferprobe_e2e_request_latency_seconds_bucket",
        "inferprobe_requests_total",
        "inferprobe_request_errors_total",
        "inferprobe_requests_skipped_total",
        "inferprobe_requests_in_flight",
        "inferprobe_request_output_tokens_bucket",
        "inferprobe_request_prompt_tokens_bucket",
        "inferprobe_output_tokens_total",
        "inferprobe_prompt_tokens_total",
        "inferprobe_good_requests_total",
        "inferprobe_last_success_timestamp_seconds",
        "inferprobe_schedule_lag_seconds_bucket",
        "inferprobe_build_info",
        "inferprobe_config_last_reload_successful",
        "inferprobe_config_last_reload_success_timestamp_seconds",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
        "inferprobe_runtime_alive_tasks",
        "inferprobe_runtime_workers",
    ] {
        assert!(text.contains(&format!("\n{name}")), "missing {name}");
    }
    // The probing runtime's tasks, though scrapes are served from another thread: at least
    // the target's scheduler.
    let scrape = common::Scrape::parse(text.clone());
    assert!(scrape.sum("inferprobe_runtime_alive_tasks", &[]) >= 1.0);
    assert_eq!(scrape.sum("inferprobe_runtime_workers", &[]), 2.0);
    assert!(
        text.contains(r#"quoted="a \"b\" \\ c""#),
        "label values are escaped"
    );

    if let Some(report) = common::prometheus::promtool_check_metrics(&text) {
        assert!(report.trim().is_empty(), "promtool: {report}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_gets_openmetrics_with_exemplars() {
    let (_sim, daemon) = busy_daemon().await;
    let accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let response = daemon.get("/metrics", Some(accept)).await;
    assert_eq!(
        response.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = response.text().await.unwrap();
    daemon.stop().await;
    assert!(text.ends_with("# EOF\n"));
    assert!(text.contains("# TYPE inferprobe_requests counter\n"));
    assert!(text.contains("# UNIT inferprobe_time_to_first_token_seconds seconds\n"));
    let exemplar = text
        .lines()
        .find(|l| {
            l.starts_with("inferprobe_time_to_first_token_seconds_bucket") && l.contains(" # {")
        })
        .expect("a TTFT bucket with an exemplar");
    assert!(exemplar.contains("request_id=\"inferprobe-"), "{exemplar}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_unknown_paths() {
    let sim = start_sim(SimConfig::default()).await;
    let toml = format!(
        "[[targets]]\nname = \"t\"\nurl = \"{}\"\nmodel = \"m\"\n",
        sim.url()
    );
    let daemon = start_daemon(&toml).await;
    assert_eq!(daemon.get("/healthz", None).await.status(), 200);
    daemon.wait_for(Duration::from_secs(5), |_| true).await;
    let ready = daemon.get("/readyz", None).await;
    assert_eq!(ready.status(), 200);
    assert_eq!(daemon.get("/nope", None).await.status(), 404);
    let post = reqwest::Client::new()
        .post(format!("http://{}/metrics", daemon.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 405);
    assert_eq!(post.headers()["allow"], "GET, HEAD");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_cap_skips_arrivals_instead_of_queueing() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(600),
        ..SimConfig::default()
    })
    .await;
    let toml = format!(
        "seed = 8\n[[targets]]\nname = \"t\"\nurl = \"{}\"\nmodel = \"m\"\nrate = 40\nmax_concurrency = 2\noutput_tokens = 2\n",
        sim.url()
    );
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(10), |s| {
            s.sum(
                "inferprobe_requests_skipped_total",
                &[("target", "t"), ("reason", "concurrency")],
            ) >= 10.0
        })
        .await;
    assert!(s.sum("inferprobe_requests_in_flight", &[("target", "t")]) <= 2.0);
    let report = daemon.stop().await;
    assert!(
        report.in_flight <= 2,
        "never more than max_concurrency in flight"
    );
    // Lag is measured from the schedule; a healthy scheduler is never seconds late.
    let (lag_sum, lag_count) = s.histogram("inferprobe_schedule_lag_seconds", "t");
    assert!(
        lag_count >= 10.0 && lag_sum / lag_count < 0.05,
        "mean lag {}",
        lag_sum / lag_count
    );
}
