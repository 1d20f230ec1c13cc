//! What a scrape shows: exemplars per format, reserved labels, the protobuf's buckets per
//! histogram mode, and SLI counters that agree with the histogram's threshold bucket.

use super::*;

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
