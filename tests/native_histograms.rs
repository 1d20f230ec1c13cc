//! Native histograms as a real Prometheus reads them (issue 34, item 3): Debian's
//! Prometheus with `--enable-feature=native-histograms` scrapes the in-process daemon (it
//! asks for the protobuf exposition), and its `histogram_quantile` over the native series
//! is judged at 1 ms, 10 ms, 100 ms and 1 s to first token.
//!
//! Two truths. The simulator's injected TTFT: the probe's clock starts before the
//! server's, so no measured TTFT is below it, and above it the measurement carries the
//! client's own overhead (milliseconds on a busy 2-core machine, so the 1 ms and 10 ms
//! scales are judged against the second truth only). And every probe's exact TTFT, from
//! its OTLP span (`gen_ai.response.time_to_first_chunk`) in the test's collector: the
//! first n spans to end are the n probes the histogram Prometheus read had counted. A
//! native bucket at schema 3 spans a factor of 2^(1/8), so the estimate lies in the bucket
//! of the true quantile: within a factor of 1.0905 of it. The classic buckets' estimate
//! of the same probes is printed beside it (docs/performance.md has the figures).

use crate::common;

use std::time::Duration;

use common::prometheus::Prometheus;
use common::{otlp, start_daemon, start_sim};
use inferprobe::metrics::TTFT_BUCKETS;
use inferprobe::sim::SimConfig;

/// (target name, injected TTFT)
const SCALES: [(&str, Duration); 4] = [
    ("ttft-1ms", Duration::from_millis(1)),
    ("ttft-10ms", Duration::from_millis(10)),
    ("ttft-100ms", Duration::from_millis(100)),
    ("ttft-1s", Duration::from_secs(1)),
];
const BUCKET_FACTOR: f64 = 1.090_507_732_665_257_7; // 2^(1/8)
const PROBES: usize = 40;

fn config(urls: &[String], mode: &str, collector: &str) -> String {
    let mut toml = format!(
        r#"
        seed = 1
        [metrics]
        histograms = "{mode}"
        [tracing]
        otlp_endpoint = "{collector}"
        sampling_ratio = 1.0
        [defaults]
        model = "m"
        backend = "openai-chat"
        rate = 5
        max_concurrency = 8
        input_tokens = 8
        output_tokens = 2
        "#
    );
    for ((name, _), url) in SCALES.iter().zip(urls) {
        toml.push_str(&format!(
            "[[targets]]\nname = \"{name}\"\nurl = \"{url}\"\n"
        ));
    }
    toml
}

