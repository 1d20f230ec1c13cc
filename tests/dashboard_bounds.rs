//! Issue 42 item 2: a heatmap in a mixed fleet sums classic buckets and native series
//! converted to the classic bounds by `le`, so the converted `le` must be spelled exactly as
//! the daemon's classic buckets spell theirs, or one bound becomes two rows. The bounds
//! `scripts/dashboards/promql.py` converts to, read from the generated dashboard, against a
//! live daemon's OpenMetrics exposition (what an older, text-only daemon sends too).

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{start_daemon, start_sim};
use inferprobe::sim::SimConfig;

const HEATMAPS: [&str; 4] = [
    "inferprobe_time_to_first_token_seconds",
    "inferprobe_time_per_output_token_seconds",
    "inferprobe_inter_token_latency_seconds",
    "inferprobe_e2e_request_latency_seconds",
];

/// The `le` values a heatmap query of `metric` converts native series to.
fn converted(dashboard: &serde_json::Value, metric: &str) -> BTreeSet<String> {
    let panels = dashboard["panels"].as_array().unwrap();
    let expr = panels
        .iter()
        .filter(|p| p["type"] == "heatmap")
        .filter_map(|p| p["targets"][0]["expr"].as_str())
        .find(|e| e.contains("histogram_fraction(0, ") && e.contains(&format!("{metric}_bucket{{")))
        .unwrap_or_else(|| panic!("no heatmap of {metric}"));
    expr.split("\"le\", \"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heatmap_converts_native_series_to_the_classic_buckets_own_bounds() {
    let sim = start_sim(SimConfig::default()).await;
    let daemon = start_daemon(&format!(
        r#"
        [[targets]]
        name = "t"
        url = "{}"
        model = "m"
        backend = "openai-chat"
        rate = 5
        output_tokens = 3
        "#,
        sim.url()
    ))
    .await;
    daemon
        .wait_for(Duration::from_secs(30), |s| {
            s.sum("inferprobe_requests_total", &[]) >= 1.0
        })
        .await;
    let text = daemon
        .get(
            "/metrics",
            Some("application/openmetrics-text;version=1.0.0"),
        )
        .await
        .text()
        .await
        .unwrap();
    daemon.stop().await;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/dashboards/inferprobe-target.json"
    );
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for metric in HEATMAPS {
        let exported: BTreeSet<String> = text
            .lines()
            .filter(|l| l.starts_with(&format!("{metric}_bucket{{")))
            .filter_map(|l| {
                l.split("le=\"")
                    .nth(1)?
                    .split('"')
                    .next()
                    .map(str::to_owned)
            })
            .collect();
        assert!(exported.len() > 10, "{metric}: {exported:?}");
        assert_eq!(converted(&dashboard, metric), exported, "{metric}");
    }
}
