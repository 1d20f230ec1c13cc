//! The rollout gates shipped in config/rollouts/ (issue 31), tried as a user meets them: a
//! live daemon probes a pool mid-rollout (simulator replicas, file_sd blocks), a real
//! Prometheus scrapes it, and each template's query — arguments substituted as Argo
//! Rollouts and Flagger substitute them — is run against that Prometheus at the times the
//! controller would, from the first moment of the analysis, and judged with the
//! controller's own semantics for empty, NaN and multi-sample answers (tests/common/gates.rs).
//!
//! Time is scaled 30 to 1 so the analysis fits in CI: the canary checks a replica every 2 s
//! (the default 60 s), Prometheus scrapes every second (a 30 s scrape), Argo measures every
//! 10 s (the template's 5m), Flagger's analysis ticks every 2 s (1m), and the query window
//! is 20 s (10m).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::canary::sim;
use common::gates::{self, ArgoLimits, Canary, Phase};
use common::prometheus::Prometheus;
use common::{Sim, start_daemon, start_sim};
use serde_yaml_ng::Value;

fn docs(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut at = v;
    for key in path {
        at = &at[*key];
    }
    at.as_str()
        .unwrap_or_else(|| panic!("{} is not a string in {v:?}", path.join(".")))
}

/// One metric of the Argo template, its arguments substituted.
#[derive(Clone, Debug)]
struct ArgoMetric {
    name: String,
    query: String,
    success: Option<String>,
    failure: Option<String>,
    limits: ArgoLimits,
}

/// The Argo AnalysisTemplate with `args` (name, value) given as a Rollout gives them; the
/// others take the template's defaults. Argo substitutes `{{args.NAME}}` everywhere in a
/// metric (conditions, query, address); an argument without a value is an error.
fn argo(given: &[(&str, &str)]) -> Vec<ArgoMetric> {
    let docs = docs("config/rollouts/argo-analysistemplate.yaml");
    assert_eq!(docs.len(), 1);
    let t = &docs[0];
    assert_eq!(str_at(t, &["apiVersion"]), "argoproj.io/v1alpha1");
    assert_eq!(str_at(t, &["kind"]), "AnalysisTemplate");
    let mut args = BTreeMap::new();
    for a in t["spec"]["args"].as_sequence().unwrap() {
        let name = str_at(a, &["name"]).to_owned();
        let value = given
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| (*v).to_owned())
            .or_else(|| a["value"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("argument {name} has no value"));
        args.insert(name, value);
    }
    let fill = |text: &str| {
        let mut text = text.to_owned();
        for (name, value) in &args {
            text = text.replace(&format!("{{{{args.{name}}}}}"), value);
        }
        assert!(!text.contains("{{"), "an argument is not declared: {text}");
        text
    };
    let limit = |m: &Value, key: &str, default: u64| m[key].as_u64().unwrap_or(default) as usize;
    t["spec"]["metrics"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|m| {
            assert!(m["interval"].as_str().is_some(), "{m:?}");
            let address = fill(str_at(m, &["provider", "prometheus", "address"]));
            assert!(address.starts_with("http"), "{address}");
            ArgoMetric {
                name: str_at(m, &["name"]).to_owned(),
                query: fill(str_at(m, &["provider", "prometheus", "query"])),
                success: m["successCondition"].as_str().map(fill),
                failure: m["failureCondition"].as_str().map(fill),
                limits: ArgoLimits {
                    count: limit(m, "count", 0),
                    failure_limit: limit(m, "failureLimit", 0),
                    inconclusive_limit: limit(m, "inconclusiveLimit", 0),
                    consecutive_error_limit: limit(m, "consecutiveErrorLimit", 4),
                },
            }
        })
        .collect()
}