/// Prometheus with native histograms on, scraping the daemon every second.
async fn scraping(daemon: &common::Daemon) -> Option<Prometheus> {
    let scrape = format!(
        "  - job_name: inferprobe\n    honor_labels: true\n\
         \x20   static_configs:\n      - targets: ['{}']\n",
        daemon.addr
    );
    Prometheus::start_native(&scrape).await
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The observation a quantile's rank falls on, as `histogram_quantile` ranks them.
fn rank(q: f64, n: usize) -> usize {
    ((q * n as f64).ceil() as usize).clamp(1, n) - 1
}

/// What `histogram_quantile` makes of these values in classic buckets with these upper
/// bounds: linear interpolation inside the bucket the rank falls in.
fn classic_quantile(q: f64, sorted: &[f64], bounds: &[f64]) -> f64 {
    let target = q * sorted.len() as f64;
    let mut below = 0usize;
    let mut lower = 0.0;
    for &upper in bounds {
        let within = sorted.iter().filter(|&&v| v <= upper).count();
        if within as f64 >= target {
            let in_bucket = (within - below) as f64;
            return lower + (upper - lower) * (target - below as f64) / in_bucket;
        }
        (below, lower) = (within, upper);
    }
    lower
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_quantiles_agree_with_the_exact_latencies_at_every_scale() {
    let mut sims = Vec::new();
    for (_, ttft) in SCALES {
        let sim = SimConfig {
            ttft,
            itl: Duration::from_millis(1),
            jitter: 0.2,
            seed: Some(7),
            ..SimConfig::default()
        };
        sims.push(start_sim(sim).await);
    }
    let urls: Vec<String> = sims.iter().map(|s| s.url()).collect();
    let collector = otlp::start(Duration::ZERO).await;
    let daemon = start_daemon(&config(&urls, "native", &collector.url)).await;
    let Some(prometheus) = scraping(&daemon).await else {
        return;
    };
    for (name, _) in SCALES {
        let count =
            format!("histogram_count(inferprobe_time_to_first_token_seconds{{target=\"{name}\"}})");
        prometheus
            .wait_for(&format!("{count} >= {PROBES}"), Duration::from_secs(90))
            .await;
    }
    // Native mode: the protobuf scrape carried the native histogram alone.
    let classic = prometheus
        .query("count(inferprobe_time_to_first_token_seconds_bucket) or count(inferprobe_time_to_first_token_seconds_count)")
        .await
        .unwrap();
    assert!(
        classic.is_empty(),
        "classic series in native mode: {classic:?}"
    );
    let at = unix_now();
    for (name, injected) in SCALES {
        let injected = injected.as_secs_f64();
        let selector = format!("inferprobe_time_to_first_token_seconds{{target=\"{name}\"}}");
        let one = |v: Vec<f64>| -> f64 {
            let [x] = v[..] else { panic!("{name}: {v:?}") };
            x
        };
        let n = one(prometheus
            .query_at(&format!("histogram_count({selector})"), at)
            .await
            .unwrap()) as usize;
        // The spans of the probes that histogram counted: the first n to end.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let exact = loop {
            let mut spans: Vec<_> = collector
                .spans()
                .into_iter()
                .filter(|s| otlp::attribute(s, "inferprobe.target").as_deref() == Some(name))
                .filter(|s| otlp::attribute(s, "inferprobe.canary").is_none())
                .collect();
            if spans.len() >= n {
                spans.sort_by_key(|s| s.end_time_unix_nano);
                let mut ttfts: Vec<f64> = spans[..n]
                    .iter()
                    .map(|s| {
                        otlp::attribute(s, "gen_ai.response.time_to_first_chunk")
                            .and_then(|t| t.parse().ok())
                            .unwrap_or_else(|| panic!("{name}: a span without its TTFT"))
                    })
                    .collect();
                ttfts.sort_by(f64::total_cmp);
                break ttfts;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name}: {} spans of {n}",
                spans.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert!(
            exact[0] >= injected * 0.8,
            "{name}: a TTFT of {} s",
            exact[0]
        );
        for q in [0.5, 0.9] {
            let native = one(prometheus
                .query_at(&format!("histogram_quantile({q}, {selector})"), at)
                .await
                .unwrap());
            let truth = exact[rank(q, n)];
            let classic = classic_quantile(q, &exact, TTFT_BUCKETS);
            eprintln!(
                "{name} p{}: exact {truth:.5} s, native {native:.5} s ({:+.1}%), classic {classic:.5} s ({:+.1}%) over {n} probes",
                q * 100.0,
                (native / truth - 1.0) * 100.0,
                (classic / truth - 1.0) * 100.0,
            );
            // A probe that ended at the same instant as the nth may stand in for it: one
            // rank either side.
            let low = exact[rank(q, n).saturating_sub(1)] / BUCKET_FACTOR;
            let high = exact[(rank(q, n) + 1).min(n - 1)] * BUCKET_FACTOR;
            assert!(
                (low..=high).contains(&native),
                "{name}: native p{q} {native} s outside [{low}, {high}] (exact {truth} s)"
            );
        }
        // Against the injected latency where the client's overhead is small beside it.
        if injected >= 0.1 {
            let p50 = exact[rank(0.5, n)];
            assert!(
                p50 >= injected * 0.8 && p50 <= injected * 1.2 + 0.02,
                "{name}: exact p50 {p50} s for an injected {injected} s ±20%"
            );
        }
    }
    daemon.stop().await;
}

/// What a Prometheus with native histograms on kept of the probes' TTFTs with `mode`: its
/// version, whether it kept the classic buckets too, and the exemplars it stored.
async fn kept(mode: &str) -> Option<(String, bool, Vec<serde_json::Value>)> {
    let sim = start_sim(SimConfig::default()).await;
    let collector = otlp::start(Duration::ZERO).await;
    let daemon = start_daemon(&config(&[sim.url()], mode, &collector.url)).await;
    let prometheus = scraping(&daemon).await?;
    let selector = "inferprobe_time_to_first_token_seconds{target=\"ttft-1ms\"}";
    prometheus
        .wait_for(
            &format!("histogram_count({selector}) >= 5"),
            Duration::from_secs(60),
        )
        .await;
    let classic = prometheus
        .query("count(inferprobe_time_to_first_token_seconds_bucket)")
        .await
        .unwrap();
    let get = |path: &str, params: Vec<(&str, String)>| {
        let url = reqwest::Url::parse_with_params(&format!("{}{path}", prometheus.url), params);
        async move {
            let body: serde_json::Value = reqwest::get(url.unwrap())
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            body
        }
    };
    let now = unix_now();
    let body = get(
        "/api/v1/query_exemplars",
        vec![
            ("query", selector.to_owned()),
            ("start", format!("{:.3}", now - 120.0)),
            ("end", format!("{now:.3}")),
        ],
    )
    .await;
    let exemplars: Vec<serde_json::Value> = body["data"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|series| series["exemplars"].as_array().into_iter().flatten())
        .cloned()
        .collect();
    let version = get("/api/v1/status/buildinfo", Vec::new()).await["data"]["version"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    daemon.stop().await;
    Some((version, !classic.is_empty(), exemplars))
}

/// Whether a Prometheus version reads a native histogram's own exemplar list (2.50 on).
fn reads_histogram_exemplars(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    major > 2 || (major == 2 && minor >= 50)
}

/// `both` (the default) on a Prometheus with native histograms on: it keeps the native
/// histogram (Prometheus 2.x and 3.x drop the classic buckets of a histogram that has
/// native ones unless `scrape_classic_histograms` / `always_scrape_classic_histograms` is
/// set), and the probes' exemplars ride on it: Prometheus 2.42 takes a native histogram's
/// exemplars from its classic buckets (`model/textparse/protobufparse.go` `Exemplar`), which
/// `both` carries, timestamped as it keeps only those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_keeps_the_native_histogram_and_its_exemplars() {
    let Some((version, classic, exemplars)) = kept("both").await else {
        return;
    };
    assert!(
        !classic,
        "Prometheus {version} kept the classic buckets too"
    );
    assert!(
        !exemplars.is_empty(),
        "no exemplars on Prometheus {version}"
    );
    for exemplar in exemplars {
        let id = exemplar["labels"]["request_id"]
            .as_str()
            .unwrap_or_default();
        let trace = exemplar["labels"]["trace_id"].as_str().unwrap_or_default();
        assert!(!id.is_empty() && trace.len() == 32, "{exemplar}");
    }
}

/// `native` moves the exemplars to the histogram's own exemplar list (the classic buckets
/// that carried them are gone), which only Prometheus 2.50 and later read: on 2.42 a
/// `native` daemon's TTFTs have no exemplars at all (docs/metrics.md says so), on 2.50+
/// they have them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_exemplars_need_prometheus_2_50() {
    let Some((version, classic, exemplars)) = kept("native").await else {
        return;
    };
    assert!(
        !classic,
        "Prometheus {version} kept classic buckets in native mode"
    );
    assert_eq!(
        !exemplars.is_empty(),
        reads_histogram_exemplars(&version),
        "Prometheus {version}: {} exemplars",
        exemplars.len()
    );
}

/// Prometheus 2.42's Accept header with native histograms on (`scrape/scrape.go`).
const PROTOBUF_ACCEPT: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// The TTFT histogram of a protobuf scrape: (classic buckets, native spans, schema).
async fn protobuf_ttft(daemon: &common::Daemon) -> (usize, usize, i32) {
    use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::MetricFamily;
    use prost::Message;
    let response = daemon.get("/metrics", Some(PROTOBUF_ACCEPT)).await;
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/vnd.google.protobuf"),
        "{content_type}"
    );
    let mut body = &response.bytes().await.unwrap()[..];
    while !body.is_empty() {
        let family = MetricFamily::decode_length_delimited(&mut body).unwrap();
        if family.name == "inferprobe_time_to_first_token_seconds" {
            let h = family.metric[0].histogram.clone().unwrap();
            return (h.bucket.len(), h.positive_span.len(), h.schema);
        }
    }
    panic!("no TTFT family in the protobuf scrape");
}

