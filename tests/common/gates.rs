//! How Argo Rollouts and Flagger turn a Prometheus answer into a decision, written down
//! from their sources so the rollout templates are tested against the controllers'
//! semantics, not against the shape the templates expect.
//!
//! **Argo Rollouts** (argoproj/argo-rollouts):
//! - `metricproviders/prometheus/prometheus.go` `processResponse`: a vector becomes
//!   `result`, a `[]float64` of every sample in Prometheus's order (empty for no series;
//!   NaN kept as NaN); a scalar becomes a plain float.
//! - `utils/evaluate/evaluate.go` `EvaluateResult`: each condition is an `expr` program
//!   over `result`; an evaluation error (`result[0]` of an empty slice: "reflect: slice
//!   index out of range", issue #1466) is a measurement **Error**. With only a
//!   `successCondition`, false is **Failed**; with both, the failure condition wins, then
//!   the success condition, and neither true is **Inconclusive**. Comparisons with NaN are
//!   false (Go's float semantics).
//! - `analysis/analysis.go` `assessMetricFailureInconclusiveOrError` /
//!   `assessMetricStatus`: after each measurement, `failed > failureLimit` → Failed,
//!   `inconclusive > inconclusiveLimit` → Inconclusive, `consecutiveErrors >
//!   consecutiveErrorLimit` (default 4) → Error (where several hold, the later wins);
//!   once `count` measurements are taken, Successful. The run is the worst of its metrics
//!   (`IsWorse`: Successful < Inconclusive < Error < Failed). An Error measurement is not
//!   counted towards `count` (`runMeasurements`), so a query that keeps erroring never
//!   completes a metric.
//! - `count` unset (`EffectiveCount` in `pkg/apis/rollouts/v1alpha1/analysis_types.go`):
//!   with an `interval`, the metric runs **indefinitely** (not 0 measurements); without
//!   one, once.
//! - **Termination** (`assessMetricStatus`): a metric of a terminating run that has not
//!   failed, errored or gone Inconclusive is **Successful** — measured or not. A
//!   *background* analysis (`strategy.canary.analysis`) is terminated when the rollout is
//!   fully promoted (`rollout/analysis.go` `reconcileAnalysisRuns`:
//!   `shouldCancelCurrentAnalysis` → `cancelAnalysisRuns`), and a completed background run
//!   is not re-created for later steps (`needsNewAnalysisRun`). So a verdict that comes
//!   after the steps end is no verdict. An *inline* step (`steps: - analysis:`) blocks the
//!   rollout until its run completes (`reconcileStepBasedAnalysisRun`,
//!   `completedCurrentCanaryStep` in `rollout/canary.go`): Successful goes on, Failed or
//!   Error aborts, Inconclusive pauses.
//! - Timing (`analysis.go` `generateMetricTasks`): the first measurement is taken as soon
//!   as the run starts (no `initialDelay`), each next one `interval` after the last.
//! - **An undo** (issue 51 item 5; [`ArgoRollout`]). `kubectl argo rollouts undo`
//!   (`pkg/kubectl-argo-rollouts/cmd/undo/undo.go` `RunUndoRollout`, `rolloutRevision`)
//!   copies the pod template of the Rollout's ReplicaSet with the second-highest
//!   `rollout.argoproj.io/revision` (or `--to-revision`'s; scaled down or aborted alike)
//!   into `spec.template`: an ordinary spec change. The controller takes that ReplicaSet as
//!   the new one again (`utils/replicaset/replicaset.go` `FindNewReplicaSet`, its old
//!   `creationTimestamp`) and gives it the next revision (`rollout/sync.go`
//!   `syncReplicaSetRevision`, `SetNewReplicaSetAnnotations`). `status.stableRS` is still
//!   the version undone. It skips the steps and their analysis only for a *fast rollback*
//!   (`rollout/sync.go` `isFastRollback`; `rollout/analysis.go` `reconcileAnalysisRuns`
//!   creates no run, `rollout/canary.go` `syncRolloutStatusCanary` jumps to the last step,
//!   `shouldFullPromote` promotes): back to the stable ReplicaSet (an undo before the new
//!   version was promoted), or within `spec.rollbackWindow.revisions` (an `int32`,
//!   `pkg/apis/rollouts/v1alpha1/types.go` `RollbackWindowSpec`; unset or 0: no window).
//!   `isRollbackWithinWindow`: the new ReplicaSet was created before the stable one, and
//!   fewer than `revisions` of the Rollout's ReplicaSets (an Experiment's aside; none here)
//!   were created between them: by creation time, not by revision number. Otherwise the
//!   steps run from the first, and an analysis step's `podTemplateHashValue` arguments are
//!   `Latest` = the new ReplicaSet's hash, `Stable` = `status.stableRS`'s
//!   (`utils/analysis/factory.go` `BuildArgumentsForRolloutAnalysisRun`): the version undone
//!   is the baseline. (Read at 9f8d111, v1.10; the window is the same since v1.4. Left
//!   out: blue-green's rollback within `scaleDownDelay`, and up to v1.9 any undo to a
//!   ReplicaSet still within its scale-down deadline, which skipped the analysis only.)
//!
//! **Flagger** (fluxcd/flagger):
//! - `pkg/metrics/providers/prometheus.go` `RunQuery`: the value is the *last* sample of
//!   the vector; an empty vector or NaN is `ErrNoValuesFound`.
//! - `pkg/controller/scheduler_metrics.go` `runMetricChecks`: no values, a query error, a
//!   value below `thresholdRange.min` or above `.max` halts advancement (the check fails).
//! - `pkg/controller/scheduler.go` `advanceCanary`: the first tick of the analysis (weight
//!   0, `status.iterations` 0) runs the pre-rollout hooks only, no metric check, and
//!   **counts as an iteration**: it falls through to `runBlueGreen`, which sets
//!   `status.iterations` to 1. Each later tick first rolls back at `failedChecks >=
//!   analysis.threshold`, then runs every metric check: a failed one adds one to
//!   `status.failedChecks` (never reset during an analysis) and ends the tick; a passing
//!   one advances `runBlueGreen`: `status.iterations` + 1 up to `analysis.iterations`,
//!   once more at it (promotion hooks, all traffic), and at the tick after, promotion.
//!   So a blue/green canary (a DaemonSet, the kubernetes provider) is promoted on the
//!   `iterations + 1`-th passing check after the first tick.

