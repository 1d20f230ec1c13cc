//! Issue 51 item 5: `kubectl argo rollouts undo` away from a bad version that was promoted.
//! Argo Rollouts runs an undo's steps and their analysis unless it is a fast rollback
//! (tests/common/gates.rs [`ArgoRollout`], from `rollout/sync.go` `isFastRollback` and
//! `isRollbackWithinWindow`): the undo's analysis then asks the gate about the old version
//! with the bad one as its baseline (`podTemplateHashValue: Stable` is still the bad one),
//! so it fails, or waits when the bad version answers nothing, and the bad version stays.
//! `spec.rollbackWindow` fast-tracks an undo to one of the `revisions` ReplicaSets created
//! before the stable one; an undo before the promotion is fast-tracked without it.

use serde_yaml_ng::Value;

use crate::common;

use common::gates::{self, ArgoRollout, ArgoUpdate, Phase};
use common::templates::{argo, docs, str_at};

/// The Rollout that docs/canary.md ("Gating a model rollout", undo) shows: it must match
/// the ```yaml block there that has `rollbackWindow:` (compared parsed, once the page has
/// one: [`the_documented_rollout_is_the_one_in_docs_canary_md`]).
const ROLLOUT: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: llm
spec:
  replicas: 4
  # An undo to one of the 3 ReplicaSets created before the stable one (an aborted
  # canary's among them) skips the steps and the analysis: the gate would compare the
  # version undone to with the bad one as its baseline.
  rollbackWindow:
    revisions: 3
  selector:
    matchLabels:
      app: llm
  # template: your model server's pods
  strategy:
    canary:
      steps:
        - setWeight: 25
        - analysis:
            templates:
              - templateName: inferprobe-canary-gate
            args:
              - name: target # the inferprobe discovery block's name
                value: llm
              - name: canary-hash
                valueFrom:
                  podTemplateHashValue: Latest
              - name: stable-hash
                valueFrom:
                  podTemplateHashValue: Stable
        - setWeight: 50
"#;

/// A Rollout through `versions`, each promoted in turn.
fn promoted(versions: &[&str], window: Option<i32>) -> ArgoRollout {
    let mut rollout = ArgoRollout::initial(versions[0], window);
    for v in &versions[1..] {
        rollout.deploy(v);
        rollout.finish(Phase::Successful);
        assert_eq!(rollout.stable, *v);
    }
    rollout
}

fn steps(latest: &str, stable: &str) -> ArgoUpdate {
    ArgoUpdate::Steps {
        latest: latest.into(),
        stable: stable.into(),
    }
}

/// The model against Argo's own table (`rollout/sync_test.go` `TestRollbackWindow`: five
/// ReplicaSets a minute apart, foo-4 the oldest, and an Experiment's left out).
#[test]
fn the_window_as_argos_own_test_table_has_it() {
    let mut rollout = ArgoRollout::initial("foo-4", None);
    for v in ["foo-3", "foo-2", "foo-1", "foo"] {
        rollout.deploy(v);
    }
    for (stable, new, revisions, within) in [
        ("foo-4", "foo-3", 1, false), // newer than the stable one: no rollback
        ("foo-3", "foo-4", 1, true),
        ("foo-2", "foo-4", 2, true),
        ("foo-1", "foo-4", 2, false),
        ("foo", "foo-1", 1, true), // Argo's Experiment ReplicaSet between is left out
    ] {
        rollout.stable = stable.into();
        rollout.new = new.into();
        rollout.rollback_window = Some(revisions);
        assert_eq!(
            rollout.is_rollback_within_window(),
            within,
            "{new} with {stable} stable, revisions {revisions}"
        );
    }
    rollout.rollback_window = Some(0);
    rollout.stable = "foo-3".into();
    rollout.new = "foo-4".into();
    assert!(!rollout.is_rollback_within_window(), "0 is no window");
}

