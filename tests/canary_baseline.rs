//! Where the rollout gate was blind (issue 31): one replica per node, a restart mid-rollout,
//! and a golden file for the baseline group. Each case runs the daemon on pods of the test
//! API server (or a file_sd pool) served by simulators with given weights, and reads
//! `inferprobe_canary_baseline_checks_total` as the rollout templates do.

mod common;

use std::time::Duration;

use common::canary::{
    checks, file_config, kube_config, kube_pods, names, record_golden, scored_by, sim, version_pool,
};
use common::kube_api::{KubeApi, objects};
use common::{Scrape, Sim, start_daemon, start_sim};

fn baseline(s: &Scrape, pod: &str, result: &str) -> f64 {
    s.sum(
        "inferprobe_canary_baseline_checks_total",
        &[("pod", pod), ("result", result)],
    )
}

fn compared(s: &Scrape, pod: &str) -> f64 {
    baseline(s, pod, "match") + baseline(s, pod, "diverged")
}

/// Wait until `pod` has `n` scored baseline checks.
async fn compared_by(daemon: &common::Daemon, pod: &str, n: f64) -> Scrape {
    daemon
        .wait_for(Duration::from_secs(60), |s| compared(s, pod) >= n)
        .await
}

/// Item 5: a GPU DaemonSet, one replica per node. The new revision's pod is alone on its
/// node, so its node has no replica of the baseline; before, it got no baseline check at
/// all (its group was the node's only one, so the baseline). Now the baseline is chosen
/// over the pool and its replicas on other nodes answer for it: other weights diverge,
/// the same weights match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_per_node_is_compared_with_the_baseline_on_other_nodes() {
    // SAFETY: only this file's tests read this variable, and they set it alike.
    unsafe { std::env::set_var("INFERPROBE_TEST_NODE_VOTES", "node-0") };
    for (new_seed, expect) in [(7, "diverged"), (0, "match")] {
        let api = KubeApi::start().await;
        // The stable revision's pods are created first, on nodes 1 and 2: fewer than
        // `votes` (3), so each is asked once per prompt, not at every check.
        let stable: Vec<_> = (1..3)
            .map(|i| {
                let labels = vec![("app", "llm"), ("model", "m"), ("pod-template-hash", "old")];
                (0, format!("node-{i}"), labels)
            })
            .collect();
        let _stable = kube_pods(&api, &stable).await;
        tokio::time::sleep(Duration::from_millis(1100)).await; // a later creationTimestamp
        let new = start_sim(sim(new_seed)).await;
        let labels = [("app", "llm"), ("model", "m"), ("pod-template-hash", "new")];
        api.apply(objects::pod(
            "inference",
            "llm-new",
            "node-0",
            Some("127.0.0.1"),
            true,
            &labels,
            &[("http", new.addr.port())],
        ));
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = api.write_kubeconfig(dir.path());
        let block = "node_local = true\n        model_label = \"model\"";
        let daemon = start_daemon(&kube_config(&kubeconfig, block, "")).await;
        let s = compared_by(&daemon, "llm-new", 16.0).await;
        daemon.stop().await;
        let (result, all) = (baseline(&s, "llm-new", expect), compared(&s, "llm-new"));
        assert!(
            result >= 0.75 * all,
            "{expect}: {result} of {all}\n{}",
            s.text
        );
        if expect == "match" {
            assert_eq!(baseline(&s, "llm-new", "diverged"), 0.0, "{}", s.text);
        }
        // Its own checks are judged within its own group: the gate never pages.
        assert_eq!(checks(&s, &[("pod", "llm-new")], "diverged"), 0.0);
        // Two voters, 8 prompts, a vote counting 10 minutes: 16 at most, however many
        // checks (the warm-up asks each prompt several times; before, each check re-asked).
        let votes = s.sum("inferprobe_canary_votes_total", &[("result", "answered")]);
        assert!((1.0..=16.0).contains(&votes), "{votes}\n{}", s.text);
    }
}

