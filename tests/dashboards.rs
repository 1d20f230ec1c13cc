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
#[path = "dashboards/queries.rs"]
mod queries;
#[path = "dashboards/series.rs"]
mod series;

use promql::promql_refs;
use series::*;

const DASHBOARDS: [(&str, &str); 2] = [
    ("inferprobe-overview.json", "inferprobe-overview"),
    ("inferprobe-target.json", "inferprobe-target"),
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
        // A histogram's native series, under its own name (a protobuf scrape).
        || NATIVE_HISTOGRAMS.contains(&name)
        || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
            name.strip_suffix(suffix)
                .is_some_and(is_exported_histogram)
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

/// Whether `expr` aggregates `by (...)` a list holding `label`.
fn grouped_by(expr: &str, label: &str) -> bool {
    expr.split("by (").skip(1).any(|rest| {
        rest.split(')')
            .next()
            .is_some_and(|list| list.split(',').any(|l| l.trim() == label))
    })
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

/// The JSON is generated from its source (`scripts/dashboards/`, issue 42 item 3), as the
/// rules are: an edit to the JSON alone is caught here.
#[test]
fn the_dashboards_are_what_their_source_generates() {
    let out = std::process::Command::new("python3")
        .args(["scripts/gen-dashboards.py", "--check"])
        .current_dir(root())
        .output()
        .expect("python3 scripts/gen-dashboards.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
