//! The correctness canary against real servers: three llama-server replicas, two with the
//! same tiny random-weight model and one with other random weights (TINY_OTHER). Ignored by
//! `cargo test`; scripts/real-server/test.sh runs it (.ci/run does).
//!
//! A random-weight model is rarely sure (its top-1 leads top-2 by a fraction of a nat), so
//! these run with a small `margin`: what they prove is that identical replicas never
//! diverge, alone or batched with other requests, while other weights are flagged; and they
//! print the figures the README's default margin rests on.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{llama, start_daemon};
use inferprobe::canary::compare::{Verdict, compare};
use inferprobe::logprobs::Position;
use inferprobe::probe::Prober;
use prometheus_client::metrics::counter::Counter;
use tokio_util::sync::CancellationToken;

const MARGIN: f64 = 0.05;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn same_model_replicas_never_diverge_under_load_and_other_weights_are_flagged() {
    let (tiny, other) = (llama::tiny(), llama::path("TINY_OTHER", "tiny-other.gguf"));
    let a = llama::start(&tiny, 2048, &[]).await;
    let b = llama::start(&tiny, 2048, &[]).await;
    let c = llama::start(&other, 2048, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = common::pool_file(dir.path(), &[(&a.url, &[]), (&b.url, &[]), (&c.url, &[])]);
    // Latency probes at 8/s keep every replica's four slots busy with other requests, so
    // canary requests are batched with them (continuous batching).
    let toml = format!(
        r#"
        seed = 7
        [[discovery]]
        name = "pool"
        source = "file"
        path = "{}"
        refresh = "100ms"
        [discovery.template]
        backend = "openai-chat"
        model = "tiny"
        rate = 8
        max_concurrency = 4
        input_tokens = 64
        output_tokens = 32
        canary = {{ interval = "100ms", max_tokens = 16, margin = {MARGIN} }}
        "#,
        file.display()
    );
    let daemon = start_daemon(&toml).await;
    let checks = |s: &common::Scrape, pod: &str, result: &str| {
        s.sum(
            "inferprobe_canary_checks_total",
            &[("target", "pool"), ("pod", pod), ("result", result)],
        )
    };
    let scored =
        |s: &common::Scrape, pod: &str| checks(s, pod, "match") + checks(s, pod, "diverged");
    let s = daemon
        .wait_for(Duration::from_secs(180), |s| {
            ["r0", "r1", "r2"].iter().all(|pod| scored(s, pod) >= 40.0)
        })
        .await;
    daemon.stop().await;
    for pod in ["r0", "r1", "r2"] {
        eprintln!(
            "{pod}: match {}, diverged {}, unscored {}, latency probes {}",
            checks(&s, pod, "match"),
            checks(&s, pod, "diverged"),
            checks(&s, pod, "unscored"),
            s.replica("pool", pod)
        );
    }
    assert_eq!(
        checks(&s, "r0", "diverged") + checks(&s, "r1", "diverged"),
        0.0
    );
    let (flagged, scored_other) = (checks(&s, "r2", "diverged"), scored(&s, "r2"));
    assert!(
        flagged >= 0.5 * scored_other,
        "other weights: {flagged} of {scored_other} diverged"
    );
    assert!(s.all_errors("pool") == 0.0, "{}", s.text);
}

/// One greedy answer of `prober` to `text`, with logprobs.
async fn answer(prober: &Prober, text: &str) -> Vec<Position> {
    let spec = prober.target.canary.clone().unwrap();
    let prompt = inferprobe::canary::prompt(&spec, text, "tiny");
    let report = prober
        .probe("canary-measure", &prompt, &CancellationToken::new())
        .await;
    let answer = inferprobe::canary::answer(&report).expect("the canary request failed");
    assert_eq!(answer.positions.len(), 16, "{:?}", report.record.response);
    answer.positions
}

fn largest_difference(a: &[Position], b: &[Position]) -> (bool, f64) {
    let same = a.iter().zip(b).all(|(x, y)| x.token.same(&y.token));
    let mut largest: f64 = 0.0;
    for (x, y) in a.iter().zip(b).take_while(|(x, y)| x.token.same(&y.token)) {
        for (token, lp) in &x.top {
            if let Some((_, other)) = y.top.iter().find(|(t, _)| t.same(token)) {
                largest = largest.max((lp - other).abs());
            }
        }
    }
    (same, largest)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The figures behind the default margin: logprob differences between identical replicas,
/// alone and batched with 15 other requests, and how sure this model is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn logprob_differences_between_identical_replicas_alone_and_batched() {
    let tiny = llama::tiny();
    let (a, b) = (
        llama::start(&tiny, 4096, &[]).await,
        llama::start(&tiny, 4096, &[]).await,
    );
    let target = |url: &str| {
        let toml = format!(
            "[[targets]]\nname = \"t\"\nbackend = \"openai-chat\"\nurl = \"{url}\"\nmodel = \"tiny\"\ncanary = {{ max_tokens = 16 }}\n"
        );
        Arc::clone(&common::parse_config(&toml).unwrap().targets[0])
    };
    let (pa, pb) = (
        Arc::new(Prober::new(target(&a.url), Counter::default()).unwrap()),
        Prober::new(target(&b.url), Counter::default()).unwrap(),
    );
    let prompts: Vec<String> = (0..16)
        .map(|i| format!("Tell me a story about the number {i}."))
        .collect();
    let (mut identical, mut batched_same) = (0, 0);
    let (mut alone_diff, mut batched_diff): (f64, f64) = (0.0, 0.0);
    let mut margins = Vec::new();
    for text in &prompts {
        let reference = answer(&pa, text).await;
        margins.extend(reference.iter().filter_map(Position::margin));
        let (same, diff) = largest_difference(&reference, &answer(&pb, text).await);
        identical += usize::from(same);
        alone_diff = alone_diff.max(diff);
        assert!(matches!(
            compare(&reference, &answer(&pb, text).await, false, false, MARGIN),
            Verdict::Match { .. }
        ));
        // The same prompt among 15 others in flight on the same replica (4 slots).
        let mut batch = tokio::task::JoinSet::new();
        for i in 0..15 {
            let (p, filler) = (Arc::clone(&pa), format!("Filler request {i} about {text}"));
            batch.spawn(async move { answer(&p, &filler).await });
        }
        let batched = answer(&pa, text).await;
        while batch.join_next().await.is_some() {}
        let (same, diff) = largest_difference(&reference, &batched);
        batched_same += usize::from(same);
        batched_diff = batched_diff.max(diff);
        let verdict = compare(&reference, &batched, false, false, MARGIN);
        assert!(
            matches!(verdict, Verdict::Match { .. }),
            "batched: {verdict:?}"
        );
    }
    margins.sort_by(f64::total_cmp);
    eprintln!(
        "identical replicas, alone: {identical}/{} answers token-identical, largest |Δ logprob| {alone_diff:.2e}; \
         batched with 15 others: {batched_same}/{} identical, largest |Δ logprob| {batched_diff:.2e}; \
         top-1 lead over top-2 (nats) p10 {:.3} p50 {:.3} p90 {:.3} over {} positions",
        prompts.len(),
        prompts.len(),
        percentile(&margins, 0.1),
        percentile(&margins, 0.5),
        percentile(&margins, 0.9),
        margins.len()
    );
    assert_eq!(
        identical,
        prompts.len(),
        "identical replicas answered differently"
    );
}

/// A rollout on real servers (issue 25): one llama-server on the tiny model as version v1,
/// two on other weights of the same architecture as v2, labelled as versions. Each version
/// is judged by its own replicas, so no check diverges; the gate's comparison with the
/// baseline (v1) shows v2 unlike v1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn a_rollout_to_other_weights_pages_nowhere_and_the_gate_sees_it() {
    let (tiny, other) = (llama::tiny(), llama::path("TINY_OTHER", "tiny-other.gguf"));
    let v1 = llama::start(&tiny, 2048, &[]).await;
    let (a, b) = (
        llama::start(&other, 2048, &[]).await,
        llama::start(&other, 2048, &[]).await,
    );
    let dir = tempfile::tempdir().unwrap();
    let (v1_label, v2_label) = (&[("version", "v1")][..], &[("version", "v2")][..]);
    let members = [
        (&*v1.url, v1_label),
        (&*a.url, v2_label),
        (&*b.url, v2_label),
    ];
    let file = common::pool_file(dir.path(), &members);
    let toml = format!(
        r#"
        seed = 7
        [[discovery]]
        name = "pool"
        source = "file"
        path = "{}"
        refresh = "100ms"
        [discovery.template]
        backend = "openai-chat"
        model = "tiny"
        rate = 0.001
        canary = {{ interval = "100ms", max_tokens = 16, margin = {MARGIN}, group_by = ["version"], baseline = "v1" }}
        "#,
        file.display()
    );
    let daemon = start_daemon(&toml).await;
    let sum = |s: &common::Scrape, name: &str, pod: &str, result: &str| {
        s.sum(
            name,
            &[("target", "pool"), ("pod", pod), ("result", result)],
        )
    };
    let checks = "inferprobe_canary_checks_total";
    let gate = "inferprobe_canary_baseline_checks_total";
    let s = daemon
        .wait_for(Duration::from_secs(180), |s| {
            ["r1", "r2"]
                .iter()
                .all(|pod| sum(s, gate, pod, "match") + sum(s, gate, pod, "diverged") >= 30.0)
        })
        .await;
    daemon.stop().await;
    for pod in ["r0", "r1", "r2"] {
        eprintln!(
            "{pod}: checks match {}, diverged {}, unscored {}; against the baseline match {}, diverged {}",
            sum(&s, checks, pod, "match"),
            sum(&s, checks, pod, "diverged"),
            sum(&s, checks, pod, "unscored"),
            sum(&s, gate, pod, "match"),
            sum(&s, gate, pod, "diverged"),
        );
        assert_eq!(sum(&s, checks, pod, "diverged"), 0.0, "{pod}");
    }
    let (diverged, scored) = ["r1", "r2"].iter().fold((0.0, 0.0), |(d, n), pod| {
        let dv = sum(&s, gate, pod, "diverged");
        (d + dv, n + dv + sum(&s, gate, pod, "match"))
    });
    assert!(
        diverged >= 0.5 * scored,
        "v2 against v1: {diverged} of {scored} diverged"
    );
    assert_eq!(
        sum(&s, gate, "r0", "match") + sum(&s, gate, "r0", "diverged"),
        0.0
    );
}