/// Issue 31 item 6, issue 41 item 4: after any restart (pod name order; the new
/// version's pod sorts first) each version is compared with the other by name, so the
/// template's pair (`group` = new, `baseline` = old) reads the same: the process's order,
/// and which pod is oldest, decide nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_version_is_compared_with_the_other_by_name_after_any_restart() {
    let api = KubeApi::start().await;
    // "llm-new" sorts before "llm-old-*": the process starts it first.
    let pod = |name: &str, hash: &str, node: &str, sim: &Sim| {
        api.apply(objects::pod(
            "inference",
            name,
            node,
            Some("127.0.0.1"),
            true,
            &[("app", "llm"), ("pod-template-hash", hash)],
            &[("http", sim.addr.port())],
        ));
    };
    let mut old = Vec::new();
    for i in 0..3 {
        old.push(start_sim(sim(0)).await);
        pod(
            &format!("llm-old-{i}"),
            "old",
            &format!("node-{i}"),
            &old[i],
        );
    }
    tokio::time::sleep(Duration::from_millis(1100)).await; // a later creationTimestamp
    let new = start_sim(sim(7)).await;
    pod("llm-new", "new", "node-3", &new);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    for _restart in 0..2 {
        let daemon = start_daemon(&kube_config(&kubeconfig, "", r#"model = "m""#)).await;
        let s = compared_by(&daemon, "llm-new", 8.0).await;
        let s2 = scored_by(&daemon, &names("llm-old-", 3), 8.0).await;
        daemon.stop().await;
        assert!(
            baseline(&s, "llm-new", "diverged") >= 0.75 * compared(&s, "llm-new"),
            "{}",
            s.text
        );
        let pair = |pod: &str, versus: &str| {
            s2.sum(
                "inferprobe_canary_baseline_checks_total",
                &[("pod", pod), ("baseline", versus)],
            )
        };
        assert!(pair("llm-new", "old") > 0.0, "{}", s2.text);
        for pod in names("llm-old-", 3) {
            assert!(pair(&pod, "new") > 0.0, "{pod}\n{}", s2.text);
            assert_eq!(pair(&pod, "old"), 0.0, "{pod} with itself\n{}", s2.text);
        }
    }
}

/// Item 7: the docs' own recipe — a golden file recorded for the baseline group — left
/// every other group's baseline checks unscored (the baseline's replicas, judged by the
/// file, learn no answers). The golden answers are the baseline's reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_golden_file_for_the_baseline_is_its_reference() {
    let v1 = [
        start_sim(sim(0)).await,
        start_sim(sim(0)).await,
        start_sim(sim(0)).await,
    ];
    let (alike, other) = (start_sim(sim(0)).await, start_sim(sim(7)).await);
    let dir = tempfile::tempdir().unwrap();
    let golden = dir.path().join("golden.json");
    record_golden(v1[0].url(), "v1", &golden).await;
    let mut members: Vec<(&Sim, &str)> = v1.iter().map(|s| (s, "v1")).collect();
    members.extend([(&alike, "v2"), (&other, "v3")]);
    let file = version_pool(dir.path(), &members);
    let settings = format!(
        r#"golden = "{}", group_by = ["version"], baseline = "v1""#,
        golden.display()
    );
    let toml = file_config(&file, "").replace("max_tokens = 16", &settings);
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(60), |s| {
            compared(s, "r3") >= 16.0 && compared(s, "r4") >= 16.0
        })
        .await;
    daemon.stop().await;
    assert_eq!(baseline(&s, "r3", "diverged"), 0.0, "{}", s.text);
    assert!(baseline(&s, "r4", "diverged") >= 0.75 * compared(&s, "r4"));
    assert_eq!(
        baseline(&s, "r3", "unscored") + baseline(&s, "r4", "unscored"),
        0.0,
        "the golden answers are there from the first check\n{}",
        s.text
    );
}

fn pool_up(s: &Scrape) -> Option<f64> {
    s.matching("inferprobe_discovery_up", &[("discovery", "llm/pool")])
        .next()
        .map(|x| x.value)
}

/// Item 10: the pool-wide watch's health is exported like a block's (a 403 there meant no
/// votes, silently), it is not started with `votes = 0`, and a block's vote counters go
/// with it on a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_watch_is_visible_and_goes_with_its_block() {
    // SAFETY: only this file's tests read this variable, and they set it alike.
    unsafe { std::env::set_var("INFERPROBE_TEST_NODE_VOTES", "node-0") };
    let api = KubeApi::start().await;
    let pods: Vec<_> = (0..4)
        .map(|i| (0, format!("node-{i}"), vec![("app", "llm"), ("model", "m")]))
        .collect();
    let _sims = kube_pods(&api, &pods).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    let block = "node_local = true\n        model_label = \"model\"";
    let path = dir.path().join("config.toml");
    std::fs::write(&path, kube_config(&kubeconfig, block, "")).unwrap();
    let daemon = common::start_reloadable(&path).await;
    let votes = |s: &Scrape| s.sum("inferprobe_canary_votes_total", &[("target", "llm")]);
    daemon
        .wait_for(Duration::from_secs(30), |s| {
            pool_up(s) == Some(1.0) && votes(s) > 0.0
        })
        .await;
    // The pool watch refused (RBAC): it says so, as discovery_up does for a block.
    api.forbid("pods", true);
    api.drop_watches();
    daemon
        .wait_for(Duration::from_secs(30), |s| pool_up(s) == Some(0.0))
        .await;
    api.forbid("pods", false);
    api.drop_watches();
    // With votes = 0 nothing is asked of the pool: no pool watch at all.
    let no_votes = kube_config(&kubeconfig, block, "")
        .replace("max_tokens = 16 }", "max_tokens = 16, votes = 0 }");
    std::fs::write(&path, &no_votes).unwrap();
    assert_eq!(daemon.reload().await.0, 200);
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| pool_up(s).is_none())
        .await;
    assert_eq!(pool_up(&s), None, "{}", s.text);
    // The block removed: its vote counters go too.
    let other = no_votes.replace(r#"name = "llm""#, r#"name = "llm2""#);
    std::fs::write(&path, other).unwrap();
    assert_eq!(daemon.reload().await.0, 200);
    let s = daemon.scrape().await;
    assert_eq!(
        s.matching("inferprobe_canary_votes_total", &[("target", "llm")])
            .count(),
        0,
        "{}",
        s.text
    );
    daemon.stop().await;
}