/// (a) Five versions promoted one after the other; an undo to each earlier one skips the
/// steps and the analysis exactly when it is one of the `revisions` before the stable one,
/// and never without a window.
#[test]
fn an_undo_skips_the_analysis_only_within_the_window() {
    let versions = ["v1", "v2", "v3", "v4", "v5"];
    for window in [None, Some(1), Some(2), Some(3)] {
        for back in 1..versions.len() {
            let mut rollout = promoted(&versions, window);
            let target = versions[versions.len() - 1 - back];
            let revision = rollout.replica_set(target).revision;
            assert_eq!(rollout.undo(Some(revision)), Ok(target.to_owned()));
            let within = window.is_some_and(|n| back as i32 <= n);
            let expected = if within {
                ArgoUpdate::FastTracked("Rollback within window")
            } else {
                steps(target, "v5")
            };
            assert_eq!(rollout.update(), expected, "{back} back, window {window:?}");
            // The version undone to became the newest revision; its ReplicaSet is the old
            // one (created before the stable one), which is what the window reads.
            assert_eq!(rollout.replica_set(target).revision, 6);
            assert!(rollout.replica_set(target).created < rollout.replica_set("v5").created);
        }
        // The default undo: the previous revision.
        let mut rollout = promoted(&versions, window);
        assert_eq!(rollout.undo(None), Ok("v4".to_owned()));
        assert_eq!(
            matches!(rollout.update(), ArgoUpdate::FastTracked(_)),
            window.is_some(),
            "{window:?}"
        );
    }
}

