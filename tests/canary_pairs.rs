//! Issue 41, item 4: the pair a rollout's template selects (`group` = the new version,
//! `baseline` = the stable one, both named by the controller) holds through whatever moves
//! pods mid-rollout. Before, the daemon took the group with the oldest pod as the baseline:
//! a stable pod replaced at 30 s made the *new* version the baseline, its divergence went
//! from 1.0 Failed to -1, and the diverged checks were counted on the stable group.
//!
//! A live daemon over a file_sd pool (simulator replicas, `group_by = ["version"]`), whose
//! file is rewritten as Argo Rollouts would move the pods.

use crate::common;

use std::time::Duration;

use common::canary::{file_config, sim};
use common::rollout::{Labels, write_pool};
use common::{Scrape, Sim, start_daemon, start_sim};

const WAIT: Duration = Duration::from_secs(60);
/// The stable pods' names after they were recreated mid-rollout.
const RECREATED: [&str; 3] = ["v1-x", "v1-y", "v1-z"];

fn pair(s: &Scrape, group: &str, baseline: &str, result: &str) -> f64 {
    s.sum(
        "inferprobe_canary_baseline_checks_total",
        &[("group", group), ("baseline", baseline), ("result", result)],
    )
}

/// Whether any pair series names `group` on either side.
fn names_group(s: &Scrape, group: &str) -> bool {
    s.matching("inferprobe_canary_baseline_checks_total", &[])
        .any(|x| {
            x.labels.get("group").map(String::as_str) == Some(group)
                || x.labels.get("baseline").map(String::as_str) == Some(group)
        })
}

fn member(sim: &Sim, pod: &str, version: &str) -> (String, Labels) {
    let labels = vec![
        ("pod", pod.to_owned()),
        ("model", "m".to_owned()),
        ("version", version.to_owned()),
    ];
    (sim.addr.to_string(), labels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pair_holds_through_recreation_abort_retry_and_undo() {
    let mut stable = Vec::new();
    for _ in 0..3 {
        stable.push(start_sim(sim(0)).await);
    }
    // v2: other weights (a bad upgrade); v0: an older revision with the stable weights.
    let (v2, v0) = (start_sim(sim(7)).await, start_sim(sim(0)).await);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pool.json");
    // The pool as Argo leaves it: the stable pods by these names, and a new version's pod.
    let roll = |names: [&str; 3], new: Option<(&Sim, &str, &str)>| {
        let mut pods: Vec<(String, Labels)> = names
            .iter()
            .zip(&stable)
            .map(|(name, sim)| member(sim, name, "v1"))
            .collect();
        pods.extend(new.map(|(sim, pod, version)| member(sim, pod, version)));
        write_pool(&file, &pods);
    };
    roll(["v1-a", "v1-b", "v1-c"], Some((&v2, "v2-a", "v2")));
    let daemon = start_daemon(&file_config(&file, r#", group_by = ["version"]"#)).await;
    let s = daemon
        .wait_for(WAIT, |s| pair(s, "v2", "v1", "diverged") >= 10.0)
        .await;
    let before = pair(&s, "v2", "v1", "diverged");

    // The stable pods recreated (an eviction, a drain, `kubectl argo rollouts restart`):
    // new pods, created after the canary's. The pair is still v2 against v1.
    roll(RECREATED, Some((&v2, "v2-a", "v2")));
    let s = daemon
        .wait_for(WAIT, |s| {
            pair(s, "v2", "v1", "diverged") >= before + 10.0
                && s.has_replica("pool", "v1-x")
                && !s.has_replica("pool", "v1-a")
        })
        .await;
    assert_eq!(pair(&s, "v2", "v1", "match"), 0.0, "{}", s.text);
    for group in ["v1", "v2"] {
        assert_eq!(
            pair(&s, group, group, "match") + pair(&s, group, group, "diverged"),
            0.0,
            "{group} compared with itself\n{}",
            s.text
        );
    }

    // An abort scales the canary down: its pairs go with it, on both sides.
    roll(RECREATED, None);
    daemon.wait_for(WAIT, |s| !names_group(s, "v2")).await;

    // A retry brings a new canary pod of the same revision: the pair counts again.
    roll(RECREATED, Some((&v2, "v2-b", "v2")));
    let s = daemon
        .wait_for(WAIT, |s| pair(s, "v2", "v1", "diverged") >= 10.0)
        .await;
    assert_eq!(pair(&s, "v2", "v1", "match"), 0.0, "{}", s.text);

    // An undo to an older revision: Argo's Latest is then v0, its Stable still v1, and that
    // pair exists too; v0 answers as v1 does.
    roll(RECREATED, Some((&v0, "v0-a", "v0")));
    let s = daemon
        .wait_for(WAIT, |s| {
            pair(s, "v0", "v1", "match") >= 10.0 && !names_group(s, "v2")
        })
        .await;
    daemon.stop().await;
    assert_eq!(pair(&s, "v0", "v1", "diverged"), 0.0, "{}", s.text);
}
