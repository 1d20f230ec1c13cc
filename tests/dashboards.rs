//! The Grafana dashboards in `dashboards/`: importable JSON that follows the conventions
//! every panel relies on (the `datasource` variable, the `target`/`model`/`node`/`pod`
//! filters, `$__rate_interval`, descriptions and units), and that only query metrics the
//! daemon exports or recording rules `config/prometheus/recording-rules.yml` defines.
//! `scripts/prometheus-proof.sh` runs every one of these queries against a real Prometheus.

use std::collections::HashSet;
use std::path::PathBuf;

use serde_json::Value;

#[path = "dashboards/promql.rs"]
mod promql;

use promql::promql_refs;

const DASHBOARDS: [(&str, &str); 2] = [
    ("inferprobe-overview.json", "inferprobe-overview"),
    ("inferprobe-target.json", "inferprobe-target"),
];

/// Counters and gauges the daemon exports, under their exposed names.
const EXPORTED_SERIES: &[&str] = &[
    "inferprobe_canary_checks_total",
    "inferprobe_requests_total",
    "inferprobe_request_errors_total",
    "inferprobe_requests_skipped_total",
    "inferprobe_requests_in_flight",
    "inferprobe_output_tokens_total",
    "inferprobe_prompt_tokens_total",
    "inferprobe_good_requests_total",
    "inferprobe_last_success_timestamp_seconds",
    "inferprobe_connections_opened_total",
    "inferprobe_request_retries_total",
    "inferprobe_slo_objective",
    "inferprobe_slo_threshold_seconds",
    "inferprobe_build_info",
    "inferprobe_config_last_reload_successful",
    "inferprobe_target_rate",
    "inferprobe_discovery_up",
    "inferprobe_discovery_targets",
    "inferprobe_discovery_refused_total",
    "inferprobe_fleet_size",
];

/// Histograms the daemon exports; each has `_bucket`, `_sum` and `_count` series.
const EXPORTED_HISTOGRAMS: &[&str] = &[
    "inferprobe_canary_divergence_position",
    "inferprobe_canary_logprob_drift",
    "inferprobe_time_to_first_token_seconds",
    "inferprobe_time_per_output_token_seconds",
    "inferprobe_inter_token_latency_seconds",
    "inferprobe_e2e_request_latency_seconds",
    "inferprobe_request_output_tokens",
    "inferprobe_request_prompt_tokens",
    "inferprobe_schedule_lag_seconds",
];

/// The four latency histograms every dashboard shows.
const LATENCY_HISTOGRAMS: [&str; 4] = [
    "inferprobe_time_to_first_token_seconds",
    "inferprobe_time_per_output_token_seconds",
    "inferprobe_inter_token_latency_seconds",
    "inferprobe_e2e_request_latency_seconds",
];

/// The only datasource reference a panel or query may carry.
const DATASOURCE_UID: &str = "${datasource}";