/// The Flagger templates: name and query, rendered as Flagger's `RenderQuery` does for a
/// Canary of `target` in `namespace` whose metric has `interval`.
fn flagger(namespace: &str, target: &str, interval: &str) -> Vec<(String, String)> {
    docs("config/rollouts/flagger-metrictemplates.yaml")
        .iter()
        .map(|t| {
            assert_eq!(str_at(t, &["apiVersion"]), "flagger.app/v1beta1");
            assert_eq!(str_at(t, &["kind"]), "MetricTemplate");
            assert_eq!(str_at(t, &["spec", "provider", "type"]), "prometheus");
            let query = str_at(t, &["spec", "query"])
                .replace("{{ namespace }}", namespace)
                .replace("{{ target }}", target)
                .replace("{{ interval }}", interval);
            assert!(!query.contains("{{"), "{query}");
            (str_at(t, &["metadata", "name"]).to_owned(), query)
        })
        .collect()
}

/// The thresholdRange the Flagger template's header tells a user to set, per template.
fn flagger_range(template: &str) -> (Option<f64>, Option<f64>) {
    match template {
        "inferprobe-baseline-divergence" => (Some(0.0), Some(0.1)),
        "inferprobe-wrong-answers" => (Some(0.0), Some(0.0)),
        other => panic!("a template the docs do not cover: {other}"),
    }
}

#[test]
fn the_templates_have_what_their_controllers_read() {
    let metrics = argo(&[("target", "llm"), ("canary-hash", "7b6c4d9f8")]);
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["baseline-divergence", "known-answers"]);
    for m in &metrics {
        // Waiting for data is Inconclusive, never Error: each query ends in a fallback.
        assert!(
            m.query.trim_end().ends_with("or on() vector(-1)"),
            "{}",
            m.query
        );
        assert!(m.success.is_some() && m.failure.is_some(), "{m:?}");
        assert!(m.limits.count > m.limits.inconclusive_limit, "{m:?}");
        assert!(m.query.contains(r#"group="7b6c4d9f8""#), "{}", m.query);
    }
    let templates = flagger("inference", "llm", "10m");
    let names: Vec<&str> = templates.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["inferprobe-baseline-divergence", "inferprobe-wrong-answers"]
    );
    for (_, query) in &templates {
        // The canary by its group, which a DaemonSet's pod names cannot tell.
        assert!(
            query.contains(r#"group="llm""#) && !query.contains("pod=~"),
            "{query}"
        );
    }
}

#[test]
/// The controllers' semantics as written down in tests/common/gates.rs.
fn conditions_as_argo_evaluates_them() {
    let c = "result[0] >= 0 && result[0] <= 0.1";
    assert_eq!(gates::condition(c, &[0.05]), Ok(true));
    assert_eq!(gates::condition(c, &[-1.0]), Ok(false));
    assert_eq!(gates::condition(c, &[f64::NAN]), Ok(false));
    assert!(
        gates::condition(c, &[]).is_err(),
        "an empty result is an error"
    );
    assert_eq!(
        gates::condition("len(result) > 0 && result[0] > 1", &[]),
        Ok(false)
    );
    assert_eq!(
        gates::condition("result[0] < 0 || result[0] > 1", &[2.0]),
        Ok(true)
    );
    assert_eq!(gates::condition("false", &[]), Ok(false));
}

#[test]
fn phases_as_argo_assesses_them() {
    let only_success =
        |r: Result<Vec<f64>, String>| gates::argo_measurement(&r, Some("result[0] <= 0.1"), None);
    assert_eq!(only_success(Ok(vec![])), Phase::Error);
    assert_eq!(only_success(Ok(vec![f64::NAN])), Phase::Failed);
    let both = |v: f64| {
        gates::argo_measurement(&Ok(vec![v]), Some("result[0] == 0"), Some("result[0] > 0"))
    };
    assert_eq!(both(-1.0), Phase::Inconclusive);
    let limits = ArgoLimits {
        count: 3,
        failure_limit: 0,
        inconclusive_limit: 1,
        consecutive_error_limit: 4,
    };
    use Phase::*;
    assert_eq!(
        gates::argo_metric(&[Inconclusive, Successful, Successful], limits),
        Successful
    );
    assert_eq!(
        gates::argo_metric(&[Inconclusive, Inconclusive], limits),
        Inconclusive
    );
    assert_eq!(gates::argo_metric(&[Successful, Failed], limits), Failed);
    assert_eq!(gates::argo_metric(&[Error; 5], limits), Error);
    assert_eq!(gates::argo_metric(&[Successful], limits), Running);
}

/// A pod's file_sd labels.
type Labels = Vec<(&'static str, String)>;

/// A file_sd file of `(simulator, labels)` members, each its own pod.
fn write_pool(path: &Path, members: &[(&Sim, Labels)]) {
    let groups: Vec<serde_json::Value> = members
        .iter()
        .map(|(sim, labels)| {
            let labels: serde_json::Map<_, _> = labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_str().into()))
                .collect();
            serde_json::json!({ "targets": [sim.addr.to_string()], "labels": labels })
        })
        .collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::Value::Array(groups).to_string()).unwrap();
    std::fs::rename(&tmp, path).unwrap(); // whole, as a real file_sd writer must
}

