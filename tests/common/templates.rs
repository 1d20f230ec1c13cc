//! The shipped rollout templates (config/rollouts/) read as their controllers read them:
//! Argo Rollouts substitutes `{{args.NAME}}` everywhere in a metric (conditions, query,
//! address) and fails on an argument without a value; Flagger renders `{{ namespace }}`,
//! `{{ target }}` and `{{ interval }}` (the metric's interval, the query's window).

use std::collections::BTreeMap;
use std::path::Path;

use serde_yaml_ng::Value;

use super::gates::ArgoLimits;

pub fn docs(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

pub fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut at = v;
    for key in path {
        at = &at[*key];
    }
    at.as_str()
        .unwrap_or_else(|| panic!("{} is not a string in {v:?}", path.join(".")))
}

/// One metric of the Argo template, its arguments substituted.
#[derive(Clone, Debug)]
pub struct ArgoMetric {
    pub name: String,
    pub query: String,
    pub success: Option<String>,
    pub failure: Option<String>,
    pub limits: ArgoLimits,
}

/// The Argo AnalysisTemplate with `args` (name, value) given as a Rollout gives them; the
/// others take the template's defaults. Argo substitutes `{{args.NAME}}` everywhere in a
/// metric (conditions, query, address); an argument without a value is an error.
pub fn argo(given: &[(&str, &str)]) -> Vec<ArgoMetric> {
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
    // Unset with an interval: indefinite (Argo's `EffectiveCount`), never 0.
    let count = |m: &Value| m["count"].as_u64().filter(|c| *c > 0).map(|c| c as usize);
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
                    count: count(m),
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
pub fn flagger(namespace: &str, target: &str, interval: &str) -> Vec<(String, String)> {
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
pub fn flagger_range(template: &str) -> (Option<f64>, Option<f64>) {
    match template {
        "inferprobe-baseline-divergence" => (Some(0.0), Some(0.1)),
        "inferprobe-wrong-answers" => (Some(0.0), Some(0.0)),
        "inferprobe-sampler" | "inferprobe-adapters" => (Some(0.0), Some(0.0)),
        other => panic!("a template the docs do not cover: {other}"),
    }
}
