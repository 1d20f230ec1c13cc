//! The checks' traces (issue 61, item 4): every sampled `traceparent` a session turn, a
//! session's control request or a prefix-cache request sent has its span exported, with
//! that trace id and span id, so the server's span of it is no orphan; a session is one
//! trace under its span, a pair one under its own; at `sampling_ratio = 0` nothing is
//! sampled and nothing exported.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::otlp::{self, attribute, hex};
use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::{Fault, SimConfig};
use opentelemetry_proto::tonic::trace::v1::Span;

const SESSION: &str =
    r#"interval = "300ms", human_gap = "10ms", tool_gap = "5ms", block_tokens = 16"#;

fn sim(faults: Vec<(Fault, f64)>) -> SimConfig {
    SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(1),
        faults,
        ..SimConfig::default()
    }
}

/// Targets with both checks: one healthy, one whose server refuses every history (so each
/// of its sessions sends a control request), one that opts out of trace context.
fn config(healthy: &str, rejecting: &str, collector: &str, ratio: f64) -> String {
    let target = |name: &str, url: &str, extra: &str| {
        format!(
            r#"
            [[targets]]
            name = "{name}"
            url = "{url}"
            backend = "openai-chat"
            model = "m"
            rate = 0.001
            session = {{ {SESSION} }}
            prefix_cache = {{ interval = "100ms", prefix_tokens = 64 }}
            {extra}
            "#
        )
    };
    format!(
        r#"
        [tracing]
        otlp_endpoint = "{collector}"
        sampling_ratio = {ratio:?}
        {}{}{}"#,
        target("healthy", healthy, ""),
        target("rejecting", rejecting, ""),
        target(
            "quiet",
            healthy,
            "trace_context = false\nrequest_id_prefix = \"quiet-\"",
        ),
    )
}

