//! Production limits and SLOs against the simulator: endless and dripping streams, the
//! hourly token budget, SLO thresholds as exact buckets with goodput, and connection reuse.

use crate::common;

use std::time::Duration;

use common::{start_daemon, start_sim};
use inferprobe::sim::SimConfig;

fn target(name: &str, url: &str, extra: &str) -> String {
    format!("[[targets]]\nname = \"{name}\"\nurl = \"{url}\"\nmodel = \"m\"\n{extra}\n")
}

fn forced(fault: &str) -> String {
    format!("headers = {{ \"x-inferprobe-fault\" = \"{fault}\" }}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_and_dripping_streams_are_cut_by_limits() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(10),
        itl: Duration::from_millis(1),
        drip_interval: Duration::from_millis(50),
        ..SimConfig::default()
    })
    .await;
    let url = sim.url();
    let toml = [
        "seed = 4\n[defaults]\nrate = 4\nmax_concurrency = 2\n".to_owned(),
        target(
            "endless-events",
            &url,
            &format!("{}\nmax_events = 50", forced("endless")),
        ),
        target(
            "endless-bytes",
            &url,
            &format!("{}\nmax_response_bytes = 4096", forced("endless")),
        ),
        target(
            "endless-time",
            &url,
            &format!(
                "{}\nrequest_timeout = \"500ms\"\nttft_timeout = \"500ms\"",
                forced("endless")
            ),
        ),
        target(
            "drip",
            &url,
            &format!("{}\nttft_timeout = \"700ms\"", forced("drip")),
        ),
    ]
    .concat();
    let daemon = start_daemon(&toml).await;
    let expected = [
        ("endless-events", "too_large"),
        ("endless-bytes", "too_large"),
        ("endless-time", "request_timeout"),
        ("drip", "ttft_timeout"),
    ];
    let s = daemon
        .wait_for(Duration::from_secs(20), |s| {
            expected.iter().all(|(t, _)| s.requests(t) >= 2.0)
        })
        .await;
    for (t, category) in expected {
        assert_eq!(s.errors(t, category), s.requests(t), "{t}:\n{}", s.text);
    }
    let report = daemon.stop().await;
    assert_eq!(
        report.cut, 0,
        "every endless probe ends within its own limits"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hourly_token_budget_skips_arrivals() {
    let sim = start_sim(SimConfig::default()).await;
    let toml = target(
        "thrifty",
        &sim.url(),
        "rate = 20\noutput_tokens = 8\nmax_output_tokens_per_hour = 20",
    );
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(10), |s| {
            s.sum(
                "inferprobe_requests_skipped_total",
                &[("target", "thrifty"), ("reason", "budget")],
            ) >= 10.0
        })
        .await;
    daemon.stop().await;
    assert_eq!(
        s.requests("thrifty"),
        2.0,
        "20 tokens an hour buys two 8-token probes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slo_thresholds_are_exact_buckets_and_define_goodput() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(60),
        itl: Duration::from_millis(5),
        ..SimConfig::default()
    })
    .await;
    let url = sim.url();
    let toml = [
        "seed = 5\n[defaults]\nrate = 10\noutput_tokens = 4\n".to_owned(),
        target(
            "met",
            &url,
            "slo = { ttft = \"0.123s\", tpot = \"50ms\", itl = \"40ms\", objective = 0.995 }",
        ),
        target("missed", &url, "slo = { ttft = \"20ms\" }"),
        target("no-slo", &url, ""),
    ]
    .concat();
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(20), |s| {
            ["met", "missed", "no-slo"]
                .iter()
                .all(|t| s.successes(t) >= 4.0)
        })
        .await;
    daemon.stop().await;
    let bucket = |t: &str, le: &str| {
        s.matching(
            "inferprobe_time_to_first_token_seconds_bucket",
            &[("target", t), ("le", le)],
        )
        .count()
    };
    assert_eq!(
        bucket("met", "0.123"),
        1,
        "the threshold is an exact bucket bound"
    );
    assert_eq!(bucket("missed", "0.02"), 1, "0.02 is a default bound too");
    assert_eq!(bucket("no-slo", "0.123"), 0);
    let good = |t: &str| s.sum("inferprobe_good_requests_total", &[("target", t)]);
    assert_eq!(
        good("met"),
        s.successes("met"),
        "60 ms TTFT is within 123 ms"
    );
    assert_eq!(good("missed"), 0.0, "60 ms TTFT misses a 20 ms SLO");
    assert_eq!(
        good("no-slo"),
        s.successes("no-slo"),
        "without an SLO every success is good"
    );
    assert_eq!(
        s.sum("inferprobe_slo_objective", &[("target", "met")]),
        0.995
    );
    let threshold = s.sum(
        "inferprobe_slo_threshold_seconds",
        &[("target", "met"), ("slo", "ttft"), ("bound", "0.123")],
    );
    assert_eq!(
        threshold, 0.123,
        "the threshold carries its bucket's exact `le`"
    );
    assert_eq!(
        s.matching("inferprobe_slo_objective", &[("target", "no-slo")])
            .count(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_connections_are_opened_per_probe_and_counted() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    })
    .await;
    let url = sim.url();
    let toml = [
        "seed = 6\n[defaults]\nrate = 20\nmax_concurrency = 1\noutput_tokens = 2\n".to_owned(),
        target("pooled", &url, ""),
        target("fresh", &url, "connection = \"fresh\""),
    ]
    .concat();
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(10), |s| {
            s.successes("pooled") >= 20.0 && s.successes("fresh") >= 20.0
        })
        .await;
    daemon.stop().await;
    let opened = |t: &str| s.sum("inferprobe_connections_opened_total", &[("target", t)]);
    // Every probe's connection is counted when it opens, before the probe is recorded.
    assert!(
        opened("fresh") >= s.requests("fresh"),
        "{} < {}",
        opened("fresh"),
        s.requests("fresh")
    );
    assert!(
        opened("pooled") <= 3.0,
        "a warm pool reuses its connection: opened {}",
        opened("pooled")
    );
}