/// Matchers every selector of a raw per-target series must carry; recording rules are
/// aggregated by target, so they carry only the first. `pod` is a discovered replica's
/// (its "All" value `.*` also matches the series of configured targets, which have none).
const TARGET_MATCHER: &str = r#"target=~"$target""#;
const NODE_MATCHER: &str = r#"node=~"$node""#;
/// The site label (scripts/site_labels.py): behind Thanos or Mimir, two clusters with a
/// target of the same name must stay apart, so every selector filters on it too.
const CLUSTER_MATCHER: &str = r#"cluster=~"$cluster""#;
const RAW_MATCHERS: [&str; 5] = [
    CLUSTER_MATCHER,
    TARGET_MATCHER,
    r#"model=~"$model""#,
    NODE_MATCHER,
    r#"pod=~"$pod""#,
];
/// The inference server's own histograms (vLLM 0.32, SGLang), beside the probe's in the
/// target dashboard's "Probe vs server" row: scraped from the server pods, so they carry
/// no `target`; they are filtered by the site, the replica and the served model name, and
/// joined to the probe's replicas on (cluster, namespace, pod).
const SERVER_HISTOGRAMS: &[&str] = &[
    "vllm:time_to_first_token_seconds",
    "vllm:request_time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "sglang:time_to_first_token_seconds",
    "sglang:inter_token_latency_seconds",
    "sglang:e2e_request_latency_seconds",
];
const SERVER_MATCHERS: [&str; 3] = [CLUSTER_MATCHER, r#"pod=~"$pod""#, r#"model_name=~"$model""#];

fn is_server_series(name: &str) -> bool {
    ["_bucket", "_sum", "_count"].iter().any(|suffix| {
        name.strip_suffix(suffix)
            .is_some_and(|base| SERVER_HISTOGRAMS.contains(&base))
    })
}

/// Series of the probe process rather than of a target, and the matchers they carry
/// instead: a discovery block's name is the `target` label of what it finds, and `node`
/// (the probe's, from the PodMonitor) is on every series a probe pod exports.
const DISCOVERY_MATCHER: &str = r#"discovery=~"$target""#;
const PROBE_SERIES: &[(&str, &[&str])] = &[
    (
        "inferprobe_discovery_up",
        &[CLUSTER_MATCHER, DISCOVERY_MATCHER, NODE_MATCHER],
    ),
    (
        "inferprobe_discovery_targets",
        &[CLUSTER_MATCHER, DISCOVERY_MATCHER, NODE_MATCHER],
    ),
    (
        "inferprobe_discovery_refused_total",
        &[CLUSTER_MATCHER, DISCOVERY_MATCHER, NODE_MATCHER],
    ),
    ("inferprobe_fleet_size", &[CLUSTER_MATCHER, NODE_MATCHER]),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Dashboard {
    file: &'static str,
    uid: &'static str,
    text: String,
    json: Value,
}

fn dashboards() -> Vec<Dashboard> {
    DASHBOARDS
        .iter()
        .map(|&(file, uid)| {
            let path = root().join("dashboards").join(file);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let json = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not valid JSON: {e}", path.display()));
            Dashboard {
                file,
                uid,
                text,
                json,
            }
        })
        .collect()
}

/// Names of the recording rules, from the `- record: NAME` lines of the rules file.
fn recording_rules() -> HashSet<String> {
    let path = root().join("config/prometheus/recording-rules.yml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rules: HashSet<String> = text
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("- record:"))
        .map(|name| {
            name.trim()
                .trim_matches(|c| c == '"' || c == '\'')
                .to_owned()
        })
        .collect();
    assert!(
        !rules.is_empty(),
        "{}: no `- record:` lines",
        path.display()
    );
    rules
}

fn is_exported(name: &str) -> bool {
    EXPORTED_SERIES.contains(&name)
        || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
            name.strip_suffix(suffix)
                .is_some_and(|base| EXPORTED_HISTOGRAMS.contains(&base))
        })
}

/// Every panel, rows included, and the panels nested inside (collapsed) rows.
fn all_panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(panels: &'a Value, out: &mut Vec<&'a Value>) {
        for panel in panels.as_array().into_iter().flatten() {
            out.push(panel);
            if let Some(nested) = panel.get("panels") {
                walk(nested, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    assert!(!out.is_empty(), "a dashboard without panels");
    out
}

fn is_row(panel: &Value) -> bool {
    panel["type"] == "row"
}

fn title(panel: &Value) -> String {
    format!(
        "panel {} {:?}",
        panel["id"],
        panel["title"].as_str().unwrap_or("")
    )
}

/// Every query of every (non-row) panel: (panel description for messages, expr).
fn exprs(dashboard: &Value) -> Vec<(String, String)> {
    queries(dashboard)
        .into_iter()
        .map(|(panel, expr, _)| (panel, expr))
        .collect()
}

fn variable<'a>(dashboard: &'a Value, name: &str) -> &'a Value {
    dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no template variable `{name}`"))
}

/// Collects failures so one run reports all of them.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, ok: bool, message: impl FnOnce() -> String) {
        if !ok {
            self.0.push(message());
        }
    }

    fn assert_none(self) {
        assert!(
            self.0.is_empty(),
            "{} problem(s):\n  {}",
            self.0.len(),
            self.0.join("\n  ")
        );
    }
}