/// One measurement's (or a metric's, or a run's) phase, as Argo names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Running,
    Successful,
    Inconclusive,
    Error,
    Failed,
}

/// A token of a condition: `result[i]`, `len(result)`, a number, `true`/`false`, an
/// operator.
fn tokens(condition: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = condition.trim();
    while !rest.is_empty() {
        let take = if rest.starts_with("result[") {
            rest.find(']').expect("result[ without ]") + 1
        } else if rest.starts_with("len(result)") {
            "len(result)".len()
        } else if let Some(op) = ["&&", "||", "<=", ">=", "==", "!=", "<", ">"]
            .iter()
            .find(|op| rest.starts_with(**op))
        {
            op.len()
        } else {
            rest.find(|c: char| c.is_whitespace() || "&|<>=!".contains(c))
                .unwrap_or(rest.len())
        };
        out.push(rest[..take].to_owned());
        rest = rest[take..].trim_start();
    }
    out
}

/// A value of the condition: an index out of range is an evaluation error.
fn operand(token: &str, result: &[f64]) -> Result<f64, String> {
    if let Some(index) = token.strip_prefix("result[") {
        let i: usize = index.trim_end_matches(']').parse().expect("an index");
        return result
            .get(i)
            .copied()
            .ok_or_else(|| "reflect: slice index out of range".to_owned());
    }
    if token == "len(result)" {
        return Ok(result.len() as f64);
    }
    token
        .parse()
        .map_err(|_| format!("not a number in a condition: {token}"))
}