/// `[metrics] histograms` applies on reload, and a text scrape keeps its classic buckets
/// whatever the mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_switches_what_a_protobuf_scrape_carries() {
    let sim = start_sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inferprobe.toml");
    let write = |mode: &str| {
        let toml = format!(
            "[metrics]\nhistograms = \"{mode}\"\n[[targets]]\nname = \"t\"\nurl = \"{}\"\n\
             model = \"m\"\nbackend = \"openai-chat\"\nrate = 10\noutput_tokens = 2\n",
            sim.url()
        );
        std::fs::write(&path, toml).unwrap();
    };
    write("classic");
    let daemon = common::start_reloadable(&path).await;
    daemon
        .wait_for(Duration::from_secs(30), |s| s.successes("t") >= 2.0)
        .await;
    let (classic, spans, _) = protobuf_ttft(&daemon).await;
    assert!(
        classic > 0 && spans == 0,
        "classic mode: {classic} buckets, {spans} spans"
    );
    write("native");
    assert_eq!(daemon.reload().await.0, 200);
    let (classic, spans, schema) = protobuf_ttft(&daemon).await;
    assert!(
        classic == 0 && spans > 0,
        "native mode: {classic} buckets, {spans} spans"
    );
    assert_eq!(schema, 3);
    let text = daemon.scrape().await.text;
    assert!(
        text.contains("inferprobe_time_to_first_token_seconds_bucket{"),
        "{text}"
    );
    write("both");
    assert_eq!(daemon.reload().await.0, 200);
    let (classic, spans, _) = protobuf_ttft(&daemon).await;
    assert!(
        classic > 0 && spans > 0,
        "both: {classic} buckets, {spans} spans"
    );
    daemon.stop().await;
}