/// Without a window, the undo's analysis compares the good version with the bad one as
/// its baseline: Failed at 30 s when the bad version answers otherwise (the undo aborts),
/// Inconclusive at 120 s when it fails every request (the undo pauses). Either way the bad
/// version stays stable. The known answers alone would have passed the good version.
#[test]
fn without_a_window_the_undo_is_gated_against_the_bad_version() {
    let mut rollout = promoted(&["good", "bad"], None);
    assert_eq!(rollout.undo(None), Ok("good".to_owned()));
    let ArgoUpdate::Steps { latest, stable } = rollout.update() else {
        panic!("fast-tracked without a window: {:?}", rollout.update());
    };
    assert_eq!((latest.as_str(), stable.as_str()), ("good", "bad"));
    let metrics = argo(&[
        ("target", "llm"),
        ("canary-hash", &latest),
        ("stable-hash", &stable),
    ]);
    let divergence = metrics
        .iter()
        .find(|m| m.name == "baseline-divergence")
        .unwrap();
    let known = metrics.iter().find(|m| m.name == "known-answers").unwrap();
    assert!(
        divergence.query.contains(r#"group="good""#)
            && divergence.query.contains(r#"baseline="bad""#),
        "{}",
        divergence.query
    );
    let interval = interval_seconds();
    // Each measurement as the metric's conditions judge it; the phase and the time of the
    // measurement that decided it (the first at once, then every interval).
    let run = |m: &common::templates::ArgoMetric, answers: &[f64]| {
        let phases: Vec<Phase> = answers
            .iter()
            .map(|v| {
                gates::argo_measurement(&Ok(vec![*v]), m.success.as_deref(), m.failure.as_deref())
            })
            .collect();
        (1..=phases.len())
            .find_map(|n| match gates::argo_metric(&phases[..n], m.limits) {
                Phase::Running => None,
                phase => Some((phase, (n as u64 - 1) * interval)),
            })
            .unwrap_or((Phase::Running, 0))
    };
    // The bad version answers otherwise: the good one diverges from it once min-checks are in.
    assert_eq!(run(divergence, &[-1.0, 1.0]), (Phase::Failed, 30));
    // The bad version fails every request: it has no reference, nothing is scored.
    assert_eq!(run(divergence, &[-1.0; 5]), (Phase::Inconclusive, 120));
    // The good version's own known answers, whatever the baseline.
    assert_eq!(
        run(known, &[-1.0, 0.0, 0.0, 0.0, 0.0]),
        (Phase::Successful, 120)
    );
    for (divergence, outcome) in [(Phase::Failed, "aborted"), (Phase::Inconclusive, "paused")] {
        // The run is the worst of its metrics.
        let run = divergence.max(Phase::Successful);
        let mut undone = rollout.clone();
        undone.finish(run);
        assert_eq!(undone.stable, "bad", "{outcome}: the bad version stays");
    }
}

/// With the documented window the same undo skips the steps and the analysis; so does an
/// undo before the bad version was promoted, window or not (back to the stable ReplicaSet).
#[test]
fn with_the_window_the_undo_is_fast_tracked() {
    let window = documented_window();
    let mut rollout = promoted(&["good", "bad"], Some(window));
    rollout.undo(None).unwrap();
    assert_eq!(
        rollout.update(),
        ArgoUpdate::FastTracked("Rollback within window")
    );
    rollout.finish(Phase::Failed); // no run: the analysis step is skipped
    assert_eq!(rollout.stable, "good");

    let mut rollout = ArgoRollout::initial("good", None);
    rollout.deploy("bad");
    assert_eq!(rollout.update(), steps("bad", "good"));
    rollout.undo(None).unwrap();
    assert_eq!(rollout.update(), ArgoUpdate::FastTracked("Fast rollback"));
}

/// The window counts ReplicaSets created between, not revision numbers: after an undo and
/// a new version, the previous revision is two ReplicaSets back. And undoing the undo goes
/// forward again, to the bad version, which no window fast-tracks: the gate runs.
#[test]
fn the_window_counts_replica_sets_not_revisions() {
    let mut rollout = promoted(&["a", "b"], Some(1));
    rollout.undo(None).unwrap();
    rollout.finish(Phase::Successful);
    assert_eq!(
        (rollout.stable.as_str(), rollout.replica_set("a").revision),
        ("a", 3)
    );
    let mut forward = rollout.clone();
    assert_eq!(forward.undo(None), Ok("b".to_owned()));
    assert_eq!(forward.update(), steps("b", "a"));
    rollout.deploy("c");
    rollout.finish(Phase::Successful);
    assert_eq!(rollout.replica_set("c").revision, 4);
    for (window, expected) in [
        (1, steps("a", "c")),
        (2, ArgoUpdate::FastTracked("Rollback within window")),
    ] {
        let mut undone = rollout.clone();
        undone.rollback_window = Some(window);
        assert_eq!(undone.undo(None), Ok("a".to_owned()), "revision 3 of 4");
        assert_eq!(undone.update(), expected, "revisions: {window}");
    }
}

/// After a canary the gate aborted, the default undo picks the aborted version (the
/// highest revision but the current one), and a window fast-tracks it past the gate: the
/// docs tell to name the good revision.
#[test]
fn a_default_undo_after_an_aborted_canary_picks_the_aborted_version() {
    let window = documented_window();
    let mut rollout = ArgoRollout::initial("good", Some(window));
    rollout.deploy("aborted");
    rollout.finish(Phase::Failed);
    assert_eq!(rollout.stable, "good");
    rollout.deploy("bad");
    rollout.finish(Phase::Successful);
    let mut default = rollout.clone();
    assert_eq!(default.undo(None), Ok("aborted".to_owned()));
    assert_eq!(
        default.update(),
        ArgoUpdate::FastTracked("Rollback within window")
    );
    default.rollback_window = None;
    assert_eq!(
        default.update(),
        steps("aborted", "bad"),
        "gated without a window"
    );
    let good = rollout.replica_set("good").revision;
    assert_eq!(rollout.undo(Some(good)), Ok("good".to_owned()));
    assert_eq!(
        rollout.update(),
        ArgoUpdate::FastTracked("Rollback within window")
    );
    rollout.rollback_window = Some(1);
    assert_eq!(
        rollout.update(),
        steps("good", "bad"),
        "the aborted one is between"
    );
}

/// (b) The documented Rollout: a window of at least one revision, and one inline analysis
/// step asking inferprobe-canary-gate with the arguments the template declares, the pair
/// from the controller.
#[test]
fn the_documented_rollout_asks_the_gate_what_the_template_declares() {
    let rollout: Value = serde_yaml_ng::from_str(ROLLOUT).unwrap();
    assert_eq!(str_at(&rollout, &["apiVersion"]), "argoproj.io/v1alpha1");
    assert_eq!(str_at(&rollout, &["kind"]), "Rollout");
    assert!(documented_window() >= 1);
    let canary = &rollout["spec"]["strategy"]["canary"];
    assert!(
        canary.get("analysis").is_none(),
        "a background analysis is no verdict (docs/canary.md)"
    );
    let analyses: Vec<&Value> = canary["steps"]
        .as_sequence()
        .expect("steps")
        .iter()
        .filter_map(|s| s.get("analysis"))
        .collect();
    assert_eq!(analyses.len(), 1, "one inline analysis step");
    let step = analyses[0];
    let template = &docs("config/rollouts/argo-analysistemplate.yaml")[0];
    let name = str_at(template, &["metadata", "name"]);
    assert_eq!(name, "inferprobe-canary-gate");
    let refs = step["templates"].as_sequence().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(str_at(&refs[0], &["templateName"]), name);
    let declared = template["spec"]["args"].as_sequence().unwrap();
    let given = step["args"].as_sequence().unwrap();
    for arg in given {
        let n = str_at(arg, &["name"]);
        assert!(
            declared.iter().any(|d| str_at(d, &["name"]) == n),
            "{n} is not an argument of {name}"
        );
        assert!(
            arg.get("value").is_some() != arg.get("valueFrom").is_some(),
            "{n}: a value or a valueFrom"
        );
    }
    let given_value = |n: &str| given.iter().find(|a| str_at(a, &["name"]) == n);
    for d in declared.iter().filter(|d| d.get("value").is_none()) {
        let n = str_at(d, &["name"]);
        assert!(given_value(n).is_some(), "{name} needs {n}");
    }
    // The pair from the controller, never guessed.
    for (n, from) in [("canary-hash", "Latest"), ("stable-hash", "Stable")] {
        let arg = given_value(n).unwrap_or_else(|| panic!("{n}"));
        assert_eq!(
            str_at(arg, &["valueFrom", "podTemplateHashValue"]),
            from,
            "{n}"
        );
    }
    // The step's arguments as Argo builds them (`BuildArgumentsForRolloutAnalysisRun`) for
    // an undo outside the window fill every one the template uses.
    let mut rollout = promoted(&["good", "bad"], None);
    rollout.undo(None).unwrap();
    let ArgoUpdate::Steps { latest, stable } = rollout.update() else {
        panic!("no steps");
    };
    let args: Vec<(&str, &str)> = given
        .iter()
        .map(|a| {
            let n = str_at(a, &["name"]);
            let v = match a["valueFrom"]["podTemplateHashValue"].as_str() {
                Some("Latest") => latest.as_str(),
                Some("Stable") => stable.as_str(),
                Some(other) => panic!("{other}"),
                None => str_at(a, &["value"]),
            };
            (n, v)
        })
        .collect();
    let metrics = argo(&args);
    assert!(
        metrics
            .iter()
            .all(|m| m.query.contains(r#"target="llm""#) && m.query.contains(r#"group="good""#)),
        "{metrics:?}"
    );
}

/// Once docs/canary.md shows a Rollout with `rollbackWindow`, it is [`ROLLOUT`].
#[test]
fn the_documented_rollout_is_the_one_in_docs_canary_md() {
    let ours: Value = serde_yaml_ng::from_str(ROLLOUT).unwrap();
    // The reader finds a block indented under a list item, as the page's others are.
    let indented: String = ROLLOUT.lines().map(|l| format!("  {l}\n")).collect();
    let sample = format!("- Undo:\n\n  ```yaml\n{indented}  ```\n\n```toml\nx = 1\n```\n");
    let blocks = yaml_blocks(&sample);
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    assert_eq!(serde_yaml_ng::from_str::<Value>(&blocks[0]).unwrap(), ours);
    let page = common::docs::read("docs/canary.md");
    for block in yaml_blocks(&page) {
        if block.contains("rollbackWindow:") {
            let theirs: Value = serde_yaml_ng::from_str(&block)
                .unwrap_or_else(|e| panic!("docs/canary.md: {e}\n{block}"));
            assert_eq!(theirs, ours, "docs/canary.md's Rollout is not ROLLOUT");
        }
    }
}

/// The fenced ```yaml blocks of a page, each less its fence's indentation.
fn yaml_blocks(page: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for line in page.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut open {
            None if trimmed.starts_with("```yaml") => open = Some((indent, String::new())),
            Some((_, block)) if trimmed.starts_with("```") => {
                blocks.push(std::mem::take(block));
                open = None;
            }
            Some((at, block)) => {
                block.push_str(line.get(*at..).unwrap_or("").trim_end());
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// `spec.rollbackWindow.revisions` of [`ROLLOUT`]: an integer (an `int32`, not a string).
fn documented_window() -> i32 {
    let rollout: Value = serde_yaml_ng::from_str(ROLLOUT).unwrap();
    let revisions = rollout["spec"]["rollbackWindow"]["revisions"]
        .as_u64()
        .expect("spec.rollbackWindow.revisions: an integer");
    assert!(revisions >= 1, "revisions: {revisions} is no window");
    i32::try_from(revisions).expect("an int32")
}

/// The template's measurement interval (each metric's; they are alike), in seconds.
fn interval_seconds() -> u64 {
    let template = &docs("config/rollouts/argo-analysistemplate.yaml")[0];
    let intervals: Vec<&str> = template["spec"]["metrics"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|m| str_at(m, &["interval"]))
        .collect();
    assert!(intervals.windows(2).all(|w| w[0] == w[1]), "{intervals:?}");
    intervals[0]
        .strip_suffix('s')
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("an interval in seconds: {}", intervals[0]))
}