async fn received(sim: &common::Sim) -> Vec<serde_json::Value> {
    reqwest::get(format!("{}/sim/traces", sim.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Every `traceparent` the simulator received: (trace id, span id, flags).
async fn sent(sim: &common::Sim) -> Vec<(String, String, String)> {
    received(sim)
        .await
        .iter()
        .filter_map(|t| t["traceparent"].as_str())
        .map(|p| {
            let parts: Vec<&str> = p.split('-').collect();
            assert_eq!(parts.len(), 4, "{p}");
            (
                parts[1].to_owned(),
                parts[2].to_owned(),
                parts[3].to_owned(),
            )
        })
        .collect()
}

fn checks_done(s: &Scrape) -> bool {
    ["healthy", "rejecting", "quiet"].iter().all(|t| {
        s.sum("inferprobe_sessions_total", &[("target", t)]) >= 2.0
            && s.sum("inferprobe_prefix_cache_checks_total", &[("target", t)]) >= 2.0
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sampled_request_of_a_check_has_its_span_under_the_checks_span() {
    let healthy = start_sim(sim(Vec::new())).await;
    let rejecting = start_sim(sim(vec![(Fault::HistoryReject, 1.0)])).await;
    let collector = otlp::start(Duration::ZERO).await;
    let daemon = start_daemon(&config(
        &healthy.url(),
        &rejecting.url(),
        &collector.url,
        1.0,
    ))
    .await;
    let scrape = daemon.wait_for(Duration::from_secs(60), checks_done).await;
    daemon.stop().await;
    let spans = collector.spans();
    let by_id: HashMap<(String, String), &Span> = spans
        .iter()
        .map(|s| ((hex(&s.trace_id), hex(&s.span_id)), s))
        .collect();
    let mut sent_all = sent(&healthy).await;
    sent_all.extend(sent(&rejecting).await);
    assert!(!sent_all.is_empty());
    // No orphan: the span each sampled request named as the server's parent was exported.
    for (trace, span, flags) in &sent_all {
        assert_eq!(flags, "01", "sampled at ratio 1");
        assert!(
            by_id.contains_key(&(trace.clone(), span.clone())),
            "trace {trace} span {span} was sent to the server but never exported"
        );
    }
    let parent_of = |s: &Span| -> &Span {
        let key = (hex(&s.trace_id), hex(&s.parent_span_id));
        by_id
            .get(&key)
            .unwrap_or_else(|| panic!("{}: parent {key:?} never exported", s.name))
    };
    // Opted out: no traceparent, and so no span.
    let quiet: Vec<_> = received(&healthy)
        .await
        .into_iter()
        .filter(|t| {
            t["request_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("quiet-"))
        })
        .collect();
    assert!(!quiet.is_empty());
    assert!(
        quiet.iter().all(|t| t["traceparent"].is_null()),
        "{quiet:?}"
    );
    assert!(
        spans
            .iter()
            .all(|s| attribute(s, "inferprobe.target").as_deref() != Some("quiet")),
        "a span of the target without trace context"
    );
    let (mut turns, mut controls, mut pairs) = (0, 0, 0);
    let mut sessions = HashMap::new();
    for s in &spans {
        let kind = attribute(s, "inferprobe.session.turn");
        let control = attribute(s, "inferprobe.session.control");
        if kind.is_some() || control.is_some() {
            assert_eq!(s.kind, 3, "a turn is SPAN_KIND_CLIENT");
            // A call turn (its reply began with a tool call: the simulator's model calls on
            // `first` and `parallel`, and the control request's question) is timed to the
            // call, never as a TTFT.
            let calls = matches!(kind.as_deref(), Some("first" | "parallel")) || control.is_some();
            let refused = attribute(s, "error.type").is_some();
            if !refused {
                let (ttft, call) = (
                    attribute(s, "gen_ai.response.time_to_first_chunk"),
                    attribute(s, "inferprobe.time_to_call"),
                );
                assert_eq!(
                    (ttft.is_some(), call.is_some()),
                    (!calls, calls),
                    "{kind:?}"
                );
            }
            assert_eq!(s.name, "chat m");
            let session = parent_of(s);
            assert_eq!(session.name, "session m");
            assert_eq!(session.kind, 1, "SPAN_KIND_INTERNAL");
            assert!(
                session.parent_span_id.is_empty(),
                "a session's span is a root"
            );
            assert!(
                session.start_time_unix_nano <= s.start_time_unix_nano
                    && s.end_time_unix_nano <= session.end_time_unix_nano,
                "a turn lies within its session"
            );
            let id = attribute(session, "inferprobe.session.id").expect("session id");
            let target = attribute(session, "inferprobe.target").expect("target");
            let result = attribute(session, "inferprobe.session.result");
            // `cut`: the daemon stopped during the session.
            let ended = if target == "healthy" {
                "complete"
            } else {
                "failed"
            };
            assert!(
                matches!(result.as_deref(), Some(r) if r == ended || r == "cut"),
                "{target} session {id}: {result:?}"
            );
            sessions.insert(hex(&session.span_id), session);
            if control.is_some() {
                controls += 1;
                assert_eq!(control.as_deref(), Some("true"));
                assert_eq!(target, "rejecting");
            } else {
                turns += 1;
                // Every turn judged before the daemon stopped says its verdict.
                let verdict = attribute(s, "inferprobe.session.result");
                if target == "healthy" {
                    assert!(
                        matches!(verdict.as_deref(), None | Some("ok")),
                        "{verdict:?}"
                    );
                } else if kind.as_deref() == Some("tool_result") {
                    assert!(
                        matches!(verdict.as_deref(), None | Some("history_rejected")),
                        "{verdict:?}"
                    );
                }
            }
        }
        if let Some(request) = attribute(s, "inferprobe.prefix_cache.request") {
            pairs += 1;
            assert!(request == "cold" || request == "warm", "{request}");
            let pair = parent_of(s);
            assert_eq!(pair.name, "prefix_cache m");
            assert_eq!(pair.kind, 1, "SPAN_KIND_INTERNAL");
            assert!(pair.parent_span_id.is_empty());
            assert!(attribute(pair, "inferprobe.prefix_cache.result").is_some());
        }
    }
    let finished = |t: &str| scrape.sum("inferprobe_sessions_total", &[("target", t)]) as usize;
    assert!(
        sessions.len() >= finished("healthy") + finished("rejecting"),
        "{} session spans",
        sessions.len()
    );
    assert!(turns >= 5 * finished("healthy"), "{turns} turn spans");
    assert!(
        controls >= finished("rejecting"),
        "{controls} control spans"
    );
    assert!(pairs >= 4, "{pairs} prefix-cache spans");
    for session in sessions.values() {
        let sent: i64 = attribute(session, "inferprobe.session.turns")
            .and_then(|n| n.parse().ok())
            .expect("the number of turns");
        let children = spans
            .iter()
            .filter(|s| s.parent_span_id == session.span_id)
            .filter(|s| attribute(s, "inferprobe.session.control").is_none())
            .inspect(|s| assert_eq!(s.trace_id, session.trace_id, "one trace per session"))
            .count();
        assert_eq!(children as i64, sent, "{}", session.name);
    }
    assert_eq!(scrape.sum("inferprobe_trace_spans_dropped_total", &[]), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_ratio_zero_no_check_is_sampled_or_exported() {
    let healthy = start_sim(sim(Vec::new())).await;
    let rejecting = start_sim(sim(vec![(Fault::HistoryReject, 1.0)])).await;
    let collector = otlp::start(Duration::ZERO).await;
    let daemon = start_daemon(&config(
        &healthy.url(),
        &rejecting.url(),
        &collector.url,
        0.0,
    ))
    .await;
    daemon.wait_for(Duration::from_secs(60), checks_done).await;
    daemon.stop().await;
    let mut sent_all = sent(&healthy).await;
    sent_all.extend(sent(&rejecting).await);
    assert!(!sent_all.is_empty());
    for (trace, span, flags) in &sent_all {
        assert_eq!(flags, "00", "trace {trace} span {span} sampled at ratio 0");
    }
    assert!(collector.spans().is_empty(), "{:?}", collector.spans());
}