/// Issue 31, item 11: the shipped rollout templates on llama-server, evaluated as Argo
/// Rollouts and Flagger evaluate them against a real Prometheus scraping the daemon
/// (tests/common/rollout.rs): a new version with the same weights (the tiny model on
/// another server) passes both, one with other weights fails both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn the_rollout_templates_pass_the_same_weights_and_stop_other_weights() {
    let (tiny, other) = (llama::tiny(), llama::path("TINY_OTHER", "tiny-other.gguf"));
    let stable = llama::start(&tiny, 2048, &[]).await;
    let alike = llama::start(&tiny, 2048, &[]).await;
    let wrong = llama::start(&other, 2048, &[]).await;
    let address = |url: &str| url.trim_start_matches("http://").to_owned();
    let dir = tempfile::tempdir().unwrap();
    let urls = (stable.url.as_str(), wrong.url.as_str());
    let prompts = common::rollout::prompts(dir.path(), urls, "tiny", None).await;
    let gate = common::rollout::Gate {
        model: "tiny".into(),
        prompts,
        canary: format!("margin = {MARGIN}, "),
        stable: [0; 3].map(|_| vec![address(&stable.url)]),
        alike: [0; 2].map(|_| address(&alike.url)),
        other: [0; 2].map(|_| address(&wrong.url)),
        hung: None,
        scale: 1,
    };
    if let Some(report) = common::rollout::prove(dir.path(), &gate).await {
        eprintln!("llama-server rollout gate:\n{report}");
    }
}
