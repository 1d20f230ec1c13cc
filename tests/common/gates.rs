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
