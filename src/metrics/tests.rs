use std::time::Duration;

use super::*;
use crate::config::{RawConfig, RawTarget, validate};
use crate::error::ProbeError;
use crate::record::{Measurement, TokenCount};

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
        expose::encode(registry, format, super::HistogramMode::Both, &|_, _| None).unwrap(),
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
fn exemplars_carry_the_request_id_in_openmetrics_only() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target("t"));
    t.record(&Arc::new("inferprobe-abc".into()), &Ok(measurement()));
    let om = exposition(&registry, Format::OpenMetrics);
    // The exemplar is timestamped (a native histogram's exemplars need one).
    let line = om
        .lines()
        .find(|l| l.starts_with("inferprobe_time_to_first_token_seconds_bucket{le=\"0.25\""))
        .unwrap();
    let (head, at) = line.rsplit_once(' ').unwrap();
    assert_eq!(
        head,
        format!(
            "inferprobe_time_to_first_token_seconds_bucket{{le=\"0.25\",{LABELS}}} 1 # {{request_id=\"inferprobe-abc\"}} 0.15"
        )
    );
    assert!(at.parse::<f64>().is_ok_and(|t| t > 1.7e9), "{line}");
    assert!(om.ends_with("# EOF\n"));
    let text = exposition(&registry, Format::Text);
    assert!(!text.contains("request_id"));
    assert!(!text.contains("# EOF"));
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
fn reattaching_a_target_continues_its_series() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let first = metrics.target(&target("t"));
    first.record(&Arc::new("r".into()), &Err(ProbeError::EmptyResponse));
    let again = metrics.target(&target("t"));
    again.record(&Arc::new("r".into()), &Err(ProbeError::EmptyResponse));
    let text = exposition(&registry, Format::Text);
    assert!(text.contains(&format!("inferprobe_requests_total{{{LABELS}}} 2\n")));
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

#[test]
fn families_remove_members() {
    let family = LabeledFamily::<TargetLabels, Counter>::default();
    let a = TargetLabels::new(vec![("target".into(), "a".into())]);
    let b = TargetLabels::new(vec![("target".into(), "b".into())]);
    family.get_or_insert(a.clone(), Counter::default).inc();
    family.get_or_insert(b.clone(), Counter::default);
    assert_eq!(family.len(), 2);
    assert!(family.remove(&a));
    assert!(!family.remove(&a));
    family.retain(|labels| labels.get("target") != Some("b"));
    assert!(family.is_empty());
}

#[test]
fn every_label_the_exporter_sets_is_reserved_from_static_labels() {
    // A target with every SLO threshold and a probe of each outcome: every series and
    // exemplar the exporter can write for a target.
    let target = slo_target(
        [("node", "n1")],
        crate::config::RawSlo {
            ttft: Some(crate::config::RawDuration::Text("1s".into())),
            tpot: Some(crate::config::RawDuration::Text("50ms".into())),
            itl: Some(crate::config::RawDuration::Text("100ms".into())),
            e2el: Some(crate::config::RawDuration::Text("10s".into())),
            objective: Some(0.99),
        },
    );
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target);
    t.record(&Arc::new("r1".into()), &Ok(measurement()));
    t.record(&Arc::new("r2".into()), &Err(ProbeError::EmptyResponse));
    for reason in SkipReason::ALL {
        t.skipped(reason);
    }
    t.retried();
    for format in [Format::Text, Format::OpenMetrics] {
        let text = exposition(&registry, format);
        let mut names = std::collections::BTreeSet::new();
        let mut exemplar = std::collections::BTreeSet::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            // Series labels, then an exemplar's (a label set of its own) after " # ".
            for (i, part) in line.split(" # ").enumerate() {
                let Some((_, rest)) = part.split_once('{') else {
                    continue;
                };
                let labels = &rest[..rest.find('}').unwrap_or(rest.len())];
                for pair in labels.split("\",").filter(|p| !p.is_empty()) {
                    let name = pair.split('=').next().unwrap().to_owned();
                    if i == 0 { &mut names } else { &mut exemplar }.insert(name);
                }
            }
        }
        assert!(names.contains("slo"), "{names:?}");
        if matches!(format, Format::OpenMetrics) {
            assert!(exemplar.contains("request_id"), "exemplars: {exemplar:?}");
        }
        for name in &names {
            let own = crate::config::RESERVED_LABELS.contains(&name.as_str());
            let build = ["version", "revision"].contains(&name.as_str()); // build_info only
            assert!(own || build || name == "node", "`{name}` is not reserved");
        }
    }
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