/// Item 10: a reload that moves a replica to another group without changing its labels
/// (here `group_by` changed) left the old group's series frozen beside the new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_the_group_leaves_no_old_group_series() {
    let sim = start_sim(sim(0)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let config = |group_by: &str| {
        format!(
            r#"
            [[targets]]
            name = "a"
            url = "{}"
            model = "m"
            rate = 0.001
            labels = {{ version = "v1", tier = "gold" }}
            canary = {{ interval = "20ms", max_tokens = 16, group_by = ["{group_by}"] }}
            "#,
            sim.url()
        )
    };
    std::fs::write(&path, config("version")).unwrap();
    let daemon = common::start_reloadable(&path).await;
    let group = |s: &Scrape, g: &str| {
        s.matching("inferprobe_canary_checks_total", &[("group", g)])
            .count()
    };
    daemon
        .wait_for(Duration::from_secs(30), |s| group(s, "v1") > 0)
        .await;
    std::fs::write(&path, config("tier")).unwrap();
    assert_eq!(daemon.reload().await.0, 200);
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| group(s, "gold") > 0)
        .await;
    daemon.stop().await;
    assert_eq!(group(&s, "v1"), 0, "{}", s.text);
}

/// Item 3: a Flagger DaemonSet canary on the test API server. Flagger runs `llm` (the new
/// version) beside `llm-primary` on every node and renames the primary's `app` label to
/// `llm-primary`; pod names (`llm-<5>`, `llm-primary-<5>`) cannot tell them apart for a
/// template. The documented block — both selected, grouped by `app` — compares the
/// canary's pods (group `llm`, Flagger's `{{ target }}`) with the primary's (`baseline`
/// `llm-primary`, the template's pair); the old `app=llm` selector never saw the primary,
/// so nothing was compared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flagger_daemonset_canary_is_compared_with_its_primary() {
    // SAFETY: only this file's tests read this variable, and they set it alike.
    unsafe { std::env::set_var("INFERPROBE_TEST_NODE_VOTES", "node-0") };
    let api = KubeApi::start().await;
    let mut sims = Vec::new();
    for (name, app, hash, seed) in [
        ("llm-primary-x7k2p", "llm-primary", "6d4f8b9c7", 0),
        ("llm-b5n8q", "llm", "7f9c5d6b8", 7),
    ] {
        let sim = start_sim(sim(seed)).await;
        let labels = [
            ("app", app),
            ("model", "m"),
            ("controller-revision-hash", hash),
        ];
        api.apply(objects::pod(
            "inference",
            name,
            "node-0",
            Some("127.0.0.1"),
            true,
            &labels,
            &[("http", sim.addr.port())],
        ));
        sims.push(sim);
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    let flagger =
        "node_local = true\n        model_label = \"model\"\n        pod_labels = [\"app\"]";
    let grouped = r#"canary = { interval = "20ms", max_tokens = 16, group_by = ["app"] }"#;
    let documented = kube_config(&kubeconfig, flagger, "")
        .replace(
            r#"selector = "app=llm""#,
            r#"selector = "app in (llm, llm-primary)""#,
        )
        .replace(
            r#"canary = { interval = "20ms", max_tokens = 16 }"#,
            grouped,
        );
    let daemon = start_daemon(&documented).await;
    let s = compared_by(&daemon, "llm-b5n8q", 16.0).await;
    daemon.stop().await;
    let canary = [
        ("pod", "llm-b5n8q"),
        ("group", "llm"),
        ("baseline", "llm-primary"),
        ("result", "diverged"),
    ];
    let diverged = s.sum("inferprobe_canary_baseline_checks_total", &canary);
    assert!(diverged >= 0.75 * compared(&s, "llm-b5n8q"), "{}", s.text);
    // The primary's comparisons are the other pair (`llm-primary` against `llm`), which
    // the template does not select.
    let primary = [("pod", "llm-primary-x7k2p"), ("baseline", "llm-primary")];
    assert_eq!(
        s.sum("inferprobe_canary_baseline_checks_total", &primary),
        0.0,
        "{}",
        s.text
    );

    // The selector Flagger's renaming defeats: the primary is never seen, nothing compared.
    let old = kube_config(&kubeconfig, flagger, "").replace(
        r#"canary = { interval = "20ms", max_tokens = 16 }"#,
        grouped,
    );
    let daemon = start_daemon(&old).await;
    let s = scored_by(&daemon, &["llm-b5n8q".to_owned()], 16.0).await;
    daemon.stop().await;
    assert_eq!(compared(&s, "llm-b5n8q"), 0.0, "{}", s.text);
}
