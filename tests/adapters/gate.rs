//! Issue 58, item 4: a new adapter version is a rollout. The adapter metric of the shipped
//! templates (config/rollouts/: Argo's `adapters`, Flagger's `inferprobe-adapters`) judges
//! the new version's replicas against the references recorded for it, run as the rollout
//! tests run every template (tests/common/rollout.rs: a live daemon, a real Prometheus, the
//! controllers' semantics, time scaled 15 to 1).

use std::time::{Duration, Instant};

use crate::common;
use common::canary::sim as canary_sim;
use common::gates::Canary;
use common::prometheus::Prometheus;
use common::rollout::{
    ALIKE, Analysis, STABLE, analyse, argo_pod, assert_passed, assert_stopped_by, at_least,
    discovery_block, flagger_pod, prompts, roll, stable_pool, until,
};
use common::{Sim, start_daemon, start_sim};
use inferprobe::sim::adapters::AdapterFault;

/// The new version whose adapter `a` (new weights) is served as the base model.
const BASE_SERVED: &str = "9a8b7c6d5";

/// A replica of the base weights serving adapter `a` from `a_path` and `b`, `a` with
/// `fault`.
async fn replica(a_path: &str, fault: Option<AdapterFault>) -> Sim {
    serving(&[("a", a_path), ("b", "/ad/b")], fault).await
}

/// A replica of the base weights serving `adapters` (name, path), `a` with `fault`.
async fn serving(adapters: &[(&str, &str)], fault: Option<AdapterFault>) -> Sim {
    let mut config = common::adapters::sim(&[], &[]);
    config.model = canary_sim(0).model;
    config.lora.adapters = adapters
        .iter()
        .map(|(n, p)| ((*n).to_owned(), (*p).to_owned()))
        .collect();
    config.lora.lora_faults = fault.map(|f| ("a".to_owned(), f)).into_iter().collect();
    start_sim(config).await
}