/// A protobuf scrape in each `[metrics] histograms` mode: the classic buckets with their
/// exemplars, native buckets, or both in one series (docs/metrics.md, "Native histograms").
#[test]
fn protobuf_scrapes_carry_the_buckets_the_mode_asks_for() {
    use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::MetricFamily;
    use prost::Message;
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target("t"));
    t.record(&Arc::new("inferprobe-abc".into()), &Ok(measurement()));
    for mode in [
        HistogramMode::Classic,
        HistogramMode::Native,
        HistogramMode::Both,
    ] {
        metrics.set_histograms(mode);
        let bytes = metrics.encode(&registry, Format::Protobuf).unwrap();
        let mut buf = bytes.as_slice();
        let mut ttft = None;
        while !buf.is_empty() {
            let family = MetricFamily::decode_length_delimited(&mut buf).unwrap();
            if family.name == "inferprobe_time_to_first_token_seconds" {
                ttft = family.metric.into_iter().next().and_then(|m| m.histogram);
            }
        }
        let h = ttft.expect("the TTFT histogram");
        assert_eq!(h.sample_count, 1, "{mode:?}");
        let native = !h.positive_span.is_empty();
        let classic = !h.bucket.is_empty();
        assert_eq!(native, mode != HistogramMode::Classic, "{mode:?}");
        assert_eq!(classic, mode != HistogramMode::Native, "{mode:?}");
        // The probe's exemplar is there in every mode: on a classic bucket, or the
        // histogram's own list when there are none.
        let exemplars =
            h.bucket.iter().filter_map(|b| b.exemplar.as_ref()).count() + h.exemplars.len();
        assert_eq!(exemplars, 1, "{mode:?}");
        if native {
            assert_eq!(h.schema, 3);
            assert_eq!(h.positive_delta, [1]);
        }
    }
}

/// The SLI counters say what the classic bucket at each threshold says (issue 34): every
/// observation counted, those over the threshold slow, the ITL per gap; a threshold the SLO
/// does not set has no counters.
#[test]
fn sli_counters_agree_with_the_threshold_bucket() {
    let target = slo_target(
        [],
        crate::config::RawSlo {
            ttft: Some(crate::config::RawDuration::Text("200ms".into())),
            itl: Some(crate::config::RawDuration::Text("20ms".into())),
            ..Default::default()
        },
    );
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target);
    let slow = Measurement {
        ttft: Some(Duration::from_millis(300)),
        ..measurement()
    };
    t.record(&Arc::new("r1".into()), &Ok(measurement()));
    t.record(&Arc::new("r2".into()), &Ok(slow));
    t.record(&Arc::new("r3".into()), &Err(ProbeError::EmptyResponse));
    let text = exposition(&registry, Format::Text);
    let value = |prefix: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let labels = r#"target="t",model="m",backend="openai-chat""#;
    let series =
        |name: &str, slo: &str| format!("inferprobe_{name}_total{{{labels},slo=\"{slo}\"}}");
    assert_eq!(value(&series("slo_observations", "ttft")), 2.0);
    assert_eq!(value(&series("slo_slow_observations", "ttft")), 1.0);
    // Two probes of 3 gaps of 10 ms and one of 40 ms: 8 gaps, 2 over 20 ms.
    assert_eq!(value(&series("slo_observations", "itl")), 8.0);
    assert_eq!(value(&series("slo_slow_observations", "itl")), 2.0);
    for (histogram, slo, bound) in [
        ("time_to_first_token", "ttft", "0.2"),
        ("inter_token_latency", "itl", "0.02"),
    ] {
        let within = value(&format!(
            "inferprobe_{histogram}_seconds_bucket{{le=\"{bound}\",{labels}}}"
        ));
        let count = value(&format!("inferprobe_{histogram}_seconds_count{{{labels}}}"));
        let observed = value(&series("slo_observations", slo));
        let slow = value(&series("slo_slow_observations", slo));
        assert_eq!((count, count - within), (observed, slow), "{slo}");
    }
    assert!(!text.contains("slo=\"tpot\""), "{text}");
    assert!(!text.contains("slo=\"e2el\""), "{text}");
}