#[test]
fn dashboards_are_importable_json_with_stable_uids() {
    let mut f = Failures::default();
    for d in dashboards() {
        let j = &d.json;
        f.check(j["uid"] == d.uid, || {
            format!("{}: uid {} (want {:?})", d.file, j["uid"], d.uid)
        });
        f.check(j["schemaVersion"].as_u64().is_some_and(|v| v >= 39), || {
            format!(
                "{}: schemaVersion {} (want >= 39)",
                d.file, j["schemaVersion"]
            )
        });
        f.check(j["title"].as_str().is_some_and(|t| !t.is_empty()), || {
            format!("{}: no title", d.file)
        });
        // The export format with `__inputs` needs a datasource picked at import; these
        // dashboards use a `datasource` variable instead.
        for key in ["__inputs", "__requires", "__elements"] {
            f.check(j.get(key).is_none(), || format!("{}: has `{key}`", d.file));
        }
        f.check(!d.text.contains("${DS_"), || {
            format!("{}: contains `${{DS_`", d.file)
        });
        f.check(j["id"].is_null(), || {
            format!("{}: `id` must be null (Grafana assigns it)", d.file)
        });
    }
    f.assert_none();
}

#[test]
fn every_panel_and_query_uses_the_datasource_variable() {
    let want = serde_json::json!({"type": "prometheus", "uid": DATASOURCE_UID});
    let mut f = Failures::default();
    for d in dashboards() {
        let ds = variable(&d.json, "datasource");
        f.check(
            ds["type"] == "datasource" && ds["query"] == "prometheus",
            || {
                format!(
                    "{}: `datasource` must be a prometheus datasource variable",
                    d.file
                )
            },
        );
        for panel in all_panels(&d.json).into_iter().filter(|p| !is_row(p)) {
            f.check(panel["datasource"] == want, || {
                format!(
                    "{} {}: datasource {}",
                    d.file,
                    title(panel),
                    panel["datasource"]
                )
            });
            for target in panel["targets"].as_array().into_iter().flatten() {
                f.check(target["datasource"] == want, || {
                    format!(
                        "{} {} refId {}: datasource {}",
                        d.file,
                        title(panel),
                        target["refId"],
                        target["datasource"]
                    )
                });
            }
        }
        for v in d.json["templating"]["list"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if v["type"] == "query" {
                f.check(v["datasource"] == want, || {
                    format!(
                        "{}: variable {}: datasource {}",
                        d.file, v["name"], v["datasource"]
                    )
                });
            }
        }
    }
    f.assert_none();
}

#[test]
fn target_model_node_and_pod_variables_come_from_requests_total() {
    let mut f = Failures::default();
    for d in dashboards() {
        for name in ["target", "model", "node", "pod"] {
            let v = variable(&d.json, name);
            let query = v["query"]
                .as_str()
                .or_else(|| v["query"]["query"].as_str())
                .unwrap_or("");
            f.check(v["type"] == "query", || {
                format!("{}: `{name}` is not a query variable", d.file)
            });
            f.check(
                query.starts_with("label_values(inferprobe_requests_total")
                    && query.ends_with(&format!(", {name})")),
                || format!("{}: `{name}` query {query:?}", d.file),
            );
            // One target in depth on the target dashboard; everything else multi-select.
            let single = d.uid == "inferprobe-target" && name == "target";
            f.check(v["multi"] == !single && v["includeAll"] == !single, || {
                format!("{}: `{name}` multi/includeAll", d.file)
            });
            // ".*" also matches series without the label (no `node` outside a DaemonSet, no
            // `pod` on a configured target's series).
            f.check(single || v["allValue"] == ".*", || {
                format!("{}: `{name}` allValue must be \".*\"", d.file)
            });
        }
    }
    f.assert_none();
}

