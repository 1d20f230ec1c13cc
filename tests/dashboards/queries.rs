//! The dashboards' queries: filtered by the template variables and the site label, rates
//! over `$__rate_interval`, only exported series and recording rules, and the panels that
//! must not silently disappear.

use super::*;

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
                "histogram_quantile({q}, sum by (cluster, target, le) (rate({metric}_bucket{{"
            );
            let native =
                format!("histogram_quantile({q}, sum by (cluster, target) ((rate({metric}{{");
            f.check(has(&overview, &[&native, &quantile]), || {
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
                "sum by (cluster, node, le)",
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
                e.starts_with("sort_desc((histogram_quantile(0.9")
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

/// Every query over a per-target histogram reads it in every `[metrics] histograms` mode
/// and in a fleet that mixes them (issue 34, issue 42 item 2): both kinds, with the same
/// matchers, and a side picked per series, never per aggregate (`scripts/dashboards/promql.py`
/// says why): a quantile per kind, labelled `histograms`, the classic side without the
/// series that also have a native histogram; a heatmap on the classic bounds with the
/// native-only series converted; a count or sum that picks per series inside its `sum`.
/// `scripts/prometheus-proof.sh` runs them on each kind and on a mixed fleet, where it checks
/// each member is shown once.
#[test]
fn every_histogram_query_reads_native_and_classic_histograms() {
    let mut f = Failures::default();
    let mut seen = 0;
    for d in dashboards() {
        for (panel, expr) in exprs(&d.json) {
            let selectors = promql_refs(&expr).selectors;
            for metric in NATIVE_HISTOGRAMS {
                let matchers = |name: &str| -> Vec<Option<String>> {
                    selectors
                        .iter()
                        .filter(|(n, _)| n == name)
                        .map(|(_, m)| m.clone())
                        .collect()
                };
                let native = matchers(metric);
                // A heatmap keeps the classic buckets at the shared bounds (`le=~`).
                let without_le = |m: Option<String>| {
                    m.map(|m| {
                        m.split(", ")
                            .filter(|part| !part.starts_with("le=~"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                };
                let classic: Vec<_> = ["_bucket", "_sum", "_count"]
                    .iter()
                    .flat_map(|suffix| matchers(&format!("{metric}{suffix}")))
                    .map(without_le)
                    .collect();
                if native.is_empty() && classic.is_empty() {
                    continue;
                }
                seen += 1;
                let same = |a: &[Option<String>], b: &[Option<String>]| {
                    a.iter().all(|m| b.contains(m)) && b.iter().all(|m| a.contains(m))
                };
                f.check(
                    !native.is_empty() && !classic.is_empty() && same(&native, &classic),
                    || {
                        format!(
                            "{} {panel}: `{metric}` not read both ways in {expr:?}",
                            d.file
                        )
                    },
                );
                // Each kind its own line, or (a table's row, a heatmap's row per pod) one
                // value per group: `native or classic`, a group's native members where it
                // mixes them.
                let row = expr.contains(") or histogram_quantile(")
                    && (expr.starts_with("(histogram_quantile(")
                        || expr.starts_with("sort_desc((histogram_quantile("));
                let kinds = row
                    || (expr.contains("\"histograms\", \"native\"")
                        && expr.contains("\"histograms\", \"classic\""));
                // The native side leaves out series now exported as classic alone (a switch
                // back to classic: their native data is frozen at the switch).
                let live = expr.contains(&format!(" unless ({metric}_count{{"));
                let quantile = expr.contains("histogram_quantile(")
                    && kinds
                    && live
                    && expr.contains(&format!("{metric}_bucket{{"))
                    && expr.contains(" unless ignoring (le) ");
                let heatmap = expr.starts_with("sum by (le) (")
                    && expr.contains("histogram_fraction(0, ")
                    && expr.contains(&format!(" unless rate({metric}_count{{"));
                let per_series = live
                    && ["count", "sum"].iter().all(|side| {
                        expr.contains(&format!("(histogram_{side}((rate({metric}{{"))
                            && expr.contains(&format!(") or rate({metric}_{side}{{"))
                    });
                f.check(quantile || heatmap || per_series, || {
                    format!(
                        "{} {panel}: not mixed-fleet safe (scripts/dashboards/promql.py): {expr:?}",
                        d.file
                    )
                });
            }
        }
    }
    assert!(seen >= 45, "only {seen} histogram queries");
    f.assert_none();
}
