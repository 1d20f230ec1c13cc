//! `/probe?target=…` (issue 59, item 5): one probe of a configured target at scrape time,
//! answered in the blackbox exporter's names; configured targets only (never a URL of the
//! caller's choosing), at most four at once, within the scrape's timeout.

use crate::common;

use std::time::{Duration, Instant};

use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::{Fault, SimConfig};

fn target(name: &str, url: &str) -> String {
    // A slow stream (one arrival a minute on average) beside the scrape-driven probes.
    format!(
        "[[targets]]\nname = \"{name}\"\nurl = \"{url}\"\nmodel = \"m\"\nrate = 0.016\noutput_tokens = 4\nprobe_endpoint = true\n"
    )
}

/// The status, and the exposition (an error's text parses to no samples).
async fn probe(daemon: &common::Daemon, query: &str, timeout: Option<&str>) -> (u16, Scrape) {
    let url = format!("http://{}/probe?{query}", daemon.addr);
    let mut request = reqwest::Client::new().get(url);
    if let Some(timeout) = timeout {
        request = request.header("X-Prometheus-Scrape-Timeout-Seconds", timeout);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    match status {
        200 => (status, Scrape::parse(text)),
        _ => (
            status,
            Scrape {
                text,
                samples: Vec::new(),
            },
        ),
    }
}

fn value(s: &Scrape, name: &str) -> Option<f64> {
    s.matching(name, &[]).next().map(|x| x.value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_probes_a_configured_target_and_only_that() {
    let ok = start_sim(SimConfig {
        ttft: Duration::from_millis(60),
        itl: Duration::from_millis(5),
        ..SimConfig::default()
    })
    .await;
    let failing = start_sim(SimConfig {
        faults: vec![(Fault::Http500, 1.0)],
        ..SimConfig::default()
    })
    .await;
    let slow = start_sim(SimConfig {
        ttft: Duration::from_secs(3),
        ..SimConfig::default()
    })
    .await;
    // Something the caller would like probed, which no target names.
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let slow_ones: Vec<String> = (1..=5).map(|i| format!("slow{i}")).collect();
    let mut toml = [
        target("chat", &ok.url()),
        target("broken", &failing.url()),
        target("slow", &slow.url()),
        // Configured, but not offered to /probe.
        target("private", &format!("{}/private", ok.url())).replace("probe_endpoint = true", ""),
    ]
    .concat();
    for name in &slow_ones {
        toml += &target(name, &slow.url());
    }
    let daemon = start_daemon(&toml).await;

    // By name and by URL: a success, with the stream's measurements.
    for query in ["target=chat".to_owned(), format!("target={}", ok.url())] {
        let (status, s) = probe(&daemon, &query, None).await;
        assert_eq!(status, 200, "{query}: {}", s.text);
        assert_eq!(value(&s, "probe_success"), Some(1.0), "{}", s.text);
        let ttft = value(&s, "probe_time_to_first_token_seconds").unwrap();
        assert!((0.06..1.0).contains(&ttft), "ttft {ttft}\n{}", s.text);
        let duration = value(&s, "probe_duration_seconds").unwrap();
        assert!(duration >= ttft, "{}", s.text);
        assert_eq!(value(&s, "probe_output_tokens"), Some(4.0), "{}", s.text);
        let processing = [("phase", "processing")];
        assert_eq!(
            s.matching("probe_http_duration_seconds", &processing)
                .count(),
            1,
            "{}",
            s.text
        );
    }

    // A failure says so, and why.
    let (status, s) = probe(&daemon, "target=broken", None).await;
    assert_eq!(status, 200);
    assert_eq!(value(&s, "probe_success"), Some(0.0), "{}", s.text);
    let category = [("category", "http_5xx")];
    assert_eq!(s.sum("probe_error", &category), 1.0, "{}", s.text);

    // The scrape's timeout (less half a second) bounds the probe.
    let started = Instant::now();
    let (status, s) = probe(&daemon, "target=slow", Some("1.5")).await;
    let took = started.elapsed();
    assert_eq!(status, 200);
    assert_eq!(value(&s, "probe_success"), Some(0.0), "{}", s.text);
    let timeout = [("category", "scrape_timeout")];
    assert_eq!(s.sum("probe_error", &timeout), 1.0, "{}", s.text);
    // Within the scrape's own timeout: Prometheus still reads it.
    assert!(
        took < Duration::from_millis(1500),
        "answered after {took:?}"
    );

    // Never a URL no target has, nor no target at all.
    let stranger = format!("target=http://{}", elsewhere.local_addr().unwrap());
    let (status, s) = probe(&daemon, &stranger, None).await;
    assert_eq!(status, 404, "{}", s.text);
    let accepted = tokio::time::timeout(Duration::from_millis(200), elsewhere.accept()).await;
    assert!(
        accepted.is_err(),
        "the daemon connected to a host no target names"
    );
    assert_eq!(probe(&daemon, "", None).await.0, 400);

    // Only targets that allow it; a module must name one.
    assert_eq!(probe(&daemon, "target=private", None).await.0, 404);
    assert_eq!(
        probe(&daemon, "target=chat&module=http_2xx", None).await.0,
        400
    );

    // At most four at once, one per target: the rest are refused, not queued.
    let many: Vec<_> = slow_ones
        .iter()
        .map(|name| format!("target={name}"))
        .chain(["target=slow1".to_owned()])
        .collect();
    let many = many.iter().map(|q| probe(&daemon, q, Some("3")));
    let statuses: Vec<u16> = futures_util::future::join_all(many)
        .await
        .into_iter()
        .map(|(status, _)| status)
        .collect();
    assert_eq!(
        statuses.iter().filter(|&&s| s == 200).count(),
        4,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|&&s| s == 503).count(),
        2,
        "{statuses:?}"
    );

    // A caller that gives up frees its slot: four abandoned probes hold nothing.
    let client = reqwest::Client::new();
    let abandoned = slow_ones[..4].iter().map(|name| {
        client
            .get(format!("http://{}/probe?target={name}", daemon.addr))
            .timeout(Duration::from_millis(300))
            .send()
    });
    for gone in futures_util::future::join_all(abandoned).await {
        assert!(gone.is_err(), "the slow probe answered within 300 ms");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, s) = probe(&daemon, "target=slow5", Some("1.5")).await;
    assert_eq!(
        status, 200,
        "slots still held by callers that left: {}",
        s.text
    );

    // The scrape-driven probes are no part of the stream's series.
    let s = daemon.scrape().await;
    daemon.stop().await;
    assert!(s.requests("chat") <= 2.0, "{}", s.text);
    assert!(s.requests("broken") <= 2.0, "{}", s.text);
}