#[test]
fn every_panel_has_a_unique_id_a_description_a_unit_and_a_query() {
    let mut f = Failures::default();
    for d in dashboards() {
        let mut ids = HashSet::new();
        for panel in all_panels(&d.json) {
            let id = panel["id"].as_u64();
            f.check(id.is_some_and(|id| ids.insert(id)), || {
                format!("{} {}: missing or duplicate id", d.file, title(panel))
            });
            let grid = &panel["gridPos"];
            f.check(
                grid["x"].as_u64().unwrap_or(99) + grid["w"].as_u64().unwrap_or(99) <= 24,
                || format!("{} {}: gridPos beyond 24 columns", d.file, title(panel)),
            );
            if is_row(panel) {
                continue;
            }
            let non_empty = |v: &Value| v.as_str().is_some_and(|s| !s.trim().is_empty());
            f.check(non_empty(&panel["title"]), || {
                format!("{} {}: no title", d.file, title(panel))
            });
            f.check(non_empty(&panel["description"]), || {
                format!("{} {}: no description", d.file, title(panel))
            });
            f.check(non_empty(&panel["fieldConfig"]["defaults"]["unit"]), || {
                format!("{} {}: no fieldConfig.defaults.unit", d.file, title(panel))
            });
            let targets = panel["targets"].as_array().map_or(&[][..], Vec::as_slice);
            f.check(!targets.is_empty(), || {
                format!("{} {}: no targets", d.file, title(panel))
            });
            let mut ref_ids = HashSet::new();
            for target in targets {
                f.check(non_empty(&target["expr"]), || {
                    format!("{} {}: a target without expr", d.file, title(panel))
                });
                f.check(
                    target["refId"].as_str().is_some_and(|r| ref_ids.insert(r)),
                    || format!("{} {}: missing or duplicate refId", d.file, title(panel)),
                );
            }
            if panel["type"] == "heatmap" {
                for target in targets {
                    let expr = target["expr"].as_str().unwrap_or("");
                    // A distribution over time: bucket rates, Grafana reading `le`.
                    let distribution = target["format"] == "heatmap" && expr.contains("_bucket{");
                    // Or one row per value of a label (a replica per row): time series named
                    // by a label the query groups by, drawn as they are (not recalculated)
                    // on ordinal rows.
                    let rows = target["format"] == "time_series"
                        && panel["options"]["calculate"] == false
                        && panel["options"]["rowsFrame"]["layout"] == "unknown"
                        && target["legendFormat"]
                            .as_str()
                            .and_then(|l| l.strip_prefix("{{")?.strip_suffix("}}"))
                            .is_some_and(|label| grouped_by(expr, label));
                    f.check(distribution || rows, || {
                        format!(
                            "{} {}: a heatmap is fed by _bucket series with format heatmap, or \
                             by time series one per label value (legendFormat {{{{label}}}}, \
                             grouped by it) with calculate false and rowsFrame layout unknown",
                            d.file,
                            title(panel)
                        )
                    });
                }
            }
        }
    }
    f.assert_none();
}

/// Whether `expr` aggregates `by (...)` a list holding `label`.
fn grouped_by(expr: &str, label: &str) -> bool {
    expr.split("by (").skip(1).any(|rest| {
        rest.split(')')
            .next()
            .is_some_and(|list| list.split(',').any(|l| l.trim() == label))
    })
}

#[test]
fn the_site_label_is_a_variable_and_in_every_grouping_by_target() {
    let mut f = Failures::default();
    for d in dashboards() {
        let v = variable(&d.json, "cluster");
        let query = v["query"]["query"]
            .as_str()
            .or(v["query"].as_str())
            .unwrap_or("");
        f.check(
            query == "label_values(inferprobe_requests_total, cluster)",
            || format!("{}: `cluster` query {query:?}", d.file),
        );
        f.check(v["includeAll"] == true && v["allValue"] == ".*", || {
            format!(
                "{}: `cluster` must offer All as \".*\" (series without it match)",
                d.file
            )
        });
        for (panel, expr) in exprs(&d.json) {
            for key in ["target", "pod", "discovery", "category", "reason"] {
                f.check(
                    !grouped_by(&expr, key) || grouped_by(&expr, "cluster"),
                    || {
                        format!(
                            "{} {panel}: grouped by {key} but not by cluster: {expr:?}",
                            d.file
                        )
                    },
                );
            }
        }
    }
    f.assert_none();
}

#[test]
fn every_query_filters_on_the_template_variables() {
    let mut f = Failures::default();
    for d in dashboards() {
        for (panel, expr) in exprs(&d.json) {
            let refs = promql_refs(&expr);
            f.check(refs.bare_matchers == 0, || {
                format!(
                    "{} {panel}: a selector without a metric name in {expr:?}",
                    d.file
                )
            });
            f.check(!refs.selectors.is_empty(), || {
                format!("{} {panel}: no metric in {expr:?}", d.file)
            });
            for (name, matchers) in &refs.selectors {
                let matchers = matchers.as_deref().unwrap_or("");
                let required: &[&str] =
                    if let Some((_, probe)) = PROBE_SERIES.iter().find(|(n, _)| n == name) {
                        probe
                    } else if is_server_series(name) {
                        &SERVER_MATCHERS
                    } else if name.starts_with("inferprobe_") {
                        &RAW_MATCHERS
                    } else {
                        &[CLUSTER_MATCHER, TARGET_MATCHER]
                    };
                for m in required {
                    f.check(matchers.contains(m), || {
                        format!("{} {panel}: `{name}` lacks {m} in {expr:?}", d.file)
                    });
                }
            }
        }
    }
    f.assert_none();
}