/// One term: `true`, `false`, or `a op b`.
fn term(t: &[String], result: &[f64]) -> Result<bool, String> {
    match t {
        [one] if one == "true" => return Ok(true),
        [one] if one == "false" => return Ok(false),
        [_, _, _] => {}
        other => return Err(format!("a comparison expected: {other:?}")),
    }
    let (a, b) = (operand(&t[0], result)?, operand(&t[2], result)?);
    Ok(match t[1].as_str() {
        "<=" => a <= b,
        ">=" => a >= b,
        "<" => a < b,
        ">" => a > b,
        "==" => a == b,
        "!=" => a != b,
        other => return Err(format!("operator {other}")),
    })
}

/// Evaluate an Argo condition over `result` the way `expr` does for the subset the
/// templates use: terms joined by `&&` / `||` (`&&` binds tighter; both short-circuit,
/// so a term after a deciding one is never evaluated).
pub fn condition(text: &str, result: &[f64]) -> Result<bool, String> {
    let t = tokens(text);
    for chain in t.split(|x| x == "||") {
        let mut all = true;
        for one in chain.split(|x| x == "&&") {
            if !term(one, result)? {
                all = false;
                break;
            }
        }
        if all {
            return Ok(true);
        }
    }
    Ok(false)
}

/// One Argo measurement: the query's answer (`Err`: the provider failed) judged by the
/// metric's conditions.
pub fn argo_measurement(
    answer: &Result<Vec<f64>, String>,
    success: Option<&str>,
    failure: Option<&str>,
) -> Phase {
    let Ok(result) = answer else {
        return Phase::Error;
    };
    let eval = |c: Option<&str>| c.map(|c| condition(c, result)).transpose();
    let (Ok(succeeded), Ok(failed)) = (eval(success), eval(failure)) else {
        return Phase::Error;
    };
    let (succeeded, failed) = match (succeeded, failed) {
        (None, None) => return Phase::Successful,
        (Some(s), None) => (s, !s),
        (None, Some(f)) => (!f, f),
        (Some(s), Some(f)) => (s, f),
    };
    if failed {
        Phase::Failed
    } else if succeeded {
        Phase::Successful
    } else {
        Phase::Inconclusive
    }
}

/// A metric's limits, as in the template (Argo's defaults where it omits them).
#[derive(Clone, Copy, Debug)]
pub struct ArgoLimits {
    /// `None`: unset with an `interval`, so indefinite (`EffectiveCount`).
    pub count: Option<usize>,
    pub failure_limit: usize,
    pub inconclusive_limit: usize,
    pub consecutive_error_limit: usize,
}

/// A metric's phase after `measurements` (in order), as Argo assesses it after each.
pub fn argo_metric(measurements: &[Phase], limits: ArgoLimits) -> Phase {
    argo_metric_in(measurements, limits, false)
}

/// The same, in a run that is `terminating` (a background analysis when the rollout is
/// fully promoted): a metric still running is Successful.
pub fn argo_metric_in(measurements: &[Phase], limits: ArgoLimits, terminating: bool) -> Phase {
    let (mut failed, mut inconclusive, mut consecutive_errors, mut counted) = (0, 0, 0, 0);
    for m in measurements {
        match m {
            Phase::Failed => failed += 1,
            Phase::Inconclusive => inconclusive += 1,
            _ => {}
        }
        // An Error is not counted towards `count` (analysis.go `runMeasurements`).
        if *m != Phase::Error {
            counted += 1;
        }
        consecutive_errors = if *m == Phase::Error {
            consecutive_errors + 1
        } else {
            0
        };
        let mut phase = None;
        if failed > limits.failure_limit {
            phase = Some(Phase::Failed);
        }
        if inconclusive > limits.inconclusive_limit {
            phase = Some(Phase::Inconclusive);
        }
        if consecutive_errors > limits.consecutive_error_limit {
            phase = Some(Phase::Error);
        }
        if let Some(phase) = phase {
            return phase;
        }
        if limits.count.is_some_and(|count| counted >= count) {
            return Phase::Successful;
        }
    }
    if terminating {
        // "if we get here, this metric runs indefinitely" … terminating → Successful.
        return Phase::Successful;
    }
    Phase::Running
}