/// Argo's and Flagger's analyses of an adapter rollout: `a`'s weights go from /ad/a-v1 to
/// /ad/a-v2, recorded on a trusted endpoint before the rollout. The healthy new version
/// passes every metric and is promoted; one whose `a` is served as the base model (vLLM
/// loaded it and applies nothing: vllm#55193) answers the canary's greedy prompts right,
/// and the adapter metric alone fails it and rolls it back, in the templates' time; with
/// no references recorded it never passes either, nor does a new version that dropped an
/// adapter or still serves the old weights.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gates_judge_a_new_adapter_version_against_its_recorded_references() {
    const SCALE: u64 = 15;
    let dir = tempfile::tempdir().unwrap();
    let trusted = replica("/ad/a-v2", None).await;
    let golden_path = dir.path().join("adapters.json");
    common::adapters::record(&trusted.url(), &golden_path).await;
    let other = start_sim(canary_sim(7)).await;
    let prompts = prompts(dir.path(), (&trusted.url(), &other.url()), "m", None).await;

    // Each pool's two stable replicas (v1); Argo's pool gets the healthy and the faulty
    // new version, each of Flagger's two namespaces one of them as its canary.
    let mut stable: Vec<Sim> = Vec::new();
    for _ in 0..12 {
        stable.push(replica("/ad/a-v1", None).await);
    }
    let healthy = [
        replica("/ad/a-v2", None).await,
        replica("/ad/a-v2", None).await,
    ];
    let served = Some(AdapterFault::BaseServed);
    let faulty = [
        replica("/ad/a-v2", served).await,
        replica("/ad/a-v2", served).await,
        replica("/ad/a-v2", served).await,
    ];
    let address = |s: &Sim| s.addr.to_string();
    let block = |name: &str, file: &std::path::Path, group_by: &str, recorded: bool| {
        let golden = match recorded {
            true => format!(r#", golden = "{}""#, golden_path.display()),
            false => String::new(),
        };
        let template = format!(
            r#"canary = {{ interval = "{}s", max_tokens = 16, prompts = "{}", group_by = ["{group_by}"] }}
            adapters = {{ interval = "{}s"{golden} }}"#,
            60 / SCALE,
            prompts.display(),
            60 / SCALE,
        );
        discovery_block(name, file, "m", &template)
    };
    let argo_file = dir.path().join("argo.json");
    let argo_stable = stable_pool(&argo_file, stable[..2].iter().map(address), |i| {
        argo_pod(STABLE, i)
    });
    // In "learned", no references were recorded; "dropped"'s new version serves `a` alone
    // (it forgot `b`); "unrolled"'s still serves `a`'s old weights, at the old path.
    let namespaces = ["good", "lora", "learned", "dropped", "unrolled"];
    let flagger_files = namespaces.map(|ns| dir.path().join(format!("{ns}.json")));
    let primaries: Vec<_> = namespaces
        .iter()
        .zip(&flagger_files)
        .enumerate()
        .map(|(n, (ns, file))| {
            let addresses = stable[2 + 2 * n..4 + 2 * n].iter().map(address);
            stable_pool(file, addresses, |i| flagger_pod("llm-primary", ns, i))
        })
        .collect();
    let toml = format!(
        "seed = 5\n{}{}{}{}{}{}",
        block("llm", &argo_file, "version", true),
        block("llm-good", &flagger_files[0], "app", true),
        block("llm-lora", &flagger_files[1], "app", true),
        block("llm-learned", &flagger_files[2], "app", false),
        block("llm-dropped", &flagger_files[3], "app", true),
        block("llm-unrolled", &flagger_files[4], "app", true),
    );
    let daemon = start_daemon(&toml).await;
    let Some(prometheus) = Prometheus::start(daemon.addr).await else {
        daemon.stop().await;
        return;
    };
    // Every stable replica has answered the canary's prompts and its adapters, and
    // Prometheus has seen it (as it has long before a real rollout).
    let warmed = r#"count(sum by (target) (inferprobe_canary_checks_total{result="match"}) >= 16)
        and on() count(min by (target) (inferprobe_adapter_checks_total{adapter="b", result="applied"}) >= 3) >= 6"#;
    let waited = until(&prometheus, warmed, Duration::from_secs(60), at_least(6.0)).await;
    assert!(waited, "{}", daemon.scrape().await.text);

    let new = [
        (address(&healthy[0]), argo_pod(ALIKE, 0)),
        (address(&faulty[0]), argo_pod(BASE_SERVED, 0)),
    ];
    roll(&argo_file, &argo_stable, new);
    let dropped = serving(&[("a", "/ad/a-v2")], None).await;
    let unrolled = replica("/ad/a-v1", None).await;
    let canaries = [&healthy[1], &faulty[1], &faulty[2], &dropped, &unrolled];
    for (n, (file, members)) in flagger_files.iter().zip(&primaries).enumerate() {
        let pod = flagger_pod("llm", namespaces[n], 0);
        roll(file, members, [(address(canaries[n]), pod)]);
    }
    let started = Instant::now();
    let mut good = Analysis::new(ALIKE, "good", SCALE);
    let mut bad = Analysis::new(BASE_SERVED, "lora", SCALE);
    // Argo's side of this one is `bad`'s again: only its Flagger canary is read.
    let mut learned = Analysis::new(BASE_SERVED, "learned", SCALE);
    let mut dropped = Analysis::new(BASE_SERVED, "dropped", SCALE);
    let mut unrolled = Analysis::new(BASE_SERVED, "unrolled", SCALE);
    analyse(
        &prometheus,
        SCALE,
        &mut [
            &mut good,
            &mut bad,
            &mut learned,
            &mut dropped,
            &mut unrolled,
        ],
        |a| a.iter().all(|a| a.done()),
    )
    .await;
    // What the adapter template reads at the end for the canaries that must not pass:
    // waiting (-1) or failed (2).
    let mut last = Vec::new();
    for analysis in [&learned, &dropped, &unrolled] {
        let query = analysis
            .flagger
            .iter()
            .find(|(name, _)| name == "inferprobe-adapters")
            .map(|(_, q)| q.clone())
            .expect("the adapter template");
        last.push(prometheus.query(&query).await.unwrap_or_default());
    }
    let report = format!(
        "analysis {:.1} s wall\n{}{}",
        started.elapsed().as_secs_f64(),
        good.report("healthy"),
        bad.report("a served as the base"),
    ) + &format!(
        "learned references, a served as the base: Flagger {:?} at {:?} s\n\
         b dropped: Flagger {:?} at {:?} s\n\
         a's old weights, v2 recorded: Flagger {:?} at {:?} s\n\
         the adapter template's last answers (learned, dropped, unrolled): {last:?}\n",
        learned.canary,
        learned.flagger_at,
        dropped.canary,
        dropped.flagger_at,
        unrolled.canary,
        unrolled.flagger_at,
    );
    eprintln!("{report}");
    let s = daemon.scrape().await;
    let count = |group: &str, adapter: &str, result: &str| {
        let labels = [("group", group), ("adapter", adapter), ("result", result)];
        s.sum("inferprobe_adapter_checks_total", &labels)
    };
    let recorded = |group: &str| {
        let labels = [("group", group), ("adapter", "a")];
        s.sum("inferprobe_adapter_recorded", &labels)
    };
    let other_version = |target: &str, group: &str| {
        let labels = [("target", target), ("group", group), ("adapter", "a")];
        s.sum("inferprobe_adapter_recorded_other_version", &labels)
    };
    daemon.stop().await;
    let adapters = good
        .argo
        .iter()
        .position(|m| m.name == "adapters")
        .expect("the adapters metric");

    // The new version is judged against its recorded references; the stable one, at
    // another path, learns its own (nothing wrong read on it either).
    assert_eq!(recorded(ALIKE), 1.0, "{report}");
    assert_eq!(recorded(STABLE), 0.0, "{report}");
    // The stable version is not the one recorded (on both its replicas), nor is the
    // unrolled canary's.
    assert_eq!(other_version("llm", STABLE), 2.0, "{report}");
    assert_eq!(other_version("llm", ALIKE), 0.0, "{report}");
    assert_eq!(other_version("llm-unrolled", "llm"), 1.0, "{report}");
    for bad_result in common::adapters::BAD {
        assert_eq!(
            count(STABLE, "a", bad_result),
            0.0,
            "{bad_result}\n{report}"
        );
        assert_eq!(count(ALIKE, "a", bad_result), 0.0, "{bad_result}\n{report}");
    }
    assert!(count(BASE_SERVED, "a", "base_served") >= 3.0, "{report}");
    // The healthy version: never Failed nor Error, Successful and promoted in time, its
    // adapter metric conclusive within the run.
    assert_passed(&good, adapters, SCALE, &report);
    // The faulty one: the adapter metric never passed it; no other metric failed it (its
    // base model is the stable one's); Failed and rolled back in time.
    assert_stopped_by(&bad, adapters, "whose base model is right", SCALE, &report);
    // Without recorded references the new version's replicas are compared with each other
    // only: `a` never reads applied there, so the metric waits and Flagger's failed checks
    // roll it back; it never passes.
    assert_eq!(learned.canary, Canary::RolledBack, "{report}");
    assert_eq!(last[0], [-1.0], "{report}");
    // A new version that lost an adapter the stable one serves waits (its series lack it);
    // one serving another version than recorded fails.
    assert_eq!(dropped.canary, Canary::RolledBack, "{report}");
    assert_eq!(last[1], [-1.0], "{report}");
    assert_eq!(unrolled.canary, Canary::RolledBack, "{report}");
    assert_eq!(last[2], [2.0], "{report}");
}