/// Every query of every (non-row) panel: (panel, expr, whether it is an instant query).
fn queries(dashboard: &Value) -> Vec<(String, String, bool)> {
    all_panels(dashboard)
        .into_iter()
        .filter(|panel| !is_row(panel))
        .flat_map(|panel| {
            panel["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |target| {
                    let expr = target["expr"].as_str().unwrap_or("").to_owned();
                    (title(panel), expr, target["instant"] == true)
                })
        })
        .collect()
}

#[test]
fn rates_use_rate_interval() {
    let rules = recording_rules();
    let mut f = Failures::default();
    for d in dashboards() {
        for (panel, expr, instant) in queries(&d.json) {
            let refs = promql_refs(&expr);
            let only_rules = refs
                .selectors
                .iter()
                .all(|(name, _)| name.starts_with("inferprobe:") && rules.contains(name));
            // An instant query (a table "over the time range") may take the whole range.
            let window = |w: &str| w == "$__rate_interval" || (instant && w == "$__range");
            if (expr.contains("rate(") || expr.contains("increase(")) && !only_rules {
                f.check(
                    refs.ranges.iter().any(|r| window(r)),
                    || {
                        format!(
                            "{} {panel}: rate without $__rate_interval (or $__range, instant): {expr:?}",
                            d.file
                        )
                    },
                );
            }
            // No fixed windows anywhere (recording rules carry their own).
            for range in &refs.ranges {
                f.check(window(range), || {
                    format!("{} {panel}: window [{range}] in {expr:?}", d.file)
                });
            }
        }
    }
    f.assert_none();
}

#[test]
fn queries_use_only_exported_metrics_and_recording_rules() {
    let rules = recording_rules();
    let mut f = Failures::default();
    for d in dashboards() {
        for (panel, expr) in exprs(&d.json) {
            for (name, _) in promql_refs(&expr).selectors {
                let known = is_exported(&name) || is_server_series(&name);
                f.check(known || rules.contains(&name), || {
                    format!("{} {panel}: unknown metric `{name}` in {expr:?}", d.file)
                });
            }
        }
    }
    f.assert_none();
}

