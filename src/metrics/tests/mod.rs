//! The metrics' unit tests: what one probe's outcome records (here), what a scrape shows
//! ([`exposition`]), and the series a target's life makes and removes ([`lifecycle`]).
//! The helpers below build the target and measurement all three use.

use std::time::Duration;

use super::*;
use crate::config::{RawConfig, RawTarget, validate};
use crate::error::ProbeError;
use crate::record::{Measurement, TokenCount};

mod exposition;
mod lifecycle;

fn target(name: &str) -> Arc<Target> {
    let raw = RawConfig {
        labels: [("node".to_owned(), "n1".to_owned())].into(),
        targets: vec![RawTarget {
            name: Some(name.into()),
            url: Some("http://127.0.0.1:1".into()),
            model: Some("m".into()),
            backend: Some("openai".into()),
            ..RawTarget::default()
        }],
        ..RawConfig::default()
    };
    Arc::clone(&validate(&raw).unwrap().targets[0])
}

/// Target "t" (model "m", the default backend) with this SLO and these global labels.
fn slo_target<const N: usize>(
    labels: [(&str, &str); N],
    slo: crate::config::RawSlo,
) -> Arc<Target> {
    let raw = RawConfig {
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        targets: vec![RawTarget {
            name: Some("t".into()),
            url: Some("http://127.0.0.1:1".into()),
            model: Some("m".into()),
            slo: Some(slo),
            ..RawTarget::default()
        }],
        ..RawConfig::default()
    };
    Arc::clone(&validate(&raw).unwrap().targets[0])
}

fn exposition(registry: &Registry, format: Format) -> String {
    String::from_utf8(
        expose::encode(
            registry,
            format,
            super::HistogramMode::Both,
            &|_, _| None,
            &|_| None,
        )
        .unwrap(),
    )
    .unwrap()
}

fn measurement() -> Measurement {
    Measurement {
        ttft: Some(Duration::from_millis(150)),
        tpot: Some(Duration::from_millis(20)),
        timed_by: crate::record::TimedBy::Event,
        buffered: false,
        itl: vec![
            (Duration::from_millis(10), 3),
            (Duration::from_millis(40), 1),
        ],
        e2el: Duration::from_millis(400),
        output_tokens: Some(TokenCount::Usage(5)),
        prompt_tokens: Some(12),
        cached_prompt_tokens: None,
        answer: Default::default(),
    }
}

const LABELS: &str = r#"target="t",model="m",backend="openai",node="n1""#;

#[test]
fn category_indexes_follow_declaration_order() {
    for (i, c) in ErrorCategory::ALL.iter().enumerate() {
        assert_eq!(*c as usize, i, "{c}");
    }
    for (i, r) in SkipReason::ALL.iter().enumerate() {
        assert_eq!(*r as usize, i);
    }
}

#[test]
fn a_new_target_exposes_every_error_category_at_zero() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    metrics.target(&target("t"));
    let text = exposition(&registry, Format::Text);
    for c in ErrorCategory::ALL {
        let series = format!("inferprobe_request_errors_total{{{LABELS},category=\"{c}\"}} 0\n");
        assert!(text.contains(&series), "missing {series}");
    }
    assert!(text.contains(&format!(
        "inferprobe_requests_skipped_total{{{LABELS},reason=\"concurrency\"}} 0\n"
    )));
    assert!(text.contains(&format!("inferprobe_requests_total{{{LABELS}}} 0\n")));
    assert!(text.contains("inferprobe_build_info{version=\""));
}

