//! Issue 41, item 5: Flagger's promotion. After the analysis Flagger copies the canary's
//! spec to the primary Deployment and keeps its `app: <target>-primary` label
//! (`pkg/canary/deployment_controller.go` `Promote`, `makePrimaryLabels`): while the
//! primary rolls, its old and new pods share the group `llm-primary`. With a new model the
//! new pods answer otherwise by design. Before, the first new primary pod diverged from
//! the old majority on every check and `InferprobeWrongAnswers` was pending for it through
//! the step. A promotion is a rollout, not an outage.
//!
//! A live daemon over the test API server's pods, each owned by its ReplicaSet as a
//! Deployment's are (`ownerReferences`, `pod-template-hash`), with the documented Flagger
//! block (`group_by = ["app"]`).

mod common;

use std::time::Duration;

use common::canary::{checks, kube_config, scored};
use common::kube_api::{KubeApi, objects};
use common::{Scrape, Sim, start_daemon, start_sim};

const WAIT: Duration = Duration::from_secs(90);

/// A Ready pod of `app` on `node`, made by its controller as Kubernetes names it: a
/// Deployment's ReplicaSet `<deployment>-<hash>` (`pod-template-hash`), or the DaemonSet
/// itself (`controller-revision-hash`); created `at`.
struct Made<'a> {
    node: &'a str,
    kind: &'a str,
    owner: &'a str,
    hash: &'a str,
}

fn made_by<'a>(owner: &'a str, hash: &'a str) -> Made<'a> {
    Made {
        node: "node-0",
        kind: "ReplicaSet",
        owner,
        hash,
    }
}