/// What the dashboards are for: the panels that must not silently disappear.
#[test]
fn dashboards_cover_latency_errors_slos_nodes_and_replicas() {
    let all = dashboards();
    let by_uid = |uid: &str| &all.iter().find(|d| d.uid == uid).unwrap().json;
    let overview: Vec<String> = exprs(by_uid("inferprobe-overview"))
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    let target = by_uid("inferprobe-target");
    let target_exprs: Vec<String> = exprs(target).into_iter().map(|(_, e)| e).collect();
    let mut f = Failures::default();
    let has = |exprs: &[String], needles: &[&str]| {
        exprs
            .iter()
            .any(|e| needles.iter().all(|needle| e.contains(needle)))
    };

    for metric in LATENCY_HISTOGRAMS {
        for q in ["0.5", "0.9", "0.99"] {
            let quantile = format!(
                "histogram_quantile({q}, sum by (cluster, le, target) (rate({metric}_bucket{{"
            );
            f.check(has(&overview, &[&quantile]), || {
                format!("overview: no p{q} of {metric}")
            });
        }
        let heatmap = all_panels(target).into_iter().any(|p| {
            p["type"] == "heatmap"
                && p["targets"][0]["expr"]
                    .as_str()
                    .is_some_and(|e| e.contains(&format!("{metric}_bucket{{")))
        });
        f.check(heatmap, || format!("target: no heatmap of {metric}"));
    }
    for needle in [
        "inferprobe_request_errors_total",
        "inferprobe_requests_skipped_total",
        "inferprobe_good_requests_total",
        "inferprobe_output_tokens_total",
        "inferprobe:sli_errors:ratio_rate1h",
        "inferprobe:sli_ttft_slow:ratio_rate1h",
        "inferprobe:sli_tpot_slow:ratio_rate1h",
    ] {
        f.check(has(&overview, &[needle]), || {
            format!("overview: no {needle}")
        });
    }
    f.check(
        has(
            &overview,
            &[
                "sum by (cluster, category)",
                "inferprobe_request_errors_total",
            ],
        ),
        || "overview: no errors by category".into(),
    );
    // Probe vs server: the server's TTFT, TPOT, E2EL, queue and prefill beside the probe's.
    for needle in [
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:request_time_per_output_token_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket",
        "vllm:request_queue_time_seconds_sum",
        "vllm:request_prefill_time_seconds_sum",
        "sglang:time_to_first_token_seconds_bucket",
    ] {
        f.check(
            has(&target_exprs, &[needle, "on (cluster, namespace, pod)"]),
            || format!("target: no probe-vs-server panel joining {needle}"),
        );
    }
    for needle in [
        "inferprobe_canary_checks_total",
        "inferprobe:replica_canary_bad:increase30m",
        "inferprobe:replica_canary_drift:p90_rate30m",
        "inferprobe_canary_divergence_position_bucket",
    ] {
        f.check(has(&target_exprs, &[needle]), || {
            format!("target: no correctness panel on {needle}")
        });
    }
    f.check(
        has(&target_exprs, &["inferprobe:error_budget_remaining:ratio"]),
        || "target: no error budget remaining".into(),
    );
    for sli in ["errors", "ttft_slow", "tpot_slow"] {
        let burn_windows = target_exprs
            .iter()
            .filter(|e| {
                e.contains(&format!("inferprobe:sli_{sli}:ratio_rate"))
                    && e.contains("/ on (cluster, target)")
                    && e.contains("inferprobe:error_budget:ratio")
            })
            .count();
        f.check(burn_windows >= 3, || {
            format!("target: {sli} burn rate at {burn_windows} windows (want >= 3)")
        });
    }
    f.check(
        has(
            &target_exprs,
            &[
                "sum by (cluster, le, node)",
                "inferprobe_time_to_first_token_seconds_bucket",
            ],
        ),
        || "target: no TTFT percentile by node".into(),
    );
    let error_table = all_panels(target).into_iter().any(|p| {
        p["type"] == "table"
            && p["targets"][0]["expr"]
                .as_str()
                .is_some_and(|e| e.contains("by (cluster, category)"))
    });
    f.check(error_table, || "target: no error-category table".into());

    // Per replica (a discovered target's pods): a TTFT heatmap with a row per pod, a table
    // of the worst replicas over the range (TTFT p90 and error ratio by pod and node), and
    // what InferprobeReplicaOutlier compares.
    let replica_heatmap = all_panels(target).into_iter().any(|p| {
        p["type"] == "heatmap"
            && p["targets"][0]["expr"].as_str().is_some_and(|e| {
                e.contains("inferprobe_time_to_first_token_seconds_bucket{")
                    && grouped_by(e, "pod")
                    && e.contains(r#"pod!="""#)
            })
    });
    f.check(replica_heatmap, || {
        "target: no TTFT heatmap by replica".into()
    });
    let worst = all_panels(target).into_iter().find(|p| {
        p["type"] == "table"
            && p["targets"][0]["expr"].as_str().is_some_and(|e| {
                e.starts_with("sort_desc(histogram_quantile(0.9")
                    && e.contains("inferprobe_time_to_first_token_seconds_bucket{")
                    && ["pod", "node"].iter().all(|l| grouped_by(e, l))
                    && e.contains("[$__range]")
            })
    });
    f.check(
        worst.is_some_and(|p| {
            p["targets"].as_array().into_iter().flatten().any(|t| {
                t["expr"].as_str().is_some_and(|e| {
                    e.contains("inferprobe_request_errors_total{")
                        && grouped_by(e, "pod")
                        && e.contains("[$__range]")
                })
            })
        }),
        || "target: no worst-replicas table (TTFT p90 and error ratio by pod and node, over the range)".into(),
    );
    for rule in [
        "inferprobe:replica_ttft_seconds:p90_rate15m",
        "inferprobe:target_replica_ttft_seconds:median_p90_rate15m",
    ] {
        f.check(has(&target_exprs, &[rule]), || {
            format!("target: no {rule} (what InferprobeReplicaOutlier compares)")
        });
    }
    // Discovery and the fleet, in the overview.
    for needle in [
        "inferprobe_discovery_up",
        "inferprobe_discovery_targets",
        "inferprobe_discovery_refused_total",
        "inferprobe_fleet_size",
        "inferprobe_target_rate",
    ] {
        f.check(has(&overview, &[needle]), || {
            format!("overview: no {needle}")
        });
    }
    f.assert_none();
}
