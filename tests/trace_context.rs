//! W3C Trace Context end to end: every probe sends its own sampled `traceparent` (the
//! simulator records what it received), a configured `tracestate` goes with it, a target
//! can opt out, and the trace id joins the request id in the exemplars and the status page.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use common::{start_daemon, start_sim};
use inferprobe::sim::SimConfig;

fn sim() -> SimConfig {
    SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    }
}

/// The exposition as Prometheus asks for it (OpenMetrics, with exemplars).
async fn openmetrics(daemon: &common::Daemon) -> String {
    let accept = Some("application/openmetrics-text; version=1.0.0");
    daemon.get("/metrics", accept).await.text().await.unwrap()
}

async fn traces(sim: &common::Sim) -> Vec<serde_json::Value> {
    let body = reqwest::get(format!("{}/sim/traces", sim.url()))
        .await
        .unwrap();
    body.json::<Vec<serde_json::Value>>().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_probe_starts_its_own_trace_and_the_trace_id_goes_where_the_request_id_goes() {
    let server = start_sim(sim()).await;
    let toml = format!(
        r#"
        [[targets]]
        name = "t"
        url = "{}"
        model = "m"
        rate = 20
        tracestate = "inferprobe=probe"
        "#,
        server.url()
    );
    let daemon = start_daemon(&toml).await;
    daemon
        .wait_for(Duration::from_secs(20), |s| s.successes("t") >= 10.0)
        .await;
    let exposition = openmetrics(&daemon).await;
    let page = daemon.get("/", None).await.text().await.unwrap();
    daemon.stop().await;

    let seen = traces(&server).await;
    assert!(seen.len() >= 10);
    let mut ids = HashSet::new();
    for t in &seen {
        let parent = t["traceparent"]
            .as_str()
            .expect("a probe without traceparent");
        let parts: Vec<&str> = parent.split('-').collect();
        assert_eq!(parts.len(), 4, "{parent}");
        assert_eq!(
            (parts[0], parts[3]),
            ("00", "01"),
            "version 00, sampled: {parent}"
        );
        assert!(parts[1].len() == 32 && parts[2].len() == 16, "{parent}");
        assert!(
            parts[1]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert!(
            ids.insert(parts[1].to_owned()),
            "a trace id used twice: {parent}"
        );
        assert_eq!(t["tracestate"], "inferprobe=probe");
    }
    // Exemplars name the trace (and the request): a slow bucket leads to the server's span.
    let exemplar = exposition
        .lines()
        .find(|l| {
            l.starts_with("inferprobe_time_to_first_token_seconds_bucket") && l.contains(" # {")
        })
        .expect("no TTFT exemplar");
    let trace = exemplar
        .split("trace_id=\"")
        .nth(1)
        .and_then(|r| r.get(..32))
        .unwrap();
    assert!(
        ids.contains(trace),
        "exemplar trace {trace} was never sent: {exemplar}"
    );
    assert!(exemplar.contains("request_id=\""), "{exemplar}");
    assert!(
        ids.iter().any(|id| page.contains(id.as_str())),
        "the status page shows no trace id"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_can_opt_out_and_a_long_request_id_leaves_the_trace_id_alone_in_the_exemplar() {
    let server = start_sim(sim()).await;
    let prefix = "p".repeat(64);
    let toml = format!(
        r#"
        [[targets]]
        name = "quiet"
        url = "{url}"
        model = "m"
        rate = 20
        trace_context = false
        [[targets]]
        name = "long"
        url = "{url}"
        model = "m"
        rate = 20
        request_id_prefix = "{prefix}"
        "#,
        url = server.url()
    );
    let daemon = start_daemon(&toml).await;
    daemon
        .wait_for(Duration::from_secs(20), |s| {
            s.successes("quiet") >= 5.0 && s.successes("long") >= 5.0
        })
        .await;
    let exposition = openmetrics(&daemon).await;
    daemon.stop().await;
    for t in traces(&server).await {
        let id = t["request_id"].as_str().unwrap();
        assert_eq!(t["traceparent"].is_null(), !id.starts_with(&prefix), "{t}");
    }
    for line in exposition.lines().filter(|l| l.contains(" # {")) {
        let labels = line
            .split(" # {")
            .nth(1)
            .unwrap()
            .split('}')
            .next()
            .unwrap();
        // OpenMetrics: at most 128 characters of exemplar label names and values.
        let chars: usize = labels
            .split("\",")
            .map(|kv| kv.replace(['"', '='], "").chars().count())
            .sum();
        assert!(chars <= 128, "{chars} characters: {line}");
        if line.contains("target=\"long\"") {
            assert!(
                labels.contains("trace_id=") && !labels.contains("request_id="),
                "{line}"
            );
        } else if line.contains("target=\"quiet\"") {
            assert!(
                labels.contains("request_id=") && !labels.contains("trace_id="),
                "{line}"
            );
        }
    }
}
