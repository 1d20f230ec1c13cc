//! Every family the daemon can write, at once, read by the strictest consumers there are:
//! promtool's text parser and a real Prometheus scrape (issue 33, item 1). A label name
//! written twice on one series, or a family written twice, makes Prometheus drop the whole
//! scrape and every target of the process goes dark; `up` alone would say why.
//!
//! The daemon runs static targets with every SLO threshold and failing probes, a canary
//! with structured prompts, a file_sd pool compared with a baseline whose file holds labels
//! named like the exporter's own (`group`, `address`), and trace export. The label names it
//! writes beside the targets' own are then held to `metrics::labels::RESERVED` both ways.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::canary::sim;
use common::{Scrape, start_daemon, start_sim};
use inferprobe::metrics::labels::RESERVED;
use inferprobe::sim::{Fault, SimConfig};

/// The label names of one exposition line, series first, then its exemplar's (after " # ").
fn names(line: &str) -> (Vec<String>, Vec<String>) {
    let mut parts = line.splitn(2, " # ").map(|part| {
        let Some((_, rest)) = part.split_once('{') else {
            return Vec::new();
        };
        let mut names = Vec::new();
        let mut quoted = false;
        let mut escaped = false;
        let mut name = String::new();
        for c in rest.chars() {
            match (quoted, escaped, c) {
                (true, true, _) => escaped = false,
                (true, false, '\\') => escaped = true,
                (true, false, '"') => quoted = false,
                (true, false, _) => {}
                (false, _, '"') => quoted = true,
                (false, _, '=') => names.push(std::mem::take(&mut name)),
                (false, _, '}') => break,
                (false, _, ',') => {}
                (false, _, c) => name.push(c),
            }
        }
        names
    });
    (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_family_at_once_passes_the_strict_parsers() {
    let failing = start_sim(SimConfig {
        ttft: Duration::from_millis(3),
        itl: Duration::from_millis(1),
        faults: vec![(Fault::Http500, 0.3)],
        seed: Some(2),
        ..SimConfig::default()
    })
    .await;
    // Each serves a LoRA adapter `a` of `m`, for the adapter check's series, and reports a
    // quota it never reaches, for the rate-limit series.
    let with_adapter = |seed| {
        let mut config = sim(seed);
        config.lora.adapters = vec![("a".into(), "/adapters/a".into())];
        config.lora.served_model_name = Some("m".into());
        config.limits.rate_limit = Some(1_000_000_000);
        config
    };
    let (v1, v2) = (
        start_sim(with_adapter(0)).await,
        start_sim(with_adapter(7)).await,
    );
    let dir = tempfile::tempdir().unwrap();
    // An HTTPS server, for the certificate's expiry and the TLS phase.
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".into()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_file, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let https = start_sim(SimConfig {
        ttft: Duration::from_millis(3),
        itl: Duration::from_millis(1),
        tls_cert: Some(cert_file),
        tls_key: Some(key_file),
        ..SimConfig::default()
    })
    .await;
    // Each replica's file_sd group names labels the exporter writes itself.
    let pool = common::pool_file(
        dir.path(),
        &[
            (
                &v1.addr.to_string(),
                &[
                    ("model", "m"),
                    ("version", "v1"),
                    ("group", "blue"),
                    ("address", "lb"),
                ],
            ),
            (
                &v2.addr.to_string(),
                &[("model", "m"), ("version", "v2"), ("group", "green")],
            ),
        ],
    );
    let structured = common::structured::prompts(
        dir.path(),
        "structured.jsonl",
        &[
            common::structured::json_line(),
            common::structured::named_line("Paris"),
        ],
    );
    let toml = format!(
        r#"
        seed = 9
        [labels]
        node = "n1"
        [tracing]
        otlp_endpoint = "http://127.0.0.1:9/v1/traces"
        [defaults]
        model = "m"
        rate = 20
        output_tokens = 4
        [[targets]]
        name = "chat"
        url = "{url}"
        slo = {{ ttft = "1s", tpot = "100ms", itl = "100ms", e2el = "5s", objective = 0.99 }}
        max_concurrency = 1
        canary = {{ interval = "50ms", max_tokens = 64, prompts = "{structured}" }}
        prefix_cache = {{ objective = 0.9 }}
        [[targets]]
        name = "completions"
        backend = "openai"
        url = "{url}"
        labels = {{ zone = "a" }}
        slo = {{ e2el = "5s" }}
        [[targets]]
        name = "secure"
        url = "https://127.0.0.1:{https_port}"
        insecure_skip_verify = true
        [[discovery]]
        name = "pool"
        source = "file"
        path = "{pool}"
        refresh = "100ms"
        [discovery.template]
        rate = 0.5
        canary = {{ interval = "20ms", max_tokens = 16, group_by = ["version"], baseline = "v1" }}
        adapters = {{ interval = "20ms" }}
        "#,
        url = failing.url(),
        pool = pool.display(),
        https_port = https.addr.port(),
    );
    let daemon = start_daemon(&toml).await;
    let features = |s: &Scrape| {
        let baseline = s.sum(
            "inferprobe_canary_baseline_checks_total",
            &[("version", "v2"), ("result", "diverged")],
        );
        ["chat", "completions"]
            .iter()
            .all(|t| s.successes(t) >= 1.0 && s.all_errors(t) >= 1.0)
            && s.sum(
                "inferprobe_requests_skipped_total",
                &[("reason", "concurrency")],
            ) >= 1.0
            && s.sum(
                "inferprobe_canary_structured_checks_total",
                &[("target", "chat")],
            ) >= 1.0
            && baseline >= 1.0
            && s.sum("inferprobe_adapter_checks_total", &[("adapter", "a")]) >= 1.0
            && s.sum("inferprobe_ratelimit_remaining", &[]) >= 1.0
            && s.successes("secure") >= 1.0
    };
    let scrape = daemon.wait_for(Duration::from_secs(60), features).await;
    let openmetrics = daemon
        .get(
            "/metrics",
            Some("application/openmetrics-text;version=1.0.0"),
        )
        .await
        .text()
        .await
        .unwrap();

    // Every label name at most once per series and per exemplar, every family once.
    for (format, text) in [("text", &scrape.text), ("OpenMetrics", &openmetrics)] {
        let mut families = BTreeSet::new();
        for line in text.lines() {
            if let Some(family) = line.strip_prefix("# TYPE ") {
                let family = family.split(' ').next().unwrap_or_default();
                assert!(
                    families.insert(family.to_owned()),
                    "{format}: {family} twice"
                );
                continue;
            }
            let (series, exemplar) = names(line);
            for set in [series, exemplar] {
                let unique: BTreeSet<_> = set.iter().collect();
                assert_eq!(unique.len(), set.len(), "{format}: {line}");
            }
        }
    }
    // The file's `group` and `address` went on as exported_…, its own labels as they were.
    let renamed = [
        ("version", "v1"),
        ("exported_group", "blue"),
        ("exported_address", "lb"),
    ];
    assert!(
        scrape
            .samples
            .iter()
            .any(|s| s.name == "inferprobe_requests_total"
                && renamed
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(v))),
        "{}",
        scrape.text
    );

    // The names written beside the targets' own labels are exactly the reserved list.
    let own: BTreeSet<&str> = [
        "node",
        "zone",
        "version",
        "pod",
        "address",
        "exported_group",
        "exported_address",
    ]
    .into();
    let mut written = BTreeSet::new();
    for line in scrape.text.lines().filter(|l| !l.starts_with('#')) {
        let (series, _) = names(line);
        if !series.iter().any(|n| n == "target") || line.starts_with("inferprobe_canary_votes") {
            continue;
        }
        for name in series {
            if !own.contains(name.as_str()) {
                written.insert(name);
            }
        }
    }
    let reserved: BTreeSet<String> = RESERVED.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(written, reserved, "labels written beside a target's own");

    if let Some(report) = common::prometheus::promtool_check_metrics(&scrape.text) {
        assert!(report.trim().is_empty(), "promtool check metrics: {report}");
    }
    // A real Prometheus scrapes it as the shipped PodMonitor does (OpenMetrics first):
    // `up` is 1 and it took every sample.
    if let Some(prometheus) = common::prometheus::Prometheus::start(daemon.addr).await {
        prometheus
            .wait_for("up{job=\"inferprobe\"}", Duration::from_secs(30))
            .await;
        let up = prometheus.query("up{job=\"inferprobe\"}").await.unwrap();
        assert_eq!(up, [1.0], "Prometheus rejected the scrape");
        let samples = prometheus.query("scrape_samples_scraped").await.unwrap();
        assert!(samples[0] > 500.0, "{samples:?}");
        let exported = prometheus
            .query("count(inferprobe_requests_total{exported_group=\"blue\"})")
            .await
            .unwrap();
        assert_eq!(exported, [1.0]);
    }
    daemon.stop().await;
}

/// The line reader above sees what Prometheus would refuse: the issue's own example, a
/// `group` written twice, and escaped quotes and commas inside values.
#[test]
fn the_reader_finds_a_name_written_twice() {
    let line = r#"inferprobe_canary_checks_total{target="t",group="g",v="a \"b\", c=d",group="",result="diverged"} 1 # {request_id="x"} 1.0"#;
    let (series, exemplar) = names(line);
    assert_eq!(series, ["target", "group", "v", "group", "result"]);
    assert_eq!(exemplar, ["request_id"]);
}