/// Flagger's value of a query's answer: the last sample; no values (empty, NaN) or a
/// failed query is `None`.
pub fn flagger_value(answer: &Result<Vec<f64>, String>) -> Option<f64> {
    answer
        .as_ref()
        .ok()?
        .last()
        .copied()
        .filter(|v| !v.is_nan())
}

/// Whether Flagger's check of a metric passes with `thresholdRange {min, max}`.
pub fn flagger_passes(
    answer: &Result<Vec<f64>, String>,
    min: Option<f64>,
    max: Option<f64>,
) -> bool {
    let Some(v) = flagger_value(answer) else {
        return false;
    };
    !(min.is_some_and(|m| v < m) || max.is_some_and(|m| v > m))
}

/// Where a Flagger analysis stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Canary {
    Progressing {
        /// `status.iterations`.
        iterations: usize,
        failed_checks: usize,
    },
    Promoted,
    RolledBack,
}

/// One analysis tick of a blue/green Flagger canary (`analysis.iterations`,
/// `analysis.threshold`): `checks` runs every metric check and says whether all passed.
pub fn flagger_tick(
    state: Canary,
    iterations: usize,
    threshold: usize,
    checks: impl FnOnce() -> bool,
) -> Canary {
    let Canary::Progressing {
        iterations: done,
        failed_checks,
    } = state
    else {
        return state;
    };
    if failed_checks >= threshold {
        return Canary::RolledBack;
    }
    if done == 0 {
        // "Starting canary analysis": pre-rollout hooks, no metric check; runBlueGreen
        // counts the tick as an iteration.
        return Canary::Progressing {
            iterations: 1,
            failed_checks,
        };
    }
    if !checks() {
        return Canary::Progressing {
            iterations: done,
            failed_checks: failed_checks + 1,
        };
    }
    if done > iterations {
        return Canary::Promoted;
    }
    Canary::Progressing {
        iterations: done + 1,
        failed_checks,
    }
}

/// One of a Rollout's ReplicaSets, as `kubectl argo rollouts undo` and the rollback window
/// read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgoReplicaSet {
    /// Its `rollouts-pod-template-hash` label: the version.
    pub hash: String,
    /// Its `creationTimestamp` as a tick: only the order counts (`Before` is strict).
    pub created: u64,
    /// Its `rollout.argoproj.io/revision` annotation.
    pub revision: u64,
}

/// A canary Rollout, as far as an undo needs it.
#[derive(Clone, Debug)]
pub struct ArgoRollout {
    /// Every ReplicaSet the Rollout keeps (`revisionHistoryLimit` aside).
    pub replica_sets: Vec<ArgoReplicaSet>,
    /// The hash of `spec.template`'s ReplicaSet (`newRS`: the analysis' `Latest`).
    pub new: String,
    /// `status.stableRS` (the analysis' `Stable`).
    pub stable: String,
    /// `spec.rollbackWindow.revisions`; `None`: unset.
    pub rollback_window: Option<i32>,
}

/// What the controller does with the Rollout's update, as it stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgoUpdate {
    /// No step and no analysis: promoted once its ReplicaSet is available, for
    /// `shouldFullPromote`'s reason.
    FastTracked(&'static str),
    /// The steps from the first; an analysis step's run gets these hashes.
    Steps { latest: String, stable: String },
}

impl ArgoRollout {
    /// The first version, stable at once (`shouldFullPromote`: "Initial deploy").
    pub fn initial(hash: &str, rollback_window: Option<i32>) -> Self {
        let mut rollout = ArgoRollout {
            replica_sets: Vec::new(),
            new: String::new(),
            stable: String::new(),
            rollback_window,
        };
        rollout.deploy(hash);
        rollout.stable = hash.to_owned();
        rollout
    }

