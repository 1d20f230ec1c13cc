//! The adapter check (issue 58) against simulators serving LoRA adapters as vLLM does, in a
//! binary of its own (its pools of simulators at 20 ms rounds, and a healthy pool's day of
//! rounds, would share the machine with the suite's timing-sensitive tests): in
//! a pool of five, each fault is found on its replica and its adapter (an adapter served
//! as the base, one lost where the others list it, one that corrupts the base model),
//! with nothing on the healthy ones; an adapter served as the base everywhere reads as
//! changing nothing; adapters loaded and unloaded at run time are followed; a server
//! listing 500 adapters gets series for the cap only.

mod common;
#[path = "adapters/gate.rs"]
mod gate;
#[path = "adapters/warmup.rs"]
mod warmup;

use std::path::Path;
use std::time::Duration;

use common::adapters::{BAD, base, checks, lone_config, pool_config, pool_file, post, record, sim};
use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::adapters::AdapterFault;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_pool_of_five_each_fault_is_found_on_its_replica_and_adapter() {
    use AdapterFault::{BaseServed, CorruptsBase};
    let r0 = start_sim(sim(&["a", "b"], &[])).await;
    let r1 = start_sim(sim(&["a", "b"], &[("a", BaseServed)])).await;
    let r2 = start_sim(sim(&["a", "b"], &[])).await;
    let r3 = start_sim(sim(&["a", "b"], &[("a", CorruptsBase)])).await;
    // Placed without `b` (a controller places adapters on some replicas): not missing.
    let r4 = start_sim(sim(&["a"], &[])).await;
    let dir = tempfile::tempdir().unwrap();
    let file = pool_file(dir.path(), &[&r0, &r1, &r2, &r3, &r4]);
    let daemon = start_daemon(&pool_config(&file, r#"interval = "20ms""#)).await;
    // r2 loses `b` once it has served it (a pod's server restarted without it).
    daemon
        .wait_for(Duration::from_secs(60), |s| {
            checks(s, "r2", "b", "applied") >= 3.0
        })
        .await;
    let unload = serde_json::json!({"lora_name": "b"});
    assert_eq!(
        post(&r2.url(), "/v1/unload_lora_adapter", unload).await,
        200
    );
    let s = daemon
        .wait_for(Duration::from_secs(90), |s| {
            checks(s, "r2", "b", "missing") >= 5.0
                && ["r0", "r1", "r2", "r3", "r4"].iter().all(|pod| {
                    checks(s, pod, "a", "applied") + checks(s, pod, "a", "base_served") >= 12.0
                        && base(s, pod, "match") + base(s, pod, "diverged") >= 12.0
                })
        })
        .await;
    // The status page names the adapter, the result and the first differing token.
    let page = daemon.get("/", None).await.text().await.unwrap();
    daemon.stop().await;
    assert!(page.contains("<h3>Adapters</h3>"), "{page}");
    assert!(
        page.contains("base_served") && page.contains("expected"),
        "{page}"
    );
    // The healthy replica: every adapter applied, its base model intact.
    for adapter in ["a", "b"] {
        for bad in BAD {
            assert_eq!(checks(&s, "r0", adapter, bad), 0.0, "r0 {adapter} {bad}");
        }
        assert!(checks(&s, "r0", adapter, "applied") >= 5.0, "r0 {adapter}");
    }
    assert_eq!(base(&s, "r0", "diverged"), 0.0);
    // r1 answers for `a` with the base model: base_served, every time it is judged.
    assert!(checks(&s, "r1", "a", "base_served") >= 12.0);
    assert_eq!(checks(&s, "r1", "a", "applied"), 0.0);
    assert_eq!(checks(&s, "r1", "b", "base_served"), 0.0, "b is fine on r1");
    // r2 lost `b`, which the others list: missing there, and only there; r4 never had it.
    assert!(checks(&s, "r2", "b", "missing") >= 5.0);
    for pod in ["r0", "r1", "r3", "r4"] {
        assert_eq!(checks(&s, pod, "b", "missing"), 0.0, "{pod}");
    }
    assert_eq!(
        s.sum(
            "inferprobe_adapter_checks_total",
            &[("pod", "r4"), ("adapter", "b")]
        ),
        0.0
    );
    // r3's `a` corrupts its base model: most base answers diverge, its adapters are fine.
    let (diverged, matched) = (base(&s, "r3", "diverged"), base(&s, "r3", "match"));
    assert!(
        diverged >= 0.6 * (diverged + matched),
        "r3 base: {diverged} diverged, {matched} matched"
    );
    for pod in ["r0", "r1", "r2", "r4"] {
        assert_eq!(base(&s, pod, "diverged"), 0.0, "{pod}'s base");
    }
    assert_eq!(checks(&s, "r3", "a", "base_served"), 0.0);
    // The rounds reach none of the target's own series.
    assert_eq!(s.requests("pool"), 0.0);
    assert_eq!(s.sum("inferprobe_adapters_listed", &[("pod", "r2")]), 1.0);
    assert_eq!(s.sum("inferprobe_adapters_listed", &[("pod", "r0")]), 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_served_as_the_base_everywhere_reads_as_changing_nothing() {
    let silent = || start_sim(sim(&["a", "b"], &[("a", AdapterFault::BaseServed)]));
    let (r0, r1, r2) = (silent().await, silent().await, silent().await);
    let dir = tempfile::tempdir().unwrap();
    let file = pool_file(dir.path(), &[&r0, &r1, &r2]);
    let daemon = start_daemon(&pool_config(&file, r#"interval = "20ms""#)).await;
    let prompts = 8.0; // the built-in ones
    let uninformative = |s: &Scrape, adapter: &str| {
        s.sum(
            "inferprobe_adapter_uninformative_prompts",
            &[("pod", "r0"), ("adapter", adapter)],
        )
    };
    let informative = |s: &Scrape, adapter: &str| {
        s.sum(
            "inferprobe_adapter_informative_prompts",
            &[("pod", "r0"), ("adapter", adapter)],
        )
    };
    let s = daemon
        .wait_for(Duration::from_secs(60), |s| {
            uninformative(s, "a") >= prompts && informative(s, "b") >= 6.0
        })
        .await;
    daemon.stop().await;
    // Learned from the replicas alone, the adapter's reference is the base's answer on
    // every prompt: nothing to judge it by, and the gauge says so (no page: a warning).
    assert_eq!(informative(&s, "a"), 0.0);
    for pod in ["r0", "r1", "r2"] {
        assert_eq!(checks(&s, pod, "a", "base_served"), 0.0);
        assert_eq!(checks(&s, pod, "a", "applied"), 0.0);
    }
    assert!(checks(&s, "r0", "b", "applied") >= 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adapters_loaded_and_unloaded_at_run_time_are_followed() {
    let server = start_sim(sim(&[], &[])).await;
    let config = lone_config(&server.url(), r#"interval = "20ms""#);
    let daemon = start_daemon(&config).await;
    let applied = |s: &Scrape| {
        s.sum(
            "inferprobe_adapter_checks_total",
            &[("adapter", "x"), ("result", "applied")],
        )
    };
    let load = |path: &str| serde_json::json!({"lora_name": "x", "lora_path": path});
    assert_eq!(
        post(&server.url(), "/v1/load_lora_adapter", load("/v1/x")).await,
        200
    );
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| applied(s) >= 10.0)
        .await;
    for bad in BAD {
        assert_eq!(
            s.sum("inferprobe_adapter_checks_total", &[("result", bad)]),
            0.0,
            "{bad}"
        );
    }
    // Unloaded: its series go, and nothing counts it missing.
    let unload = serde_json::json!({"lora_name": "x"});
    assert_eq!(
        post(&server.url(), "/v1/unload_lora_adapter", unload).await,
        200
    );
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            s.sum("inferprobe_adapters_listed", &[]) == 0.0
                && s.matching("inferprobe_adapter_checks_total", &[("adapter", "x")])
                    .count()
                    == 0
        })
        .await;
    assert_eq!(s.sum("inferprobe_adapter_checks_total", &[]), 0.0);
    // A new version (another path, other weights) learns its own references: applied,
    // not diverged from the old one's.
    assert_eq!(
        post(&server.url(), "/v1/load_lora_adapter", load("/v2/x")).await,
        200
    );
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| applied(s) >= 10.0)
        .await;
    daemon.stop().await;
    for bad in BAD {
        assert_eq!(
            s.sum("inferprobe_adapter_checks_total", &[("result", bad)]),
            0.0,
            "{bad}"
        );
    }
    assert!(
        s.sum(
            "inferprobe_adapter_base_checks_total",
            &[("result", "match")]
        ) >= 10.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_adapters_get_series_for_the_cap_only() {
    let names: Vec<String> = (0..500).map(|i| format!("lora-{i:03}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let server = start_sim(sim(&refs, &[])).await;
    let config = format!(
        r#"
        [[targets]]
        name = "many"
        url = "{}"
        model = "m"
        backend = "openai-chat"
        rate = 1e-6
        adapters = {{ interval = "20ms", max_adapters = 20, per_round = 4 }}
        "#,
        server.url()
    );
    let daemon = start_daemon(&config).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            s.sum("inferprobe_adapter_checks_total", &[("result", "applied")]) >= 40.0
        })
        .await;
    daemon.stop().await;
    assert_eq!(s.sum("inferprobe_adapters_listed", &[]), 500.0);
    assert_eq!(s.sum("inferprobe_adapters_unchecked", &[]), 480.0);
    let adapters: std::collections::BTreeSet<String> = s
        .matching("inferprobe_adapter_checks_total", &[])
        .filter_map(|sample| sample.labels.get("adapter").cloned())
        .collect();
    assert_eq!(adapters.len(), 20, "{adapters:?}");
    assert!(adapters.contains("lora-000") && adapters.contains("lora-019"));
}

/// References recorded on a trusted endpoint (`canary record --adapters`) page on a whole
/// pool serving an adapter as the base: learned ones cannot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_references_find_an_adapter_served_as_the_base_everywhere() {
    let trusted = start_sim(sim(&["a", "b"], &[])).await;
    let dir = tempfile::tempdir().unwrap();
    let golden_path = dir.path().join("golden.json");
    let golden = record(&trusted.url(), &golden_path).await;
    let names: Vec<&str> = golden.adapters.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(golden.adapters[0].root, "/adapters/a");
    // The toy adapters part from the base on most prompts; those that do not are left out.
    assert!(
        golden.adapters.iter().all(|a| a.answers.len() >= 5),
        "{:?}",
        golden
            .adapters
            .iter()
            .map(|a| a.answers.len())
            .collect::<Vec<_>>()
    );
    // What `check` refuses with it: settings other than recorded, another backend, a
    // prompts file beside it.
    for (extra, says) in [
        (", max_tokens = 32", "recorded with max_tokens = 16"),
        (r#", prompts = "x.jsonl""#, "not both"),
    ] {
        let toml = pool_config(
            Path::new("pool.json"),
            &format!(r#"golden = "{}"{extra}"#, golden_path.display()),
        );
        let error = common::parse_config(&toml).unwrap_err().to_string();
        assert!(error.contains(says), "{error}");
    }
    let other_backend = pool_config(
        Path::new("pool.json"),
        &format!(r#"golden = "{}""#, golden_path.display()),
    )
    .replace(r#"backend = "openai-chat""#, r#"backend = "openai""#);
    let error = common::parse_config(&other_backend)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("recorded with backend openai-chat"),
        "{error}"
    );
    let silent = || start_sim(sim(&["a", "b"], &[("a", AdapterFault::BaseServed)]));
    let (r0, r1) = (silent().await, silent().await);
    let file = pool_file(dir.path(), &[&r0, &r1]);
    let adapters = format!(r#"interval = "20ms", golden = "{}""#, golden_path.display());
    let daemon = start_daemon(&pool_config(&file, &adapters)).await;
    let s = daemon
        .wait_for(Duration::from_secs(60), |s| {
            ["r0", "r1"].iter().all(|pod| {
                checks(s, pod, "a", "base_served") >= 10.0 && checks(s, pod, "b", "applied") >= 10.0
            })
        })
        .await;
    daemon.stop().await;
    for pod in ["r0", "r1"] {
        assert_eq!(checks(&s, pod, "a", "applied"), 0.0, "{pod}");
        for bad in BAD {
            assert_eq!(checks(&s, pod, "b", bad), 0.0, "{pod} b {bad}");
        }
        assert_eq!(base(&s, pod, "diverged"), 0.0);
        let recorded = [("pod", pod), ("adapter", "a")];
        assert_eq!(s.sum("inferprobe_adapter_recorded", &recorded), 1.0);
    }
}

/// An adapter version at a new path on one replica (mid-rollout of the adapter's weights)
/// learns its own references: no replica reads it as diverged, old or new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_adapter_version_on_one_replica_is_not_a_divergence() {
    let versioned = |path: &str| {
        let mut config = sim(&[], &[]);
        config.lora.adapters = vec![("a".into(), path.into())];
        start_sim(config)
    };
    let (r0, r1, r2) = (
        versioned("/ad/a-v1").await,
        versioned("/ad/a-v1").await,
        versioned("/ad/a-v1").await,
    );
    let r3 = versioned("/ad/a-v2").await;
    let dir = tempfile::tempdir().unwrap();
    let file = pool_file(dir.path(), &[&r0, &r1, &r2, &r3]);
    let daemon = start_daemon(&pool_config(&file, r#"interval = "20ms""#)).await;
    let s = daemon
        .wait_for(Duration::from_secs(60), |s| {
            ["r0", "r1", "r2", "r3"]
                .iter()
                .all(|pod| checks(s, pod, "a", "applied") >= 20.0)
        })
        .await;
    daemon.stop().await;
    for pod in ["r0", "r1", "r2", "r3"] {
        for bad in BAD {
            assert_eq!(checks(&s, pod, "a", bad), 0.0, "{pod} {bad}");
        }
    }
}

/// A healthy pool for a day's rounds (1,440 a replica, a minute apart at the defaults) with
/// benign near-tie flips on every replica (GPU batch noise): nothing the alerts count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_pool_with_benign_noise_counts_nothing_wrong_in_a_days_rounds() {
    let noisy = || {
        let mut config = sim(&["a", "b"], &[]);
        config.model.near_tie_flips = 0.5;
        start_sim(config)
    };
    let (r0, r1, r2) = (noisy().await, noisy().await, noisy().await);
    let dir = tempfile::tempdir().unwrap();
    let file = pool_file(dir.path(), &[&r0, &r1, &r2]);
    let daemon = start_daemon(&pool_config(&file, r#"interval = "10ms""#)).await;
    let rounds =
        |s: &Scrape, pod: &str| s.sum("inferprobe_adapter_base_checks_total", &[("pod", pod)]);
    let s = daemon
        .wait_for(Duration::from_secs(120), |s| {
            ["r0", "r1", "r2"]
                .iter()
                .all(|pod| rounds(s, pod) >= 1440.0)
        })
        .await;
    daemon.stop().await;
    for pod in ["r0", "r1", "r2"] {
        for adapter in ["a", "b"] {
            for bad in BAD {
                assert_eq!(checks(&s, pod, adapter, bad), 0.0, "{pod} {adapter} {bad}");
            }
            assert!(
                checks(&s, pod, adapter, "applied") >= 500.0,
                "{pod} {adapter}"
            );
        }
        assert_eq!(base(&s, pod, "diverged"), 0.0, "{pod}");
    }
}