/// Cached prompt tokens (issue 35, item 1): no series until the server reports them, then
/// every report counted, canary checks' too; a reported 0 makes the series.
#[test]
fn cached_prompt_tokens_have_no_series_until_reported() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target("t"));
    let series = format!("inferprobe_prompt_cached_tokens_total{{{LABELS}}}");
    t.record(&Arc::new("r1".into()), &Ok(measurement()));
    let text = exposition(&registry, Format::Text);
    assert!(
        !text.contains("inferprobe_prompt_cached_tokens_total{"),
        "{text}"
    );
    let reported = |cached| Measurement {
        cached_prompt_tokens: Some(cached),
        ..measurement()
    };
    t.record(&Arc::new("r2".into()), &Ok(reported(0)));
    let text = exposition(&registry, Format::Text);
    assert!(text.contains(&format!("{series} 0\n")), "{text}");
    t.record(&Arc::new("r3".into()), &Ok(reported(8)));
    let text = exposition(&registry, Format::Text);
    assert!(text.contains(&format!("{series} 8\n")), "{text}");
    // A second handle on the same target (a reload) adds to the same series.
    let again = metrics.target(&target("t"));
    again.record(&Arc::new("r4".into()), &Ok(reported(4)));
    let text = exposition(&registry, Format::Text);
    assert!(text.contains(&format!("{series} 12\n")), "{text}");
    metrics.remove_target(t.labels());
    let text = exposition(&registry, Format::Text);
    assert!(
        !text.contains("inferprobe_prompt_cached_tokens_total{"),
        "{text}"
    );
}

/// A probe that ends after its target was removed (discovery dropped the pod mid-request)
/// must not bring the lazily made series back: nothing would remove it again. The churn
/// test (tests/discovery_churn.rs) found 3 such series left after 1,000 pods came and went.
#[test]
fn a_probe_ending_after_its_target_left_makes_no_series() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target("t"));
    metrics.remove_target(t.labels());
    let reported = Measurement {
        cached_prompt_tokens: Some(5),
        ..measurement()
    };
    t.record(&Arc::new("late".into()), &Ok(reported));
    let text = exposition(&registry, Format::Text);
    assert!(!text.contains("target=\"t\""), "{text}");
}

/// The same for the canary's series made at record time (a structured check's capability
/// and reason, the baseline comparison): a check that ends after its replica left makes
/// none of them again.
#[tokio::test]
async fn a_canary_check_ending_after_its_target_left_makes_no_series() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let raw = RawConfig {
        targets: vec![RawTarget {
            name: Some("t".into()),
            url: Some("http://127.0.0.1:1".into()),
            model: Some("m".into()),
            backend: Some("openai-chat".into()),
            canary: Some(crate::config::RawCanary::default()),
            ..RawTarget::default()
        }],
        ..RawConfig::default()
    };
    let t = metrics.target(&validate(&raw).unwrap().targets[0]);
    metrics.remove_target(t.labels());
    let verdict = CanaryVerdict {
        result: CheckResult::InvalidOutput,
        position: None,
        drift: None,
        baseline: Some(CheckResult::Match),
        structured: Some((
            crate::structure::Capability::Json,
            Some(InvalidReason::Truncated),
        )),
    };
    t.open_canary_baseline();
    t.record_canary(&Ok(measurement()), &verdict).await;
    let text = exposition(&registry, Format::Text);
    assert!(!text.contains("target=\"t\""), "{text}");
}