#[test]
fn a_success_is_recorded_in_every_series_once() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target("t"));
    t.record(&Arc::new("req-1".into()), &Ok(measurement()));
    let text = exposition(&registry, Format::Text);
    let expect = [
        format!("inferprobe_requests_total{{{LABELS}}} 1"),
        format!("inferprobe_time_to_first_token_seconds_sum{{{LABELS}}} 0.15"),
        format!("inferprobe_time_to_first_token_seconds_count{{{LABELS}}} 1"),
        format!("inferprobe_time_to_first_token_seconds_bucket{{le=\"0.1\",{LABELS}}} 0"),
        format!("inferprobe_time_to_first_token_seconds_bucket{{le=\"0.25\",{LABELS}}} 1"),
        format!("inferprobe_time_per_output_token_seconds_count{{{LABELS}}} 1"),
        // 3 observations of 10 ms and one of 40 ms
        format!("inferprobe_inter_token_latency_seconds_count{{{LABELS}}} 4"),
        format!("inferprobe_inter_token_latency_seconds_bucket{{le=\"0.01\",{LABELS}}} 3"),
        format!("inferprobe_e2e_request_latency_seconds_count{{{LABELS}}} 1"),
        format!("inferprobe_output_tokens_total{{{LABELS}}} 5"),
        format!("inferprobe_prompt_tokens_total{{{LABELS}}} 12"),
        format!("inferprobe_request_output_tokens_sum{{{LABELS}}} 5.0"),
        format!("inferprobe_good_requests_total{{{LABELS}}} 1"),
        format!("inferprobe_buffered_streams_total{{{LABELS}}} 0"),
    ];
    for line in expect {
        assert!(
            text.contains(&format!("{line}\n")),
            "missing `{line}` in\n{text}"
        );
    }
    let itl_sum = text
        .lines()
        .find(|l| l.starts_with("inferprobe_inter_token_latency_seconds_sum"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap();
    assert!((itl_sum - 0.07).abs() < 1e-9, "{itl_sum}");
    assert!(text.contains("inferprobe_last_success_timestamp_seconds{"));
}

#[test]
fn a_failure_counts_its_category_and_nothing_else() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target("t"));
    t.record(&Arc::new("req-2".into()), &Err(ProbeError::EmptyResponse));
    let text = exposition(&registry, Format::Text);
    assert!(text.contains(&format!("inferprobe_requests_total{{{LABELS}}} 1\n")));
    assert!(text.contains(&format!(
        "inferprobe_request_errors_total{{{LABELS},category=\"empty_response\"}} 1\n"
    )));
    assert!(text.contains(&format!(
        "inferprobe_time_to_first_token_seconds_count{{{LABELS}}} 0\n"
    )));
    assert!(text.contains(&format!("inferprobe_good_requests_total{{{LABELS}}} 0\n")));
}

#[test]
fn non_streamed_successes_have_no_ttft_and_embeddings_no_output_tokens() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target("t"));
    let whole = Measurement {
        ttft: None,
        tpot: None,
        timed_by: crate::record::TimedBy::Event,
        itl: Vec::new(),
        output_tokens: None,
        ..measurement()
    };
    t.record(&Arc::new("r".into()), &Ok(whole));
    let text = exposition(&registry, Format::Text);
    assert!(text.contains(&format!(
        "inferprobe_e2e_request_latency_seconds_count{{{LABELS}}} 1\n"
    )));
    assert!(text.contains(&format!(
        "inferprobe_time_to_first_token_seconds_count{{{LABELS}}} 0\n"
    )));
    assert!(text.contains(&format!(
        "inferprobe_request_output_tokens_count{{{LABELS}}} 0\n"
    )));
    assert!(text.contains(&format!("inferprobe_prompt_tokens_total{{{LABELS}}} 12\n")));
}

#[test]
fn in_flight_guard_and_skips() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target("t"));
    let guard = t.in_flight();
    t.skipped(SkipReason::Concurrency);
    let text = exposition(&registry, Format::Text);
    assert!(text.contains(&format!("inferprobe_requests_in_flight{{{LABELS}}} 1\n")));
    assert!(text.contains(&format!(
        "inferprobe_requests_skipped_total{{{LABELS},reason=\"concurrency\"}} 1\n"
    )));
    drop(guard);
    let text = exposition(&registry, Format::Text);
    assert!(text.contains(&format!("inferprobe_requests_in_flight{{{LABELS}}} 0\n")));
}

/// A stream that arrived in one read is a finding, counted apart (issue 24, item 11).
#[test]
fn a_buffered_stream_is_counted() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target("t"));
    let buffered = Measurement {
        tpot: None,
        itl: Vec::new(),
        buffered: true,
        ..measurement()
    };
    t.record(&Arc::new("req-1".into()), &Ok(buffered));
    t.record(&Arc::new("req-2".into()), &Ok(measurement()));
    let text = exposition(&registry, Format::Text);
    assert!(
        text.contains(&format!(
            "inferprobe_buffered_streams_total{{{LABELS}}} 1\n"
        )),
        "{text}"
    );
}