fn pod(name: &str, app: &str, made: &Made, at: &str, sim: &Sim) -> serde_json::Value {
    let (hash_label, owner) = match made.kind {
        "ReplicaSet" => ("pod-template-hash", format!("{}-{}", made.owner, made.hash)),
        _ => ("controller-revision-hash", made.owner.to_owned()),
    };
    let mut pod = objects::pod(
        "inference",
        name,
        made.node,
        Some("127.0.0.1"),
        true,
        &[("app", app), (hash_label, made.hash)],
        &[("http", sim.addr.port())],
    );
    pod["metadata"]["creationTimestamp"] = at.into();
    pod["metadata"]["ownerReferences"] = serde_json::json!([{
        "apiVersion": "apps/v1",
        "kind": made.kind,
        "name": owner,
        "uid": format!("uid-{owner}"),
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    pod
}

fn pair(s: &Scrape, result: &str) -> f64 {
    s.sum(
        "inferprobe_canary_baseline_checks_total",
        &[
            ("group", "llm"),
            ("baseline", "llm-primary"),
            ("result", result),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_to_a_new_model_pages_nobody_and_keeps_the_gate_s_answer() {
    let api = KubeApi::start().await;
    // The primary at its old model (weights 0), the canary at the new one (weights 7).
    let mut old = Vec::new();
    let mut new = Vec::new();
    for _ in 0..3 {
        old.push(start_sim(common::canary::sim(0)).await);
        new.push(start_sim(common::canary::sim(7)).await);
    }
    let canary = start_sim(common::canary::sim(7)).await;
    const T0: &str = "2026-11-01T10:00:00Z";
    for (i, sim) in old.iter().enumerate() {
        api.apply(pod(
            &format!("primary-old-{i}"),
            "llm-primary",
            &made_by("llm-primary", "5d8f7c9b4"),
            T0,
            sim,
        ));
    }
    api.apply(pod(
        "canary-0",
        "llm",
        &made_by("llm", "7b6c4d9f8"),
        "2026-11-02T10:00:00Z",
        &canary,
    ));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    let config = kube_config(
        &kubeconfig,
        r#"pod_labels = ["app"]
        selector = "app in (llm, llm-primary)""#,
        r#"model = "m"
        canary = { interval = "20ms", max_tokens = 16, group_by = ["app"] }"#,
    );
    let config = config.replacen(r#"selector = "app=llm""#, "", 1).replacen(
        r#"canary = { interval = "20ms", max_tokens = 16 }"#,
        "",
        1,
    );
    let daemon = start_daemon(&config).await;
    // The analysis: a new model diverges from the primary (the gate is on known answers).
    let before = daemon.wait_for(WAIT, |s| pair(s, "diverged") >= 10.0).await;
    assert_eq!(pair(&before, "match"), 0.0, "{}", before.text);

    // The promotion: the primary's new ReplicaSet surges one pod at a time, and an old
    // pod goes as each new one is Ready (maxSurge 1, maxUnavailable 0). After the first,
    // a node drain recreates an old pod: younger than the new one, still the old revision.
    let unscored = pair(&before, "unscored");
    let mut seen = before;
    for (i, sim) in new.iter().enumerate() {
        let name = format!("primary-new-{i}");
        let at = "2026-11-03T10:00:00Z";
        api.apply(pod(
            &name,
            "llm-primary",
            &made_by("llm-primary", "6c5b4a3f2"),
            at,
            sim,
        ));
        seen = daemon.wait_for(WAIT, |s| scored(s, &name) >= 10.0).await;
        if i == 0 {
            api.delete("v1", "Pod", "inference", "primary-old-2");
            let drained = "2026-11-04T10:00:00Z";
            let (name, hash) = ("primary-old-2b", "5d8f7c9b4");
            api.apply(pod(
                name,
                "llm-primary",
                &made_by("llm-primary", hash),
                drained,
                &old[2],
            ));
            seen = daemon.wait_for(WAIT, |s| scored(s, name) >= 10.0).await;
        }
        // While any old pod is left the primary is no baseline: the pair is unscored,
        // never a match (which would flip the gate's divergence) nor a new divergence.
        assert_eq!(pair(&seen, "match"), 0.0, "{}", seen.text);
        let old_pod = if i == 2 {
            "primary-old-2b"
        } else {
            &format!("primary-old-{i}")
        };
        api.delete("v1", "Pod", "inference", old_pod);
    }
    assert!(pair(&seen, "unscored") > unscored, "{}", seen.text);
    let s = daemon
        .wait_for(WAIT, |s| {
            !s.has_replica("llm", "primary-old-2b") && scored(s, "primary-new-0") >= 30.0
        })
        .await;
    daemon.stop().await;
    let primary = [("group", "llm-primary")];
    assert_eq!(checks(&s, &primary, "diverged"), 0.0, "{}", s.text);
    assert_eq!(checks(&seen, &primary, "diverged"), 0.0, "{}", seen.text);
    for i in 0..3 {
        assert!(
            scored(&s, &format!("primary-new-{i}")) >= 10.0,
            "{}",
            s.text
        );
    }
    // The old primary's pods were judged against each other all along, and matched.
    assert!(checks(&seen, &primary, "match") >= 30.0, "{}", seen.text);
}

/// The DaemonSet form (Flagger's `daemonset_controller.go`): one primary pod per node, a
/// node-local block whose replicas are too few for a majority, so the pool's pods on other
/// nodes vote. The promotion reaches node 0 first: its new pod has only old pods beside it
/// in the pool, which are its rivals (no vote), and the canary's pair is unscored while any
/// old primary pod is left, never a match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_promotion_node_by_node_keeps_the_pair_and_pages_nobody() {
    // SAFETY: only this test reads this variable.
    unsafe { std::env::set_var("INFERPROBE_TEST_NODE_VOTES", "node-0") };
    let api = KubeApi::start().await;
    let ds = |node, owner, hash| Made {
        node,
        kind: "DaemonSet",
        owner,
        hash,
    };
    let nodes = ["node-0", "node-1", "node-2", "node-3"];
    let mut old = Vec::new();
    for node in nodes {
        let sim = start_sim(common::canary::sim(0)).await;
        let made = ds(node, "llm-primary", "aaa111");
        let name = format!("primary-old-{node}");
        api.apply(pod(
            &name,
            "llm-primary",
            &made,
            "2026-11-01T10:00:00Z",
            &sim,
        ));
        old.push(sim);
    }
    let canary = start_sim(common::canary::sim(7)).await;
    let made = ds("node-0", "llm", "ccc333");
    api.apply(pod(
        "canary-0",
        "llm",
        &made,
        "2026-11-02T10:00:00Z",
        &canary,
    ));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    let block = "node_local = true\n        pod_labels = [\"app\"]";
    let config = kube_config(&kubeconfig, block, r#"model = "m""#)
        .replace(
            r#"selector = "app=llm""#,
            r#"selector = "app in (llm, llm-primary)""#,
        )
        .replace(
            r#"canary = { interval = "20ms", max_tokens = 16 }"#,
            r#"canary = { interval = "20ms", max_tokens = 16, group_by = ["app"] }"#,
        );
    let daemon = start_daemon(&config).await;
    let before = daemon.wait_for(WAIT, |s| pair(s, "diverged") >= 10.0).await;
    assert_eq!(pair(&before, "match"), 0.0, "{}", before.text);
    let unscored = pair(&before, "unscored");
    // A DaemonSet's rolling update: delete the node's pod, then create the new one.
    api.delete("v1", "Pod", "inference", "primary-old-node-0");
    let new = start_sim(common::canary::sim(7)).await;
    let made = ds("node-0", "llm-primary", "bbb222");
    api.apply(pod(
        "primary-new-node-0",
        "llm-primary",
        &made,
        "2026-11-03T10:00:00Z",
        &new,
    ));
    let s = daemon
        .wait_for(WAIT, |s| {
            s.has_replica("llm", "primary-new-node-0") && pair(s, "unscored") >= unscored + 10.0
        })
        .await;
    daemon.stop().await;
    assert_eq!(
        pair(&s, "match"),
        0.0,
        "3 of 4 primary pods are old: {}",
        s.text
    );
    let primary = [("group", "llm-primary")];
    assert_eq!(checks(&s, &primary, "diverged"), 0.0, "{}", s.text);
}
