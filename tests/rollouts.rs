//! The rollout gates shipped in config/rollouts/ (issue 31), tried as a user meets them: a
//! live daemon probes pools mid-rollout (simulator replicas, file_sd blocks), a real
//! Prometheus scrapes it, and each template's query — arguments substituted as Argo
//! Rollouts and Flagger substitute them — is run against that Prometheus at the times the
//! controller would, from the first moment of the analysis, and judged with the
//! controller's own semantics for empty, NaN and multi-sample answers (tests/common/gates.rs,
//! tests/common/rollout.rs; tests/real_server_canary.rs runs the same on llama-server).

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::canary::sim;
use common::gates::{self, ArgoLimits, Phase};
use common::prometheus::Prometheus;
use common::rollout::{
    ALIKE, Analysis, Gate, STABLE, analyse, argo_pod, assert_passed, assert_stopped_by, at_least,
    discovery_block, flagger_pod, prompts, prove, roll, stable_pool, until,
};
use common::templates::{argo, flagger};
use common::{Sim, start_daemon, start_sim};
use inferprobe::sim::sampler::SamplerFault;

#[test]
fn the_templates_have_what_their_controllers_read() {
    let metrics = argo(&[
        ("target", "llm"),
        ("canary-hash", "7b6c4d9f8"),
        ("stable-hash", "5d8f7c9b4"),
    ]);
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "baseline-divergence",
            "known-answers",
            "sampler",
            "adapters"
        ]
    );
    for m in &metrics {
        // Waiting for data is Inconclusive, never Error: each query ends in a fallback.
        assert!(
            m.query.trim_end().ends_with("or on() vector(-1)"),
            "{}",
            m.query
        );
        assert!(m.success.is_some() && m.failure.is_some(), "{m:?}");
        // A run that completes (count set), and may wait for data on all but its last.
        let count = m
            .limits
            .count
            .expect("a count: indefinite never completes an inline step");
        assert_eq!(count, m.limits.inconclusive_limit + 1, "{m:?}");
        assert!(m.query.contains(r#"group="7b6c4d9f8""#), "{}", m.query);
    }
    let templates = flagger("inference", "llm", "10m");
    let names: Vec<&str> = templates.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "inferprobe-baseline-divergence",
            "inferprobe-wrong-answers",
            "inferprobe-sampler",
            "inferprobe-adapters"
        ]
    );
    for (_, query) in &templates {
        // The canary by its group, which a DaemonSet's pod names cannot tell.
        assert!(
            query.contains(r#"group="llm""#) && !query.contains("pod=~"),
            "{query}"
        );
    }
    // Each template names the pair it compares: the daemon never guesses the baseline.
    assert!(metrics[0].query.contains(r#"baseline="5d8f7c9b4""#));
    assert!(templates[0].1.contains(r#"baseline="llm-primary""#));
    // Known answers are counted among known-answer checks, not every scored check.
    assert!(
        metrics[1]
            .query
            .contains("inferprobe_canary_known_answer_checks_total")
    );
    assert!(!metrics[1].query.contains("inferprobe_canary_checks_total"));
}

#[test]
/// The controllers' semantics as written down in tests/common/gates.rs.
fn conditions_as_argo_evaluates_them() {
    let c = "result[0] >= 0 && result[0] <= 0.1";
    assert_eq!(gates::condition(c, &[0.05]), Ok(true));
    assert_eq!(gates::condition(c, &[-1.0]), Ok(false));
    assert_eq!(gates::condition(c, &[f64::NAN]), Ok(false));
    assert!(
        gates::condition(c, &[]).is_err(),
        "an empty result is an error"
    );
    assert_eq!(
        gates::condition("len(result) > 0 && result[0] > 1", &[]),
        Ok(false)
    );
    assert_eq!(
        gates::condition("result[0] < 0 || result[0] > 1", &[2.0]),
        Ok(true)
    );
    assert_eq!(gates::condition("false", &[]), Ok(false));
}

#[test]
fn phases_as_argo_assesses_them() {
    let only_success =
        |r: Result<Vec<f64>, String>| gates::argo_measurement(&r, Some("result[0] <= 0.1"), None);
    assert_eq!(only_success(Ok(vec![])), Phase::Error);
    assert_eq!(only_success(Ok(vec![f64::NAN])), Phase::Failed);
    let both = |v: f64| {
        gates::argo_measurement(&Ok(vec![v]), Some("result[0] == 0"), Some("result[0] > 0"))
    };
    assert_eq!(both(-1.0), Phase::Inconclusive);
    let limits = ArgoLimits {
        count: Some(3),
        failure_limit: 0,
        inconclusive_limit: 1,
        consecutive_error_limit: 4,
    };
    use Phase::*;
    assert_eq!(
        gates::argo_metric(&[Inconclusive, Successful, Successful], limits),
        Successful
    );
    assert_eq!(
        gates::argo_metric(&[Inconclusive, Inconclusive], limits),
        Inconclusive
    );
    assert_eq!(gates::argo_metric(&[Successful, Failed], limits), Failed);
    assert_eq!(gates::argo_metric(&[Error; 5], limits), Error);
    assert_eq!(gates::argo_metric(&[Successful], limits), Running);
    // Issue 41 item 2: `count` unset runs indefinitely (Argo's EffectiveCount), and a
    // terminated run's metric that has not failed is Successful, measured or not: a
    // background analysis whose verdict comes after the steps end passes.
    let indefinite = ArgoLimits {
        count: None,
        inconclusive_limit: 3,
        ..limits
    };
    assert_eq!(gates::argo_metric(&[Successful; 50], indefinite), Running);
    assert_eq!(
        gates::argo_metric_in(&[Inconclusive, Inconclusive], indefinite, true),
        Successful,
        "terminated before any verdict: Successful"
    );
    assert_eq!(gates::argo_metric_in(&[], indefinite, true), Successful);
    assert_eq!(
        gates::argo_metric_in(&[Inconclusive, Failed], indefinite, true),
        Failed
    );
}

/// Flagger's first tick starts the analysis (no metric check) and counts as an iteration;
/// a blue/green canary is promoted on the `iterations + 1`-th passing check after it; a
/// failed check counts towards `threshold`, checked at the next tick (tests/common/gates.rs).
#[test]
fn ticks_as_flagger_runs_them() {
    use gates::Canary;
    let start = Canary::Progressing {
        iterations: 0,
        failed_checks: 0,
    };
    let mut checked = 0;
    let mut state = gates::flagger_tick(start, 3, 2, || {
        checked += 1;
        true
    });
    assert_eq!(checked, 0, "the first tick runs no metric check");
    assert_eq!(
        state,
        Canary::Progressing {
            iterations: 1,
            failed_checks: 0
        }
    );
    let mut passes = 0;
    while matches!(state, Canary::Progressing { .. }) {
        state = gates::flagger_tick(state, 3, 2, || true);
        passes += 1;
    }
    assert_eq!((state, passes), (Canary::Promoted, 4));
    let mut state = gates::flagger_tick(start, 3, 2, || true);
    for _ in 0..2 {
        state = gates::flagger_tick(state, 3, 2, || false);
    }
    assert_eq!(
        gates::flagger_tick(state, 3, 2, || true),
        Canary::RolledBack
    );
}

/// A same-weights upgrade passes both controllers from the first second (Inconclusive while
/// few checks are in, never Failed or Error); other weights fail both (tests/common/rollout.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gates_pass_a_healthy_version_and_stop_other_weights_on_a_real_prometheus() {
    let dir = tempfile::tempdir().unwrap();
    let mut sims: Vec<Sim> = Vec::new();
    for seed in [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 7] {
        sims.push(start_sim(sim(seed)).await);
    }
    // A version that never sends a first token.
    let hung = start_sim(inferprobe::sim::SimConfig {
        faults: vec![(inferprobe::sim::Fault::TtftStall, 1.0)],
        ..sim(0)
    })
    .await;
    let address = |i: usize| sims[i].addr.to_string();
    let prompts = prompts(dir.path(), (&sims[0].url(), &sims[10].url()), "m", None).await;
    let gate = Gate {
        model: "m".into(),
        prompts,
        canary: String::new(),
        stable: [0, 3, 6].map(|first| (first..first + 3).map(address).collect()),
        alike: [address(9), address(11)],
        other: [address(10), address(12)],
        hung: Some(hung.addr.to_string()),
        scale: 15,
    };
    if let Some(report) = prove(dir.path(), &gate).await {
        eprintln!("{report}");
    }
}

/// The same proof on servers started elsewhere (scripts/real-vllm/rollout-proof.sh: vLLM):
/// `INFERPROBE_GATE_STABLE`, `_ALIKE` (the stable weights again) and `_OTHER` (other
/// weights) as host:port, `_MODEL`, `_MARGIN`, and `_PROMPTS` (a prompts file; optional).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs servers: scripts/real-vllm/rollout-proof.sh"]
async fn the_gates_on_servers_named_by_the_environment() {
    let var = |name: &str| {
        std::env::var(format!("INFERPROBE_GATE_{name}"))
            .unwrap_or_else(|_| panic!("INFERPROBE_GATE_{name} is not set"))
    };
    let (stable, alike, other, model) = (var("STABLE"), var("ALIKE"), var("OTHER"), var("MODEL"));
    let dir = tempfile::tempdir().unwrap();
    let url = |a: &str| format!("http://{a}");
    let candidates = std::env::var_os("INFERPROBE_GATE_PROMPTS").map(Into::into);
    let prompts = prompts(
        dir.path(),
        (&url(&stable), &url(&other)),
        &model,
        candidates,
    )
    .await;
    let gate = Gate {
        model,
        prompts,
        canary: format!("margin = {}, ", var("MARGIN")),
        stable: [0; 3].map(|_| vec![stable.clone()]),
        alike: [0; 2].map(|_| alike.clone()),
        other: [0; 2].map(|_| other.clone()),
        hung: None,
        scale: 1,
    };
    let report = prove(dir.path(), &gate).await.expect("Prometheus");
    eprintln!("{report}");
}

/// The new version whose sampler ignores top-k.
const TOP_K_IGNORED: &str = "2b1a0f9e8";

/// A file_sd block checked by the canary and the sampler check, every minute scaled.
fn sampled_block(name: &str, file: &Path, prompts: &Path, group_by: &str, scale: u64) -> String {
    let template = format!(
        r#"canary = {{ interval = "{}s", max_tokens = 16, prompts = "{}", group_by = ["{group_by}"] }}
        sampler = {{ interval = "{}s" }}"#,
        60 / scale,
        prompts.display(),
        60 / scale,
    );
    discovery_block(name, file, "m", &template)
}

/// Issue 57: a new version whose sampler ignores top-k (the simulator's `--sampler-fault
/// top-k-ignored`) answers the greedy canary right, so the canary's metrics alone pass it;
/// the sampler metric fails it in Argo and rolls it back in Flagger, within the templates'
/// time; a healthy version passes every metric and is promoted. Scaled 15 to 1 as
/// [`prove`]: the sampler and the canary check every 4 s after their warm-ups, Argo
/// measures every 2 s, Flagger ticks every second, two minutes are 8 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gates_stop_a_version_whose_sampler_ignores_top_k_on_a_real_prometheus() {
    const SCALE: u64 = 15;
    let dir = tempfile::tempdir().unwrap();
    let top_k_ignored = || {
        let mut config = sim(0);
        config.model.sampler_fault = SamplerFault::TopKIgnored;
        config
    };
    // Each pool's two stable replicas; the healthy and the faulty new version in Argo's
    // pool and as the canary of Flagger's two namespaces; other weights for the prompts.
    let mut sims: Vec<Sim> = Vec::new();
    for _ in 0..8 {
        sims.push(start_sim(sim(0)).await);
    }
    sims.push(start_sim(top_k_ignored()).await);
    sims.push(start_sim(top_k_ignored()).await);
    sims.push(start_sim(sim(7)).await);
    let address = |i: usize| sims[i].addr.to_string();
    let prompts = prompts(dir.path(), (&sims[0].url(), &sims[10].url()), "m", None).await;

    let argo_file = dir.path().join("argo.json");
    let argo_stable = stable_pool(&argo_file, (0..2).map(address), |i| argo_pod(STABLE, i));
    let namespaces = ["good", "topk"];
    let flagger_files = namespaces.map(|ns| dir.path().join(format!("{ns}.json")));
    let primaries: Vec<_> = namespaces
        .iter()
        .zip(&flagger_files)
        .enumerate()
        .map(|(n, (ns, file))| {
            let addresses = (0..2).map(|i| address(2 + 2 * n + i));
            stable_pool(file, addresses, |i| flagger_pod("llm-primary", ns, i))
        })
        .collect();
    let toml = format!(
        "seed = 5\n{}{}{}",
        sampled_block("llm", &argo_file, &prompts, "version", SCALE),
        sampled_block("llm-good", &flagger_files[0], &prompts, "app", SCALE),
        sampled_block("llm-topk", &flagger_files[1], &prompts, "app", SCALE),
    );
    let daemon = start_daemon(&toml).await;
    let Some(prometheus) = Prometheus::start(daemon.addr).await else {
        daemon.stop().await;
        return;
    };
    // Every stable replica has answered every prompt and run its sampler warm-up, and
    // Prometheus has seen it (as it has long before a real rollout).
    let warmed = r#"count(sum by (target) (inferprobe_canary_checks_total{result="match"}) >= 16)
        and on() count(min by (target) (inferprobe_sampler_checks_total{result="ok"}) >= 4) >= 3"#;
    let waited = until(&prometheus, warmed, Duration::from_secs(60), at_least(3.0)).await;
    assert!(waited, "{}", daemon.scrape().await.text);

    // The rollout: each pool gets its new version's pod, and the analysis starts now.
    let new = [
        (address(6), argo_pod(ALIKE, 0)),
        (address(8), argo_pod(TOP_K_IGNORED, 0)),
    ];
    roll(&argo_file, &argo_stable, new);
    for (n, (file, members)) in flagger_files.iter().zip(&primaries).enumerate() {
        roll(
            file,
            members,
            [(address(7 + 2 * n), flagger_pod("llm", namespaces[n], 0))],
        );
    }
    let started = Instant::now();
    let mut healthy = Analysis::new(ALIKE, "good", SCALE);
    let mut faulty = Analysis::new(TOP_K_IGNORED, "topk", SCALE);
    analyse(&prometheus, SCALE, &mut [&mut healthy, &mut faulty], |a| {
        a.iter().all(|a| a.done())
    })
    .await;
    let wall = started.elapsed();
    let sampler = healthy
        .argo
        .iter()
        .position(|m| m.name == "sampler")
        .expect("the sampler metric");
    let report = format!(
        "analysis {:.1} s wall\n{}{}",
        wall.as_secs_f64(),
        healthy.report("healthy"),
        faulty.report("top-k ignored")
    );
    eprintln!("{report}");
    let outside = daemon.scrape().await.sum(
        "inferprobe_sampler_tokens_total",
        &[("group", TOP_K_IGNORED), ("result", "outside_support")],
    );
    daemon.stop().await;

    // The healthy version: never Failed nor Error, Successful and promoted in time.
    assert_passed(&healthy, sampler, SCALE, &report);
    // The version ignoring top-k: its sampler metric never passed; the canary's never
    // failed it (a greedy check never reaches the sampler); Failed and rolled back in time.
    assert!(outside > 0.0, "no token outside the support\n{report}");
    assert_stopped_by(
        &faulty,
        sampler,
        "whose greedy answers are right",
        SCALE,
        &report,
    );
}