    pub fn replica_set(&self, hash: &str) -> &ArgoReplicaSet {
        self.replica_sets
            .iter()
            .find(|rs| rs.hash == hash)
            .unwrap_or_else(|| panic!("no ReplicaSet {hash}"))
    }

    /// `spec.template` becomes `hash`'s: its ReplicaSet if the Rollout keeps one
    /// (`FindNewReplicaSet`), else a new one (`createDesiredReplicaSet`); either way with
    /// the revision after every other one's, unless it has it already
    /// (`SetNewReplicaSetAnnotations`).
    pub fn deploy(&mut self, hash: &str) {
        let others = |rs: &&ArgoReplicaSet| rs.hash != hash;
        let revision = self
            .replica_sets
            .iter()
            .filter(others)
            .map(|rs| rs.revision)
            .max()
            .unwrap_or(0)
            + 1;
        let created = self
            .replica_sets
            .iter()
            .map(|rs| rs.created)
            .max()
            .unwrap_or(0)
            + 1;
        match self.replica_sets.iter_mut().find(|rs| rs.hash == hash) {
            Some(rs) => rs.revision = rs.revision.max(revision),
            None => self.replica_sets.push(ArgoReplicaSet {
                hash: hash.to_owned(),
                created,
                revision,
            }),
        }
        self.new = hash.to_owned();
    }

    /// `kubectl argo rollouts undo [--to-revision]` (`rolloutRevision`): the ReplicaSet of
    /// that revision, or with the second-highest one; a template that is already the
    /// Rollout's is "skipped rollback" (`equalIgnoreHash`). Returns the hash undone to.
    pub fn undo(&mut self, to_revision: Option<u64>) -> Result<String, String> {
        let target = match to_revision {
            Some(r) => self
                .replica_sets
                .iter()
                .find(|rs| rs.revision == r)
                .ok_or_else(|| format!("unable to find specified revision {r} in history"))?,
            None => {
                let mut by_revision: Vec<&ArgoReplicaSet> = self.replica_sets.iter().collect();
                by_revision.sort_by_key(|rs| std::cmp::Reverse(rs.revision));
                *by_revision
                    .get(1)
                    .ok_or_else(|| "no revision found".to_owned())?
            }
        };
        let hash = target.hash.clone();
        if hash != self.new {
            self.deploy(&hash);
        }
        Ok(hash)
    }

    /// `rollout/sync.go` `isRollbackWithinWindow`.
    pub fn is_rollback_within_window(&self) -> bool {
        let (new, stable) = (self.replica_set(&self.new), self.replica_set(&self.stable));
        if new.created >= stable.created {
            return false;
        }
        let Some(revisions) = self.rollback_window.filter(|r| *r > 0) else {
            return false;
        };
        let between = self
            .replica_sets
            .iter()
            .filter(|rs| new.created < rs.created && rs.created < stable.created)
            .count();
        (between as i64) < i64::from(revisions)
    }

    /// `rollout/sync.go` `isFastRollback` (`isRollback` and then: within the window, or
    /// back to the stable ReplicaSet) and `shouldFullPromote`'s reason for it.
    pub fn update(&self) -> ArgoUpdate {
        if self.is_rollback_within_window() {
            return ArgoUpdate::FastTracked("Rollback within window");
        }
        if self.new == self.stable {
            return ArgoUpdate::FastTracked("Fast rollback");
        }
        ArgoUpdate::Steps {
            latest: self.new.clone(),
            stable: self.stable.clone(),
        }
    }

    /// The update runs to its end, its analysis step's run ending in `run` (unused when it
    /// is fast-tracked): promoted (`promoteStable`) when fast-tracked or Successful; Failed
    /// or Error aborts (`reconcileStepBasedAnalysisRun`: `AddAbort`) and Inconclusive
    /// pauses, and `status.stableRS` stays.
    pub fn finish(&mut self, run: Phase) {
        let promoted = match self.update() {
            ArgoUpdate::FastTracked(_) => true,
            ArgoUpdate::Steps { .. } => run == Phase::Successful,
        };
        if promoted {
            self.stable = self.new.clone();
        }
    }
}
