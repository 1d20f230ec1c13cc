//! Issue 42, item 1: no torn histogram, ever. Prometheus rejects a whole scrape when a
//! histogram's native buckets hold more observations than its count (2.42,
//! `tsdb/head_append.go` `ValidateHistogram`) or any other number (3.x,
//! `model/histogram/histogram.go` `Validate`), and marks every series of it stale. Before,
//! 17 of 100 protobuf scrapes at this load carried a schedule-lag histogram with one more
//! observation in its native buckets than in its count.
//!
//! 120 targets, each probed at 1/s (schedule lag on every arrival, latencies and token
//! counts on every probe), 12 of them also running the prefix-cache check (its cold and warm
//! histograms), while protobuf scrapes with Prometheus 2.42's header are decoded back to
//! back. Every histogram of every scrape: native count (zero bucket + buckets) = count =
//! the classic `+Inf` bucket, no bucket below zero; and every per-target counter and
//! histogram has a start timestamp, when its series were made. Meanwhile Debian's
//! Prometheus 2.42 with native histograms on scrapes the same daemon every second for two
//! minutes: `up` is 1 on every scrape (a rejected scrape reads 0).

use crate::common;

use std::time::{Duration, Instant};

use common::prometheus::Prometheus;
use common::{start_daemon, start_sim};
use inferprobe::sim::SimConfig;
use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::{
    Histogram, MetricFamily,
};
use prost::Message;

/// Prometheus 2.42's Accept header with `--enable-feature=native-histograms`
/// (`scrape/scrape.go` `scrapeAcceptHeaderWithProtobuf`).
const PROMETHEUS_2_42: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

const TARGETS: usize = 120;
const SCRAPES: usize = 100;
/// How long Prometheus scrapes the loaded daemon.
const PROMETHEUS_FOR: Duration = Duration::from_secs(120);

/// What is wrong with `h`, if anything.
fn torn(h: &Histogram) -> Option<String> {
    let mut count = h.zero_count;
    let mut bucket: i64 = 0;
    for delta in &h.positive_delta {
        bucket += delta;
        if bucket < 0 {
            return Some(format!("a native bucket below zero: {h:?}"));
        }
        count += bucket as u64;
    }
    if count != h.sample_count {
        // Also when the daemon, finding a mismatch, sent the classic part alone.
        return Some(format!(
            "{count} observations in native buckets, count {}",
            h.sample_count
        ));
    }
    match h.bucket.last() {
        Some(inf) if inf.cumulative_count != h.sample_count => Some(format!(
            "+Inf bucket {} but count {}",
            inf.cumulative_count, h.sample_count
        )),
        None => Some("no classic buckets in `both` mode".into()),
        _ => None,
    }
}

