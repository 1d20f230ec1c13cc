//! The rollout gates shipped in config/rollouts/ (issue 25, item 4): the Argo Rollouts
//! AnalysisTemplate and the Flagger MetricTemplates have the fields their controllers read,
//! query only series the daemon exports, and their queries, run by `promtool test rules`
//! on a new version that answers like the baseline and one that does not, give the values
//! their conditions pass and fail on.

use std::path::Path;
use std::process::Command;

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

/// The Argo template: each metric's query with its args filled in, and its condition.
fn argo(target: &str, hash: &str) -> Vec<(String, String, String)> {
    let docs = docs("config/rollouts/argo-analysistemplate.yaml");
    assert_eq!(docs.len(), 1);
    let t = &docs[0];
    assert_eq!(str_at(t, &["apiVersion"]), "argoproj.io/v1alpha1");
    assert_eq!(str_at(t, &["kind"]), "AnalysisTemplate");
    let args: Vec<(&str, Option<&str>)> = t["spec"]["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| (str_at(a, &["name"]), a["value"].as_str()))
        .collect();
    let fill = |text: &str| {
        let mut text = text.replace("{{args.target}}", target);
        text = text.replace("{{args.canary-hash}}", hash);
        for (name, value) in &args {
            if let Some(value) = value {
                text = text.replace(&format!("{{{{args.{name}}}}}"), value);
            }
        }
        assert!(!text.contains("{{"), "an argument is not declared: {text}");
        text
    };
    t["spec"]["metrics"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|m| {
            assert!(m["interval"].as_str().is_some() && m["failureLimit"].as_u64().is_some());
            let query = str_at(m, &["provider", "prometheus", "query"]);
            assert!(str_at(m, &["provider", "prometheus", "address"]).starts_with("http"));
            (
                str_at(m, &["name"]).to_owned(),
                fill(query).trim().to_owned(),
                fill(str_at(m, &["successCondition"])),
            )
        })
        .collect()
}

/// The Flagger templates: name and query with Flagger's variables filled in.
fn flagger(namespace: &str, target: &str) -> Vec<(String, String)> {
    docs("config/rollouts/flagger-metrictemplates.yaml")
        .iter()
        .map(|t| {
            assert_eq!(str_at(t, &["apiVersion"]), "flagger.app/v1beta1");
            assert_eq!(str_at(t, &["kind"]), "MetricTemplate");
            assert_eq!(str_at(t, &["spec", "provider", "type"]), "prometheus");
            let query = str_at(t, &["spec", "query"])
                .replace("{{ namespace }}", namespace)
                .replace("{{ target }}", target)
                .replace("{{ interval }}", "10m");
            assert!(!query.contains("{{"), "{query}");
            (
                str_at(t, &["metadata", "name"]).to_owned(),
                query.trim().to_owned(),
            )
        })
        .collect()
}

/// A `result[0] <op> number` condition, evaluated.
fn holds(condition: &str, value: f64) -> bool {
    let rest = condition.trim().strip_prefix("result[0]").unwrap().trim();
    let (op, number) = rest.split_at(rest.find(|c: char| c.is_ascii_digit()).unwrap());
    let number: f64 = number.trim().parse().unwrap();
    match op.trim() {
        "<=" => value <= number,
        ">=" => value >= number,
        "==" => value == number,
        other => panic!("condition {other}"),
    }
}

#[test]
fn the_gates_pass_an_upgrade_that_answers_alike_and_fail_one_that_does_not() {
    // Two canary groups of the block `llm` in namespace `inference`, checked once a minute
    // for 20 minutes: `good` matches the baseline on every check; `bad` diverges on half
    // and fails a known answer now and then.
    let series = |name: &str, pod: &str, group: &str, result: &str, per_minute: f64| {
        format!(
            "      - series: '{name}{{target=\"llm\",namespace=\"inference\",pod=\"{pod}\",group=\"{group}\",result=\"{result}\"}}'\n        values: '0+{per_minute}x20'\n"
        )
    };
    let mut input = String::new();
    for (pod, group, diverged, wrong) in [
        ("llm-6b7c8d9f5-aaaaa", "good", 0.0, 0.0),
        ("llm-5f4e3d2c1-bbbbb", "bad", 1.0, 0.5),
    ] {
        let baseline = "inferprobe_canary_baseline_checks_total";
        input += &series(baseline, pod, group, "match", 1.0);
        input += &series(baseline, pod, group, "diverged", diverged);
        input += &series(
            "inferprobe_canary_checks_total",
            pod,
            group,
            "wrong_answer",
            wrong,
        );
    }
    let mut cases = String::new();
    let mut expect = |expr: &str, value: f64| {
        let expr = expr.replace('\'', "''");
        cases += &format!(
            "      - expr: '{expr}'\n        eval_time: 20m\n        exp_samples:\n          - labels: '{{}}'\n            value: {value}\n"
        );
    };
    // Argo: the new version's hash picks its group.
    for (hash, scored, divergence, wrong, passes) in [
        ("good", 10.0, 0.0, 0.0, true),
        ("bad", 20.0, 0.5, 5.0, false),
    ] {
        let metrics = argo("llm", hash);
        let names: Vec<&str> = metrics.iter().map(|(n, ..)| n.as_str()).collect();
        assert_eq!(
            names,
            ["baseline-checks", "baseline-divergence", "known-answers"]
        );
        let values = [scored, divergence, wrong];
        for ((name, query, condition), value) in metrics.iter().zip(values) {
            expect(query, value);
            if name != "baseline-checks" {
                assert_eq!(
                    holds(condition, value),
                    passes,
                    "{hash} {name}: {value} {condition}"
                );
            } else {
                assert!(holds(condition, value), "{hash}: enough checks");
            }
        }
    }
    // Flagger: the canary Deployment's pods by name; here the `bad` one is the canary.
    let templates = flagger("inference", "llm");
    let names: Vec<&str> = templates.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["inferprobe-baseline-divergence", "inferprobe-wrong-answers"]
    );
    // Both pods match `llm-<hash>-<suffix>`: sums over both groups.
    expect(&templates[0].1, 10.0 / 30.0);
    expect(&templates[1].1, 5.0);
    let test = format!(
        "rule_files: []\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{input}    promql_expr_test:\n{cases}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gate.test.yml");
    std::fs::write(&path, &test).unwrap();
    let binary = std::env::var("PROMTOOL").unwrap_or_else(|_| "promtool".into());
    let out = match Command::new(&binary)
        .arg("test")
        .arg("rules")
        .arg(&path)
        .output()
    {
        Ok(out) => out,
        Err(e) if std::env::var_os("INFERPROBE_REQUIRE_PROMTOOL").is_none() => {
            eprintln!("SKIPPED: {binary} not runnable ({e}); .ci/run installs it");
            return;
        }
        Err(e) => panic!("{binary}: {e}"),
    };
    assert!(
        out.status.success(),
        "{}{}\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The primary's pods (one segment more) are not the canary's.
#[test]
fn flaggers_pod_pattern_leaves_out_the_primary() {
    let query = &flagger("inference", "llm")[0].1;
    let pattern = query
        .split("pod=~\"")
        .nth(1)
        .and_then(|p| p.split('"').next())
        .unwrap();
    let re = regex::Regex::new(&format!("^(?:{pattern})$")).unwrap();
    assert!(re.is_match("llm-6b7c8d9f5-x2x9z"));
    assert!(!re.is_match("llm-primary-6b7c8d9f5-x2x9z"));
}
