//! OTLP export end to end: one client span per probe reaches a collector, with the trace
//! id and parent span id the server received in `traceparent` (the simulator records it),
//! named and attributed after the GenAI conventions; a collector that is down or slow does
//! not move the probes' TTFT, and a full queue drops spans and counts them.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::otlp::{self, attribute, hex};
use common::{closed_port, start_daemon, start_sim};
use inferprobe::sim::{Fault, SimConfig};

const TTFT: Duration = Duration::from_millis(100);

fn sim(faults: Vec<(Fault, f64)>) -> SimConfig {
    SimConfig {
        ttft: TTFT,
        itl: Duration::from_millis(2),
        faults,
        seed: Some(11),
        ..SimConfig::default()
    }
}

fn config(sim: &str, endpoint: &str, extra: &str) -> String {
    format!(
        r#"
        seed = 4
        [tracing]
        otlp_endpoint = "{endpoint}"
        {extra}
        [[targets]]
        name = "t"
        backend = "openai-chat"
        url = "{sim}"
        model = "m"
        rate = 15
        output_tokens = 8
        labels = {{ team = "serving" }}
        "#
    )
}

/// traceparent by trace id, from what the simulator received.
async fn sent(sim: &common::Sim) -> HashMap<String, String> {
    let seen: Vec<serde_json::Value> = reqwest::get(format!("{}/sim/traces", sim.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    seen.iter()
        .filter_map(|t| t["traceparent"].as_str())
        .map(|p| (p[3..35].to_owned(), p.to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_span_per_probe_continues_the_trace_the_server_saw() {
    spans_continue_the_trace("", "http").await;
}

/// The same over gRPC (tonic, HTTP/2 without TLS), into the same kind of collector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grpc_exporter_delivers_the_same_spans() {
    spans_continue_the_trace("protocol = \"grpc\"", "grpc").await;
}

async fn spans_continue_the_trace(protocol: &str, transport: &str) {
    let server = start_sim(sim(vec![(Fault::Http500, 0.2)])).await;
    let collector = otlp::start(Duration::ZERO).await;
    let daemon = start_daemon(&config(&server.url(), &collector.url, protocol)).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            s.successes("t") >= 15.0 && s.errors("t", "http_5xx") >= 2.0
        })
        .await;
    daemon.stop().await;
    let requests = s.requests("t") as usize;
    let sent = sent(&server).await;
    // The last batch was flushed at shutdown: every probe the scrape counted has its span.
    let spans = collector.spans();
    assert!(
        spans.len() >= requests,
        "{} spans for {requests} probes",
        spans.len()
    );
    assert_eq!(
        spans.len(),
        sent.len(),
        "one span per request the server received"
    );
    let mut failed = 0;
    for span in &spans {
        let trace = hex(&span.trace_id);
        let parent = sent
            .get(&trace)
            .unwrap_or_else(|| panic!("span of trace {trace} never sent"));
        assert_eq!(
            &parent[36..52],
            hex(&span.span_id),
            "the server's parent is the probe's span"
        );
        assert!(span.parent_span_id.is_empty(), "a probe's span is a root");
        assert_eq!(span.kind, 3, "SPAN_KIND_CLIENT");
        assert_eq!(span.name, "chat m");
        assert_eq!(
            attribute(span, "gen_ai.operation.name").as_deref(),
            Some("chat")
        );
        assert_eq!(
            attribute(span, "gen_ai.request.model").as_deref(),
            Some("m")
        );
        assert_eq!(
            attribute(span, "server.address").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            attribute(span, "inferprobe.label.team").as_deref(),
            Some("serving")
        );
        assert!(span.end_time_unix_nano > span.start_time_unix_nano);
        match attribute(span, "error.type") {
            Some(category) => {
                failed += 1;
                assert_eq!(category, "http_5xx");
                assert_eq!(
                    span.status.as_ref().map(|s| s.code),
                    Some(2),
                    "STATUS_CODE_ERROR"
                );
            }
            None => {
                let ttft: f64 = attribute(span, "gen_ai.response.time_to_first_chunk")
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!(ttft >= TTFT.as_secs_f64(), "{ttft}");
                assert_eq!(
                    attribute(span, "gen_ai.usage.output_tokens").as_deref(),
                    Some("8")
                );
                let first = span
                    .events
                    .iter()
                    .find(|e| e.name == "gen_ai.first_token")
                    .expect("first token event");
                let at = (first.time_unix_nano - span.start_time_unix_nano) as f64 / 1e9;
                assert!((at - ttft).abs() < 0.002, "event at {at}, TTFT {ttft}");
            }
        }
    }
    assert!(failed >= 2);
    assert!(
        collector
            .resources
            .lock()
            .unwrap()
            .contains(&"service.name".to_owned())
    );
    assert_eq!(s.sum("inferprobe_trace_spans_dropped_total", &[]), 0.0);
    let transports = collector.transports.lock().unwrap().clone();
    assert!(
        !transports.is_empty() && transports.iter().all(|t| *t == transport),
        "{transports:?}"
    );
}

async fn mean_ttft(toml: &str) -> (f64, common::Scrape) {
    let daemon = start_daemon(toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| s.successes("t") >= 20.0)
        .await;
    daemon.stop().await;
    let (sum, count) = s.histogram("inferprobe_time_to_first_token_seconds", "t");
    (sum / count, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_or_slow_does_not_move_the_probes() {
    let server = start_sim(sim(Vec::new())).await;
    let (baseline, _) = mean_ttft(&config(
        &server.url(),
        "http://127.0.0.1:9/unused",
        "sampling_ratio = 0.0",
    ))
    .await;
    let down = format!("http://127.0.0.1:{}", closed_port().await);
    let (with_down, s) = mean_ttft(&config(&server.url(), &down, "")).await;
    assert_eq!(s.sum("inferprobe_trace_spans_exported_total", &[]), 0.0);
    // A collector that takes 5 s per export, behind a queue of 4: spans are dropped, counted.
    let slow = otlp::start(Duration::from_secs(5)).await;
    let (with_slow, s) = mean_ttft(&config(&server.url(), &slow.url, "queue_size = 4")).await;
    assert!(
        s.sum("inferprobe_trace_spans_dropped_total", &[]) > 0.0,
        "{}",
        s.text
    );
    for (what, ttft) in [("collector down", with_down), ("slow collector", with_slow)] {
        assert!(
            (ttft - baseline).abs() < 0.015,
            "{what}: mean TTFT {ttft:.4} s, without export {baseline:.4} s"
        );
    }
}

#[test]
fn tracing_settings_are_validated() {
    let bad = [
        ("protocol = \"grpc\"", "tracing.protocol"),
        ("otlp_endpoint = \"ftp://x\"", "tracing.otlp_endpoint"),
        (
            "otlp_endpoint = \"http://c:4318\"\nprotocol = \"thrift\"",
            "tracing.protocol",
        ),
        (
            "otlp_endpoint = \"http://c:4318\"\nsampling_ratio = 2",
            "tracing.sampling_ratio",
        ),
        (
            "otlp_endpoint = \"http://c:4318\"\nheaders_env = \"INFERPROBE_NO_SUCH_VAR\"",
            "tracing.headers_env",
        ),
    ];
    for (tracing, key) in bad {
        let toml = format!(
            "[tracing]\n{tracing}\n[[targets]]\nname = \"t\"\nurl = \"http://127.0.0.1:9\"\nmodel = \"m\"\n"
        );
        let err = common::parse_config(&toml).unwrap_err().to_string();
        assert!(err.contains(key), "{tracing}: {err}");
    }
}
