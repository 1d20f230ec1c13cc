//! The correctness canary end to end, against simulators running the toy model: a pool of
//! four with one corrupt replica flags only it; benign near-tie flips on every replica for
//! hundreds of rounds never count as a divergence; a replica with other weights diverges
//! from a golden file on nearly every check; a golden file round-trips; known answers are
//! scored by their regex on a backend without logprobs.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::canary::pool_config;
use common::{Scrape, start_daemon, start_sim};
use inferprobe::canary::record::{RecordArgs, record, write};
use inferprobe::sim::SimConfig;
use inferprobe::sim::model::ModelFlags;

fn sim(model: ModelFlags) -> SimConfig {
    SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::from_micros(200),
        model: Box::new(model),
        ..SimConfig::default()
    }
}

fn checks(s: &Scrape, labels: &[(&str, &str)], result: &str) -> f64 {
    let mut labels = labels.to_vec();
    labels.push(("result", result));
    s.sum("inferprobe_canary_checks_total", &labels)
}

/// A file_sd file naming each simulator as a pod of one pool.
fn pool_file(dir: &Path, sims: &[&common::Sim]) -> std::path::PathBuf {
    let addresses: Vec<String> = sims.iter().map(|s| s.addr.to_string()).collect();
    let model: &[(&str, &str)] = &[("model", "m")];
    let members: Vec<_> = addresses.iter().map(|a| (a.as_str(), model)).collect();
    common::pool_file(dir, &members)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_pool_of_four_only_the_corrupt_replica_is_flagged() {
    let healthy = || start_sim(sim(ModelFlags::default()));
    let (a, b, c) = (healthy().await, healthy().await, healthy().await);
    let corrupt = start_sim(sim(ModelFlags {
        corrupt_rate: 0.3,
        ..ModelFlags::default()
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = pool_file(dir.path(), &[&a, &b, &c, &corrupt]);
    let daemon = start_daemon(&pool_config(&file, r#"interval = "20ms", max_tokens = 16"#)).await;
    let scored = |s: &Scrape, pod: &str| {
        let pod = [("target", "pool"), ("pod", pod)];
        checks(s, &pod, "match") + checks(s, &pod, "diverged")
    };
    let s = daemon
        .wait_for(Duration::from_secs(60), |s| {
            ["r0", "r1", "r2", "r3"]
                .iter()
                .all(|pod| scored(s, pod) >= 40.0)
        })
        .await;
    daemon.stop().await;
    for pod in ["r0", "r1", "r2"] {
        let labels = [("target", "pool"), ("pod", pod)];
        assert_eq!(
            checks(&s, &labels, "diverged"),
            0.0,
            "healthy {pod} flagged"
        );
        assert!(checks(&s, &labels, "match") >= 40.0);
    }
    let corrupt = [("target", "pool"), ("pod", "r3")];
    let (diverged, matched) = (
        checks(&s, &corrupt, "diverged"),
        checks(&s, &corrupt, "match"),
    );
    // 30% of sure tokens replaced: most 16-token answers have one before any near-tie.
    assert!(
        diverged >= 0.6 * (diverged + matched),
        "corrupt replica: {diverged} diverged, {matched} matched"
    );
    // A canary's latency is in no latency histogram; its requests count like any probe's.
    assert!(s.requests("pool") >= 160.0);
    assert!(
        s.successes("pool") < 10.0,
        "canary checks observed in the latency histograms"
    );
    assert!(s.sum("inferprobe_canary_divergence_position_count", &corrupt) == diverged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn benign_near_tie_flips_on_every_replica_never_diverge() {
    let noisy = || {
        start_sim(sim(ModelFlags {
            near_tie_flips: 0.5,
            ..ModelFlags::default()
        }))
    };
    let sims = [noisy().await, noisy().await, noisy().await, noisy().await];
    let dir = tempfile::tempdir().unwrap();
    let file = pool_file(dir.path(), &sims.iter().collect::<Vec<_>>());
    let daemon = start_daemon(&pool_config(&file, r#"interval = "10ms", max_tokens = 32"#)).await;
    let s = daemon
        .wait_for(Duration::from_secs(90), |s| {
            checks(s, &[("target", "pool")], "match") >= 1200.0
        })
        .await;
    daemon.stop().await;
    let pool = [("target", "pool")];
    assert_eq!(checks(&s, &pool, "diverged"), 0.0, "a benign flip counted");
    assert_eq!(checks(&s, &pool, "wrong_answer"), 0.0);
    // The noise is there: logprobs moved (by up to 1e-4) on agreeing tokens.
    let (drift_sum, drift_count) = (
        s.sum("inferprobe_canary_logprob_drift_sum", &pool),
        s.sum("inferprobe_canary_logprob_drift_count", &pool),
    );
    assert!(
        drift_count >= 1200.0 && drift_sum > 0.0,
        "{drift_sum} over {drift_count}"
    );
    let below = s.sum(
        "inferprobe_canary_logprob_drift_bucket",
        &[("target", "pool"), ("le", "0.001")],
    );
    assert_eq!(below, drift_count, "benign drift stays below 1e-3 nats");
}

async fn record_golden(
    url: &str,
    out: &Path,
    prompts: Option<&Path>,
) -> inferprobe::endpoint::canary::Golden {
    let args = RecordArgs {
        backend: Some("openai-chat".into()),
        url: Some(url.into()),
        model: Some("m".into()),
        prompts: prompts.map(Path::to_path_buf),
        max_tokens: Some(24),
        top_logprobs: Some(5),
        out: out.to_path_buf(),
        ..RecordArgs::default()
    };
    let golden = record(&args).await.unwrap();
    write(&golden, out).unwrap();
    golden
}

fn static_config(url: &str, canary: &str) -> String {
    format!(
        r#"
        [[targets]]
        name = "t"
        backend = "openai-chat"
        url = "{url}"
        model = "m"
        rate = 0.001
        canary = {{ {canary} }}
        "#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_golden_file_round_trips_and_other_weights_diverge_from_it() {
    let trusted = start_sim(sim(ModelFlags::default())).await;
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("prompts.jsonl");
    let lines: Vec<String> = (0..24)
        .map(|i| format!(r#"{{"prompt": "Tell me about topic {i}."}}"#))
        .collect();
    std::fs::write(&prompts, lines.join("\n")).unwrap();
    let golden_path = dir.path().join("golden.json");
    let golden = record_golden(&trusted.url(), &golden_path, Some(&prompts)).await;
    assert_eq!(golden.answers.len(), 24);
    assert!(
        golden
            .answers
            .iter()
            .all(|a| a.answer.positions.len() == 24)
    );
    let (reread, _) = inferprobe::endpoint::canary::load_golden(&golden_path).unwrap();
    assert_eq!(
        serde_json::to_value(&reread).unwrap(),
        serde_json::to_value(&golden).unwrap()
    );

    // The same model: every check matches, from the first on (no majority needed).
    let canary = format!(r#"interval = "10ms", golden = "{}""#, golden_path.display());
    let daemon = start_daemon(&static_config(&trusted.url(), &canary)).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| checks(s, &[], "match") >= 48.0)
        .await;
    daemon.stop().await;
    assert_eq!(
        checks(&s, &[], "diverged") + checks(&s, &[], "unscored"),
        0.0
    );

    // Other weights: the answers differ from the first token; wherever the golden answer
    // was sure of it (most prompts), that is a divergence.
    let other = start_sim(sim(ModelFlags {
        weights_seed: 7,
        ..ModelFlags::default()
    }))
    .await;
    let daemon = start_daemon(&static_config(&other.url(), &canary)).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            checks(s, &[], "match") + checks(s, &[], "diverged") >= 48.0
        })
        .await;
    daemon.stop().await;
    let (diverged, matched) = (checks(&s, &[], "diverged"), checks(&s, &[], "match"));
    assert!(
        diverged >= 0.75 * (diverged + matched),
        "other weights: {diverged} diverged, {matched} matched"
    );
    let first = s.sum(
        "inferprobe_canary_divergence_position_bucket",
        &[("le", "0.0")],
    );
    assert!(
        first >= 0.9 * diverged,
        "other weights diverge at the first token: {first} of {diverged}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_answers_are_scored_by_their_regex_where_there_are_no_logprobs() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("known.jsonl");
    std::fs::write(
        &prompts,
        "# known answers\n{\"prompt\": \"What is 17 + 25? Answer with the number.\", \"expect\": \"\\\\b42\\\\b\"}\n",
    )
    .unwrap();
    for (garble, expected) in [(false, "match"), (true, "wrong_answer")] {
        let server = start_sim(sim(ModelFlags {
            garble,
            ..ModelFlags::default()
        }))
        .await;
        let toml = format!(
            r#"
            [[targets]]
            name = "t"
            backend = "anthropic"
            url = "{}"
            model = "m"
            rate = 0.001
            canary = {{ interval = "10ms", prompts = "{}" }}
            "#,
            server.url(),
            prompts.display()
        );
        let daemon = start_daemon(&toml).await;
        let s = daemon
            .wait_for(Duration::from_secs(30), |s| {
                checks(s, &[], expected) >= 10.0
            })
            .await;
        let page = daemon.get("/", None).await.text().await.unwrap();
        daemon.stop().await;
        let other = if garble { "match" } else { "wrong_answer" };
        assert_eq!(checks(&s, &[], other), 0.0, "garble={garble}");
        if garble {
            assert!(
                page.contains("Correctness canary") && page.contains("wrong_answer"),
                "{page}"
            );
        }
    }
}

#[test]
fn a_canary_without_logprobs_needs_known_answers() {
    let toml = r#"
        [[targets]]
        name = "t"
        backend = "anthropic"
        url = "http://127.0.0.1:9"
        model = "m"
        canary = { interval = "60s" }
    "#;
    let err = common::parse_config(toml).unwrap_err().to_string();
    assert!(
        err.contains("targets[0].canary.prompts") && err.contains("no logprobs"),
        "{err}"
    );
    let embeddings = toml.replace("anthropic", "openai-embeddings");
    let err = common::parse_config(&embeddings).unwrap_err().to_string();
    assert!(err.contains("targets[0].canary"), "{err}");
    let both = toml
        .replace("anthropic", "openai-chat")
        .replace(r#"interval = "60s""#, r#"prompts = "a", golden = "b""#);
    let err = common::parse_config(&both).unwrap_err().to_string();
    assert!(err.contains("targets[0].canary.golden"), "{err}");
}
