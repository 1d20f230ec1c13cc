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

/// A Ready pod of `app`, made by the ReplicaSet `<deployment>-<hash>`, created `at`.
fn pod(
    name: &str,
    app: &str,
    deployment: &str,
    hash: &str,
    at: &str,
    sim: &Sim,
) -> serde_json::Value {
    let mut pod = objects::pod(
        "inference",
        name,
        "node-0",
        Some("127.0.0.1"),
        true,
        &[("app", app), ("pod-template-hash", hash)],
        &[("http", sim.addr.port())],
    );
    pod["metadata"]["creationTimestamp"] = at.into();
    pod["metadata"]["ownerReferences"] = serde_json::json!([{
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": format!("{deployment}-{hash}"),
        "uid": format!("uid-{deployment}-{hash}"),
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
            "llm-primary",
            "5d8f7c9b4",
            T0,
            sim,
        ));
    }
    api.apply(pod(
        "canary-0",
        "llm",
        "llm",
        "7b6c4d9f8",
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
    // pod goes as each new one is Ready (maxSurge 1, maxUnavailable 0).
    let mut seen = before;
    for (i, sim) in new.iter().enumerate() {
        let name = format!("primary-new-{i}");
        api.apply(pod(
            &name,
            "llm-primary",
            "llm-primary",
            "6c5b4a3f2",
            "2026-11-03T10:00:00Z",
            sim,
        ));
        seen = daemon.wait_for(WAIT, |s| scored(s, &name) >= 10.0).await;
        if i < 2 {
            // The gate's pair is still against the old primary while any of it is left.
            assert_eq!(pair(&seen, "match"), 0.0, "{}", seen.text);
        }
        api.delete("v1", "Pod", "inference", &format!("primary-old-{i}"));
    }
    let s = daemon
        .wait_for(WAIT, |s| {
            !s.has_replica("llm", "primary-old-2") && scored(s, "primary-new-0") >= 30.0
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
