//! What one candidate version's analysis did, read as Argo Rollouts and Flagger read it:
//! Argo's measurements and phase per metric every second, Flagger's checks per tick, and
//! when each controller decided.

use super::super::gates::{self, Canary, Phase};
use super::super::prometheus::Prometheus;
use super::super::templates::{ArgoMetric, argo, flagger, flagger_range};
use super::{ARGO_EVERY, FLAGGER_EVERY, FLAGGER_ITERATIONS, FLAGGER_THRESHOLD, STABLE};

/// What one candidate version's analysis did: Argo's measurements per metric, its phase
/// per metric at every second, and Flagger's canary.
pub struct Analysis {
    pub argo: Vec<ArgoMetric>,
    pub measurements: Vec<Vec<Phase>>,
    pub every_second: Vec<Vec<(u64, Vec<f64>, Phase)>>,
    pub flagger: Vec<(String, String)>,
    pub canary: Canary,
    /// When Flagger rolled back or promoted, and Argo's run completed.
    pub flagger_at: Option<u64>,
    pub argo_at: Option<u64>,
    scale: u64,
}

impl Analysis {
    pub fn new(canary_hash: &str, namespace: &str, scale: u64) -> Self {
        let argo = argo(&[
            ("target", "llm"),
            ("canary-hash", canary_hash),
            ("stable-hash", STABLE),
            ("prometheus", "http://127.0.0.1:9090"),
        ]);
        let n = argo.len();
        Self {
            argo,
            measurements: vec![Vec::new(); n],
            every_second: vec![Vec::new(); n],
            flagger: flagger(namespace, "llm", "40s"),
            canary: Canary::Progressing {
                iterations: 0,
                failed_checks: 0,
            },
            flagger_at: None,
            argo_at: None,
            scale,
        }
    }

    /// Second `t` of the analysis: every Argo query (a measurement when Argo would take
    /// one), and a Flagger tick when one is due.
    pub async fn step(&mut self, prometheus: &Prometheus, t: u64) {
        for (i, m) in self.argo.iter().enumerate() {
            let answer = prometheus.query(&m.query).await;
            let phase =
                gates::argo_measurement(&answer, m.success.as_deref(), m.failure.as_deref());
            let values = answer.clone().unwrap_or_default();
            self.every_second[i].push((t, values, phase));
            let due = m
                .limits
                .count
                .is_none_or(|c| self.measurements[i].len() < c);
            if t % (ARGO_EVERY / self.scale) == 0 && due && self.argo_at.is_none() {
                self.measurements[i].push(phase);
            }
        }
        if self.argo_at.is_none() && self.argo_run() != Phase::Running {
            self.argo_at = Some(t);
        }
        if t % (FLAGGER_EVERY / self.scale) == 0 {
            let mut answers = Vec::new();
            for (name, query) in &self.flagger {
                answers.push((name.clone(), prometheus.query(query).await));
            }
            self.canary =
                gates::flagger_tick(self.canary, FLAGGER_ITERATIONS, FLAGGER_THRESHOLD, || {
                    answers.iter().all(|(name, answer)| {
                        let (min, max) = flagger_range(name);
                        gates::flagger_passes(answer, min, max)
                    })
                });
            if self.flagger_at.is_none() && !matches!(self.canary, Canary::Progressing { .. }) {
                self.flagger_at = Some(t);
            }
        }
    }

    /// The first second each Argo metric's answer was conclusive (not -1).
    pub fn conclusive_at(&self) -> Vec<Option<u64>> {
        self.every_second
            .iter()
            .map(|s| {
                s.iter()
                    .find(|(_, v, _)| v.first().is_some_and(|v| *v >= 0.0))
                    .map(|(t, _, _)| *t)
            })
            .collect()
    }

    /// Argo's AnalysisRun: the worst of its metrics once one failed, errored or went
    /// Inconclusive (the run then terminates), else Running while any metric runs.
    pub fn argo_run(&self) -> Phase {
        let phases: Vec<Phase> = self
            .argo
            .iter()
            .zip(&self.measurements)
            .map(|(m, taken)| gates::argo_metric(taken, m.limits))
            .collect();
        let worst = phases.iter().copied().max().unwrap_or(Phase::Running);
        if worst > Phase::Successful || !phases.contains(&Phase::Running) {
            worst
        } else {
            Phase::Running
        }
    }

    /// Argo's run completed and Flagger decided.
    pub fn done(&self) -> bool {
        self.argo_at.is_some() && self.flagger_at.is_some()
    }

    pub fn report(&self, label: &str) -> String {
        let mut out = format!(
            "{label}: Argo {:?} at {:?} s, Flagger {:?} at {:?} s; first conclusive answer per metric at {:?} s\n",
            self.argo_run(),
            self.argo_at,
            self.canary,
            self.flagger_at,
            self.conclusive_at(),
        );
        for (m, seconds) in self.argo.iter().zip(&self.every_second) {
            let line: Vec<String> = seconds
                .iter()
                .map(|(t, v, p)| format!("{t}s {v:?} {p:?}"))
                .collect();
            out += &format!("  {}: {}\n", m.name, line.join(", "));
        }
        out
    }
}