/// Whether a start timestamp was given, and is when the series were made: after `since`
/// (the daemon's start), and not in the future.
fn started_at<T: Clone>(start: Option<&T>, since: std::time::SystemTime) -> bool
where
    std::time::SystemTime: TryFrom<T>,
{
    let Some(start) = start else { return false };
    let Ok(at) = std::time::SystemTime::try_from(start.clone()) else {
        return false;
    };
    let slack = Duration::from_secs(1);
    at + slack >= since && at <= std::time::SystemTime::now()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_histogram_of_every_protobuf_scrape_is_one_snapshot() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    })
    .await;
    let mut config = String::from(
        r#"
        seed = 1
        [defaults]
        model = "m"
        backend = "openai-chat"
        rate = 1
        input_tokens = 8
        output_tokens = 3
        "#,
    );
    for i in 0..TARGETS {
        let prefix = if i % 10 == 0 {
            r#"prefix_cache = { interval = "1s", prefix_tokens = 64 }"#
        } else {
            ""
        };
        config.push_str(&format!(
            "[[targets]]\nname = \"t{i}\"\nurl = \"http://{}\"\n{prefix}\n",
            sim.addr
        ));
    }
    let since = std::time::SystemTime::now();
    let daemon = start_daemon(&config).await;
    let prometheus = Prometheus::start_native(&format!(
        "  - job_name: inferprobe\n    honor_labels: true\n\
         \x20   static_configs:\n      - targets: ['{}']\n",
        daemon.addr
    ))
    .await;
    // Every target has probed, and the prefix-cache histograms exist.
    daemon
        .wait_for(Duration::from_secs(60), |s| {
            s.matching("inferprobe_requests_total", &[]).count() >= TARGETS
                && s.sum("inferprobe_prefix_cache_warm_ttft_seconds_count", &[]) > 0.0
        })
        .await;
    let started = Instant::now();
    let (mut histograms, mut problems) = (0usize, Vec::new());
    // A series' start is when it was made: the same on every scrape (a start that moved
    // would make Prometheus 3.x add a zero sample and count a reset).
    let mut starts = std::collections::HashMap::new();
    for scrape in 0..SCRAPES {
        let response = daemon.get("/metrics", Some(PROMETHEUS_2_42)).await;
        let mut body = &response.bytes().await.unwrap()[..];
        while !body.is_empty() {
            let family = MetricFamily::decode_length_delimited(&mut body).unwrap();
            for metric in &family.metric {
                let start = (metric.counter.as_ref().and_then(|c| c.start_timestamp))
                    .or(metric.histogram.as_ref().and_then(|h| h.start_timestamp));
                if let Some(start) = start {
                    let key = format!("{}{:?}", family.name, metric.label);
                    let first = starts.entry(key).or_insert(start);
                    if *first != start {
                        problems.push(format!(
                            "scrape {scrape}: {}: start moved from {first:?} to {start:?}",
                            family.name
                        ));
                    }
                }
                let per_target = metric.label.iter().any(|l| l.name == "target");
                if let Some(counter) = &metric.counter
                    && per_target
                    && !started_at(counter.start_timestamp.as_ref(), since)
                {
                    problems.push(format!(
                        "scrape {scrape}: {}: start timestamp {:?}",
                        family.name, counter.start_timestamp
                    ));
                }
                let Some(h) = &metric.histogram else { continue };
                if !started_at(h.start_timestamp.as_ref(), since) {
                    problems.push(format!("scrape {scrape}: {}: no start", family.name));
                }
                histograms += 1;
                if let Some(problem) = torn(h) {
                    problems.push(format!("scrape {scrape}: {}: {problem}", family.name));
                }
            }
        }
    }
    let decoded_in = started.elapsed();
    if let Some(prometheus) = &prometheus {
        // Two minutes of Prometheus's own scrapes at this load, then every one judged.
        tokio::time::sleep(PROMETHEUS_FOR.saturating_sub(started.elapsed())).await;
        let window = format!("[{}s]", PROMETHEUS_FOR.as_secs());
        let scrapes = prometheus
            .query(&format!("count_over_time(up{window})"))
            .await
            .unwrap();
        let worst = prometheus
            .query(&format!("min_over_time(up{window})"))
            .await
            .unwrap();
        let native = prometheus
            .query("histogram_count(sum(rate(inferprobe_schedule_lag_seconds[1m])))")
            .await
            .unwrap();
        eprintln!("Prometheus: {scrapes:?} scrapes, min(up) {worst:?}, lag native rate {native:?}");
        assert!(scrapes[0] >= 100.0, "{scrapes:?} scrapes in {window}");
        assert_eq!(worst, [1.0], "a scrape Prometheus rejected");
        assert!(
            native[0] > 0.0,
            "the native histograms were ingested: {native:?}"
        );
    }
    let s = daemon.scrape().await;
    daemon.stop().await;
    let probes = s.sum("inferprobe_requests_total", &[]);
    eprintln!(
        "{SCRAPES} protobuf scrapes in {:?}, {histograms} histograms, {probes} probes",
        decoded_in
    );
    assert!(
        problems.is_empty(),
        "{} torn: {:#?}",
        problems.len(),
        &problems[..problems.len().min(10)]
    );
    // The families the issue names were in it, and every scrape carried them.
    assert!(histograms >= SCRAPES * TARGETS * 7, "{histograms}");
}