/// A prompts file: the built-in prompts compared by logprobs, and one known answer the
/// baseline's weights give and other weights do not.
async fn prompts(dir: &Path, good: &Sim, other: &Sim) -> std::path::PathBuf {
    let answers = |sim: &Sim| {
        let args = inferprobe::canary::record::RecordArgs {
            url: Some(sim.url()),
            model: Some("m".into()),
            max_tokens: Some(16),
            out: dir.join("unused.json"),
            ..Default::default()
        };
        async move { inferprobe::canary::record::record(&args).await.unwrap() }
    };
    let (good, other) = (answers(good).await, answers(other).await);
    let (known, _) = good
        .answers
        .iter()
        .zip(&other.answers)
        .find(|(g, o)| {
            g.answer.text.trim() != o.answer.text.trim() && !g.answer.text.trim().is_empty()
        })
        .expect("a prompt the two weights answer differently");
    let mut lines: Vec<String> = inferprobe::endpoint::canary::BUILT_IN
        .iter()
        .filter(|p| **p != known.prompt)
        .map(|p| serde_json::json!({ "prompt": p }).to_string())
        .collect();
    lines.push(
        serde_json::json!({
            "prompt": known.prompt,
            "expect": format!("^{}", regex::escape(&known.answer.text)),
        })
        .to_string(),
    );
    let path = dir.join("prompts.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

/// A file_sd discovery block whose replicas are checked every 2 s.
fn block(name: &str, file: &Path, prompts: &Path, canary: &str) -> String {
    format!(
        r#"
        [[discovery]]
        name = "{name}"
        source = "file"
        path = "{}"
        refresh = "100ms"
        [discovery.template]
        backend = "openai-chat"
        model = "m"
        rate = 0.001
        canary = {{ interval = "2s", max_tokens = 16, prompts = "{}", {canary} }}
        "#,
        file.display(),
        prompts.display()
    )
}

const STABLE: &str = "5d8f7c9b4";
const ALIKE: &str = "7b6c4d9f8";
const OTHER: &str = "6c5b4a3f2";

/// Seconds between Argo's measurements (the template's 5m, scaled), Flagger's ticks (1m).
const ARGO_EVERY: u64 = 10;
const FLAGGER_EVERY: u64 = 2;
/// The Canary's analysis, as the Flagger template's header advises.
const FLAGGER_ITERATIONS: usize = 10;
const FLAGGER_THRESHOLD: usize = 10;

/// What one candidate version's analysis did: Argo's measurements per metric, its phase
/// per metric at every second, and Flagger's canary.
struct Analysis {
    argo: Vec<ArgoMetric>,
    measurements: Vec<Vec<Phase>>,
    every_second: Vec<Vec<(u64, Vec<f64>, Phase)>>,
    flagger: Vec<(String, String)>,
    canary: Canary,
}

impl Analysis {
    fn new(canary_hash: &str, namespace: &str) -> Self {
        let argo = argo(&[
            ("target", "llm"),
            ("canary-hash", canary_hash),
            ("window", "20s"),
            ("prometheus", "http://127.0.0.1:9090"),
        ]);
        let n = argo.len();
        Self {
            argo,
            measurements: vec![Vec::new(); n],
            every_second: vec![Vec::new(); n],
            flagger: flagger(namespace, "llm", "20s"),
            canary: Canary::Progressing {
                iterations: 0,
                failed_checks: 0,
            },
        }
    }

    /// Second `t` of the analysis: every Argo query (a measurement when Argo would take
    /// one), and a Flagger tick when one is due.
    async fn step(&mut self, prometheus: &Prometheus, t: u64) {
        for (i, m) in self.argo.iter().enumerate() {
            let answer = prometheus.query(&m.query).await;
            let phase =
                gates::argo_measurement(&answer, m.success.as_deref(), m.failure.as_deref());
            let values = answer.clone().unwrap_or_default();
            self.every_second[i].push((t, values, phase));
            if t % ARGO_EVERY == 0 && self.measurements[i].len() < m.limits.count {
                self.measurements[i].push(phase);
            }
        }
        if t % FLAGGER_EVERY == 0 {
            let mut answers = Vec::new();
            for (name, query) in &self.flagger {
                answers.push((name.clone(), prometheus.query(query).await));
            }
            self.canary = gates::flagger_tick(
                self.canary,
                t == 0,
                FLAGGER_ITERATIONS,
                FLAGGER_THRESHOLD,
                || {
                    answers.iter().all(|(name, answer)| {
                        let (min, max) = flagger_range(name);
                        gates::flagger_passes(answer, min, max)
                    })
                },
            );
        }
    }

    /// Argo's AnalysisRun: the worst of its metrics.
    fn argo_run(&self) -> Phase {
        self.argo
            .iter()
            .zip(&self.measurements)
            .map(|(m, taken)| gates::argo_metric(taken, m.limits))
            .max()
            .unwrap()
    }

    /// Every Argo measurement taken and Flagger decided.
    fn done(&self) -> bool {
        let taken = self
            .argo
            .iter()
            .zip(&self.measurements)
            .all(|(m, t)| t.len() >= m.limits.count);
        taken && !matches!(self.canary, Canary::Progressing { .. })
    }

    fn report(&self, label: &str) -> String {
        let mut out = format!(
            "{label}: Argo {:?}, Flagger {:?}\n",
            self.argo_run(),
            self.canary
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

/// Issue 31, items 1, 2 and 4: from the first second of the analysis a healthy new version
/// (the same weights) is never Failed nor Error — Inconclusive while few checks are in —
/// and ends Successful in Argo and promoted in Flagger; one with other weights (which also
/// fails a known answer) ends Failed and rolled back within the analysis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gates_pass_a_healthy_version_and_stop_other_weights_on_a_real_prometheus() {
    let dir = tempfile::tempdir().unwrap();
    let mut stable = Vec::new();
    for _ in 0..9 {
        stable.push(start_sim(sim(0)).await);
    }
    let (alike, other) = (start_sim(sim(0)).await, start_sim(sim(7)).await);
    let (flagger_alike, flagger_other) = (start_sim(sim(0)).await, start_sim(sim(7)).await);
    let prompts = prompts(dir.path(), &stable[0], &other).await;

    // Argo: replicas grouped by their template hash; Flagger: by the `app` label it
    // renames on the primary, one block per namespace.
    let argo_file = dir.path().join("argo.json");
    let argo_pod = |hash: &str, i: usize| -> Labels {
        vec![
            ("pod", format!("llm-{hash}-{i:05}")),
            ("namespace", "inference".into()),
            ("version", hash.into()),
        ]
    };
    let flagger_pod = |app: &str, ns: &str, i: usize| -> Labels {
        vec![
            ("pod", format!("{app}-{i:05}")),
            ("namespace", ns.into()),
            ("app", app.into()),
        ]
    };
    let argo_stable: Vec<_> = (0..3).map(|i| (&stable[i], argo_pod(STABLE, i))).collect();
    write_pool(&argo_file, &argo_stable);
    let flagger_files = [dir.path().join("good.json"), dir.path().join("bad.json")];
    let primaries: Vec<Vec<_>> = ["good", "bad"]
        .iter()
        .enumerate()
        .map(|(n, ns)| {
            (0..3)
                .map(|i| (&stable[3 + 3 * n + i], flagger_pod("llm-primary", ns, i)))
                .collect()
        })
        .collect();
    for (file, members) in flagger_files.iter().zip(&primaries) {
        write_pool(file, members);
    }
    let by_app = r#"group_by = ["app"], baseline = "llm-primary""#;
    let toml = format!(
        "seed = 5\n{}{}{}",
        block("llm", &argo_file, &prompts, r#"group_by = ["version"]"#),
        block("llm-good", &flagger_files[0], &prompts, by_app),
        block("llm-bad", &flagger_files[1], &prompts, by_app),
    );
    let daemon = start_daemon(&toml).await;
    let Some(prometheus) = Prometheus::start(daemon.addr).await else {
        daemon.stop().await;
        return;
    };
    // The stable versions have answered every prompt, and Prometheus has seen them.
    let stable_checks = r#"sum by (target) (inferprobe_canary_checks_total{result="match"}) >= 27"#;
    let waited = tokio::time::timeout(Duration::from_secs(60), async {
        while prometheus.query(stable_checks).await.map_or(0, |v| v.len()) < 3 {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "{}", daemon.scrape().await.text);

    // The rollout: each pool gets its new version's pod, and the analysis starts now.
    let mut argo_rolled = argo_stable.clone();
    argo_rolled.push((&alike, argo_pod(ALIKE, 0)));
    argo_rolled.push((&other, argo_pod(OTHER, 0)));
    write_pool(&argo_file, &argo_rolled);
    let canaries = [(&flagger_alike, "good"), (&flagger_other, "bad")];
    for ((file, members), (canary, ns)) in flagger_files.iter().zip(&primaries).zip(canaries) {
        let mut rolled = members.clone();
        rolled.push((canary, flagger_pod("llm", ns, 0)));
        write_pool(file, &rolled);
    }
    let mut healthy = Analysis::new(ALIKE, "good");
    let mut bad = Analysis::new(OTHER, "bad");
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for t in 0..=90 {
        ticks.tick().await;
        healthy.step(&prometheus, t).await;
        bad.step(&prometheus, t).await;
        if healthy.done() && bad.done() {
            break;
        }
    }
    let report = format!(
        "{}{}",
        healthy.report("same weights"),
        bad.report("other weights")
    );
    eprintln!("{report}");

    // Item 1: the healthy version's `diverged` series is there, at 0, not missing.
    let diverged = format!(
        r#"inferprobe_canary_baseline_checks_total{{target="llm", group="{ALIKE}", result="diverged"}}"#
    );
    assert_eq!(prometheus.query(&diverged).await, Ok(vec![0.0]), "{report}");
    for seconds in &healthy.every_second {
        for (t, values, phase) in seconds {
            assert_eq!(
                values.len(),
                1,
                "at {t}s one number, never nothing\n{report}"
            );
            assert!(
                !matches!(phase, Phase::Failed | Phase::Error),
                "the healthy version at {t}s: {phase:?}\n{report}"
            );
        }
    }
    // Item 2: too few checks is Inconclusive, not a pass: the first measurement waited.
    assert_eq!(
        healthy.measurements[0].first(),
        Some(&Phase::Inconclusive),
        "{report}"
    );
    assert_eq!(healthy.argo_run(), Phase::Successful, "{report}");
    assert_eq!(healthy.canary, Canary::Promoted, "{report}");
    assert_eq!(bad.argo_run(), Phase::Failed, "{report}");
    for (m, taken) in bad.argo.iter().zip(&bad.measurements) {
        assert_eq!(
            gates::argo_metric(taken, m.limits),
            Phase::Failed,
            "{}\n{report}",
            m.name
        );
    }
    assert_eq!(bad.canary, Canary::RolledBack, "{report}");
    daemon.stop().await;
}
