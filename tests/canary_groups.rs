//! The canary during a model rollout (issue 25): each version of a pool is a group with
//! its own reference, so the healthy old replica is not judged by the new version's
//! answers, and halfway through neither group is left without a majority.

mod common;

use std::time::Duration;

use common::canary::{
    checks, file_config, kube_config, kube_pods, names, record_golden, scored, scored_by, sim,
    version_pool,
};
use common::{Scrape, Sim, start_daemon, start_sim};

/// A pool mid-rollout: one simulator on the v1 weights, three on other (v2) weights.
async fn mid_rollout() -> [Sim; 4] {
    [
        start_sim(sim(0)).await,
        start_sim(sim(7)).await,
        start_sim(sim(7)).await,
        start_sim(sim(7)).await,
    ]
}

/// One replica still on v1, three on v2 (other weights, alike). Without groups the healthy
/// v1 replica diverged from the v2 majority on every check: a page. With the version as
/// the group, every replica matches its own version's reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_mid_rollout_pages_on_no_replica() {
    let [v1, a, b, c] = mid_rollout().await;
    let dir = tempfile::tempdir().unwrap();
    let file = version_pool(
        dir.path(),
        &[(&v1, "v1"), (&a, "v2"), (&b, "v2"), (&c, "v2")],
    );
    let pods = names("r", 4);

    // Without a group the old replica is judged by the new version's majority.
    let daemon = start_daemon(&file_config(&file, r#", group_by = ["pod-less"]"#)).await;
    let s = scored_by(&daemon, &pods[..1], 20.0).await;
    daemon.stop().await;
    let old = [("target", "pool"), ("pod", "r0")];
    assert!(
        checks(&s, &old, "diverged") >= 0.75 * scored(&s, "r0"),
        "the control: one group, v1 should diverge from the v2 majority"
    );

    let daemon = start_daemon(&file_config(&file, r#", group_by = ["version"]"#)).await;
    let s = scored_by(&daemon, &pods, 20.0).await;
    daemon.stop().await;
    for pod in &pods {
        let labels = [("target", "pool"), ("pod", pod.as_str())];
        assert_eq!(checks(&s, &labels, "diverged"), 0.0, "{pod}");
    }
    // The group is on the replica's own canary series.
    assert!(checks(&s, &[("pod", "r0"), ("group", "v1")], "match") >= 20.0);
    assert!(checks(&s, &[("pod", "r3"), ("group", "v2")], "match") >= 20.0);
}

/// Three and three: one group had no majority and every check was unscored. Each version
/// now has its own three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn halfway_through_every_replica_is_scored() {
    let mut sims = Vec::new();
    for seed in [0, 0, 0, 7, 7, 7] {
        sims.push(start_sim(sim(seed)).await);
    }
    let versions = ["v1", "v1", "v1", "v2", "v2", "v2"];
    let members: Vec<(&Sim, &str)> = sims.iter().zip(versions).collect();
    let dir = tempfile::tempdir().unwrap();
    let file = version_pool(dir.path(), &members);
    let daemon = start_daemon(&file_config(&file, r#", group_by = ["version"]"#)).await;
    let s = daemon
        .wait_for(Duration::from_secs(60), |s| {
            (0..6).all(|i| checks(s, &[("pod", &format!("r{i}"))], "match") >= 15.0)
        })
        .await;
    daemon.stop().await;
    assert_eq!(checks(&s, &[("target", "pool")], "diverged"), 0.0);
    // Unscored only at the start: the first answer to each of the 8 built-in prompts in
    // each group has no other replica's answer yet (2 groups × 8).
    let unscored = checks(&s, &[("target", "pool")], "unscored");
    assert!(unscored <= 16.0, "{unscored} unscored");
}

/// The default group needs no configuration: a pod's controller revision
/// (`pod-template-hash` here, as a Deployment's ReplicaSet sets it) splits a Deployment
/// mid-rollout into its old and new versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployments_revisions_are_its_groups_without_configuration() {
    let api = common::kube_api::KubeApi::start().await;
    let pods: Vec<_> = ["5d8f7c9b4", "7b6c4d9f8", "7b6c4d9f8", "7b6c4d9f8"]
        .into_iter()
        .enumerate()
        .map(|(i, hash)| {
            let seed = if i == 0 { 0 } else { 7 };
            let labels = vec![("app", "llm"), ("pod-template-hash", hash)];
            (seed, format!("node-{i}"), labels)
        })
        .collect();
    let _sims = kube_pods(&api, &pods).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    let daemon = start_daemon(&kube_config(&kubeconfig, "", r#"model = "m""#)).await;
    let s = scored_by(&daemon, &names("llm-", 4), 20.0).await;
    daemon.stop().await;
    assert_eq!(
        checks(&s, &[("target", "llm")], "diverged"),
        0.0,
        "{}",
        s.text
    );
    assert!(checks(&s, &[("pod", "llm-0"), ("group", "5d8f7c9b4")], "match") >= 20.0);
    assert!(checks(&s, &[("pod", "llm-1"), ("group", "7b6c4d9f8")], "match") >= 20.0);
    // The revision is on the canary's series only: no other series carries it.
    assert!(
        !s.text
            .lines()
            .any(|l| l.contains("7b6c4d9f8") && !l.starts_with("inferprobe_canary_")),
        "{}",
        s.text
    );
}

/// A golden file applies to the group it was recorded for; the new version learns its own
/// reference, where before every v2 replica diverged from the v1 golden file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_golden_file_applies_to_its_own_group() {
    let [v1, a, b, c] = mid_rollout().await;
    let dir = tempfile::tempdir().unwrap();
    let golden = dir.path().join("golden.json");
    record_golden(v1.url(), "v1", &golden).await;
    let file = version_pool(
        dir.path(),
        &[(&v1, "v1"), (&a, "v2"), (&b, "v2"), (&c, "v2")],
    );
    let toml = file_config(&file, "").replace(
        "max_tokens = 16",
        &format!(r#"golden = "{}", group_by = ["version"]"#, golden.display()),
    );
    let daemon = start_daemon(&toml).await;
    let s = scored_by(&daemon, &names("r", 4), 16.0).await;
    daemon.stop().await;
    assert_eq!(checks(&s, &[("target", "pool")], "diverged"), 0.0);
    // The v1 replica is scored against the golden file from its first check.
    assert_eq!(checks(&s, &[("pod", "r0")], "unscored"), 0.0);
}

/// `pod`'s comparisons with group `versus`'s reference that ended in `result`.
fn baseline(s: &Scrape, pod: &str, versus: &str, result: &str) -> f64 {
    s.sum(
        "inferprobe_canary_baseline_checks_total",
        &[("pod", pod), ("baseline", versus), ("result", result)],
    )
}

/// The rollout gate (issue 31 item 4, issue 41 item 4): each replica is also compared with
/// every other group's reference, apart from its own checks, and the pair is in the
/// series (`group`, `baseline`) for a rollout's template to select. An upgrade that answers
/// alike matches v1; other weights diverge; no replica is compared with its own group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_is_compared_with_the_baseline() {
    let old = [
        start_sim(sim(0)).await,
        start_sim(sim(0)).await,
        start_sim(sim(0)).await,
    ];
    let alike = start_sim(sim(0)).await;
    let other = start_sim(sim(7)).await;
    let dir = tempfile::tempdir().unwrap();
    let v1: Vec<(&Sim, &str)> = old.iter().map(|s| (s, "v1")).collect();
    let file = version_pool(dir.path(), &v1);
    let daemon = start_daemon(&file_config(&file, r#", group_by = ["version"]"#)).await;
    daemon
        .wait_for(Duration::from_secs(60), |s| {
            checks(s, &[("target", "pool")], "match") >= 30.0
        })
        .await;
    let mut rolled = v1.clone();
    rolled.extend([(&alike, "v2"), (&other, "v3")]);
    version_pool(dir.path(), &rolled);
    let s = daemon
        .wait_for(Duration::from_secs(60), |s| {
            ["r3", "r4"].iter().all(|pod| {
                baseline(s, pod, "v1", "match") + baseline(s, pod, "v1", "diverged") >= 20.0
            })
        })
        .await;
    daemon.stop().await;
    assert_eq!(
        baseline(&s, "r3", "v1", "diverged"),
        0.0,
        "an upgrade that answers alike"
    );
    let (diverged, matched) = (
        baseline(&s, "r4", "v1", "diverged"),
        baseline(&s, "r4", "v1", "match"),
    );
    assert!(
        diverged >= 0.75 * (diverged + matched),
        "other weights: {diverged} of {}",
        diverged + matched
    );
    // The gate never pages: the new version's own checks are judged within its group.
    assert_eq!(checks(&s, &[("target", "pool")], "diverged"), 0.0);
    for line in s.text.lines() {
        if let Some(rest) = line.strip_prefix("inferprobe_canary_baseline_checks_total{") {
            let group = rest
                .split(r#"group=""#)
                .nth(1)
                .and_then(|r| r.split('"').next());
            let versus = rest
                .split(r#"baseline=""#)
                .nth(1)
                .and_then(|r| r.split('"').next());
            assert!(
                group.is_some() && group != versus,
                "compared with itself: {line}"
            );
        }
    }
    // The stable replicas are compared with the new versions too (a rollback's analysis
    // selects that pair): v1 matches v2 and diverges from v3.
    assert_eq!(baseline(&s, "r0", "v2", "diverged"), 0.0, "{}", s.text);
    assert!(baseline(&s, "r0", "v3", "diverged") > 0.0, "{}", s.text);
}

/// Item 3: a node-local block sees one replica here. Alone it was its own reference: with
/// other weights loaded at start-up it matched itself 100 times. Now the pool's replicas on
/// other nodes vote, and the odd one out diverges; a healthy one among healthy voters
/// matches. Votes are counted, and are no check of the voters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_node_with_one_replica_the_pool_votes() {
    // SAFETY: only this file's tests read this variable, and they set it alike.
    unsafe { std::env::set_var("INFERPROBE_TEST_NODE_VOTES", "node-1") };
    for (here_seed, expect) in [(7, "diverged"), (0, "match")] {
        let api = common::kube_api::KubeApi::start().await;
        let pods: Vec<_> = [here_seed, 0, 0, 0]
            .into_iter()
            .enumerate()
            .map(|(i, seed)| {
                (
                    seed,
                    format!("node-{}", i + 1),
                    vec![("app", "llm"), ("model", "m")],
                )
            })
            .collect();
        let _sims = kube_pods(&api, &pods).await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = api.write_kubeconfig(dir.path());
        let block = "node_local = true\n        model_label = \"model\"";
        let daemon = start_daemon(&kube_config(&kubeconfig, block, "")).await;
        let s = scored_by(&daemon, &names("llm-", 1), 20.0).await;
        daemon.stop().await;
        let result = checks(&s, &[("pod", "llm-0")], expect);
        let all = scored(&s, "llm-0");
        assert!(
            result >= 0.75 * all,
            "{expect}: {result} of {all}\n{}",
            s.text
        );
        let votes = s.sum(
            "inferprobe_canary_votes_total",
            &[("target", "llm"), ("result", "answered")],
        );
        // 8 prompts, 3 voters each, asked once per 10 minutes.
        assert_eq!(votes, 24.0, "{}", s.text);
        assert!(
            !s.has_replica("llm", "llm-1"),
            "a voter is not probed from here"
        );
    }
}
