//! The Prometheus rules shipped in config/prometheus/: `promtool check rules` accepts them
//! and `promtool test rules` proves every alert fires on the series built to break it and
//! stays quiet otherwise (config/prometheus/tests/).

use std::path::Path;
use std::process::Command;

fn promtool(args: &[&str]) -> Option<(bool, String)> {
    let binary = std::env::var("PROMTOOL").unwrap_or_else(|_| "promtool".into());
    let out = match Command::new(&binary)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
    {
        Ok(out) => out,
        Err(e) if std::env::var_os("INFERPROBE_REQUIRE_PROMTOOL").is_none() => {
            eprintln!("SKIPPED: {binary} not runnable ({e}); .ci/run installs it");
            return None;
        }
        Err(e) => panic!("{binary}: {e}"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), text))
}

fn files(dir: &str, suffix: &str) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    files.sort();
    files
}

#[test]
fn promtool_accepts_the_rules() {
    let rules = files("config/prometheus", ".yml");
    assert!(rules.len() >= 2, "{rules:?}");
    let mut args = vec!["check", "rules"];
    args.extend(rules.iter().map(String::as_str));
    if let Some((ok, text)) = promtool(&args) {
        assert!(ok, "{text}");
        // promtool counts what it loaded: every `- alert:` of the file, none dropped.
        let alerts = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("config/prometheus/alerting-rules.yml"),
        )
        .unwrap()
        .lines()
        .filter(|l| l.trim_start().starts_with("- alert: "))
        .count();
        assert!(alerts >= 25, "{alerts}");
        assert!(
            text.contains(&format!("SUCCESS: {alerts} rules found")),
            "every alert is there:\n{text}"
        );
    }
}

#[test]
fn every_alert_fires_and_stays_quiet_when_it_should() {
    let tests = files("config/prometheus/tests", ".test.yml");
    let mut args = vec!["test", "rules"];
    args.extend(tests.iter().map(String::as_str));
    if let Some((ok, text)) = promtool(&args) {
        assert!(ok, "{text}");
    }
    // Each alert is exercised by the tests, firing at least once.
    let alerts = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/prometheus/alerting-rules.yml"),
    )
    .unwrap();
    let tested: String = tests
        .iter()
        .map(|t| std::fs::read_to_string(t).unwrap())
        .collect();
    for name in alerts
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
    {
        let fires = tested.split("alertname: ").skip(1).any(|case| {
            case.starts_with(name) && !case.lines().nth(1).unwrap_or("").contains("exp_alerts: []")
        });
        assert!(fires, "no test makes {name} fire");
    }
}

/// Every threshold `slo` accepts (serde's own list of `RawSlo`'s fields, from the error an
/// unknown one gets) has its SLI at every window and a fast and a slow burn alert, and the
/// groups are what scripts/gen-slo-rules.py writes (issue 33, item 3).
#[test]
fn every_slo_threshold_is_burned_against() {
    let error =
        serde_json::from_value::<inferprobe::config::RawSlo>(serde_json::json!({ "not a key": 0 }))
            .unwrap_err()
            .to_string();
    let list = error.split_once("expected one of ").map_or("", |(_, l)| l);
    let thresholds: Vec<&str> = list
        .split(", ")
        .map(|f| f.trim().trim_matches('`'))
        .filter(|f| *f != "objective")
        .collect();
    assert_eq!(thresholds, ["ttft", "tpot", "itl", "e2el"], "{error}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |f: &str| std::fs::read_to_string(root.join(f)).unwrap();
    let (recording, alerting) = (
        read("config/prometheus/recording-rules.yml"),
        read("config/prometheus/alerting-rules.yml"),
    );
    for slo in thresholds {
        for window in ["5m", "30m", "1h", "2h", "6h", "1d", "3d"] {
            let rule = format!("record: inferprobe:sli_{slo}_slow:ratio_rate{window}\n");
            assert!(recording.contains(&rule), "{rule}");
        }
        let name = slo.to_uppercase();
        for speed in ["Fast", "Slow"] {
            let alert = format!("- alert: Inferprobe{name}BudgetBurn{speed}\n");
            let start = alerting.find(&alert).unwrap_or_else(|| panic!("{alert}"));
            let body = &alerting[start..];
            let body = &body[..body[1..].find("- alert:").map_or(body.len(), |e| e + 1)];
            assert!(body.contains(&format!("slo: {slo}\n")), "{body}");
            assert!(
                body.contains(&format!("inferprobe:sli_{slo}_slow:")),
                "{body}"
            );
        }
    }
    let out = Command::new("python3")
        .args(["scripts/gen-slo-rules.py", "--check"])
        .current_dir(root)
        .output()
        .expect("python3 scripts/gen-slo-rules.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn site_labels(labels: &str, out: &Path) {
    let status = Command::new("python3")
        .args(["scripts/site_labels.py", "--labels", labels, "--out"])
        .arg(out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("python3 scripts/site_labels.py");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
}

/// Every `by (...)`/`on (...)` list of `text` that names a target-level label.
fn target_groupings(text: &str) -> Vec<String> {
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut lists = Vec::new();
    for keyword in ["by (", "on ("] {
        for rest in text.split(keyword).skip(1) {
            let list = rest.split(')').next().unwrap_or("");
            let items: Vec<&str> = list.split(',').map(str::trim).collect();
            if items
                .iter()
                .any(|i| ["target", "pod", "discovery", "instance", "reason"].contains(i))
            {
                lists.push(list.to_owned());
            }
        }
    }
    lists
}

#[test]
fn the_site_labels_are_one_setting_kept_in_every_aggregation() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The shipped files are exactly what the setting's default (`cluster`) makes.
    let again = tempfile::tempdir().unwrap();
    site_labels("cluster", again.path());
    for file in [
        "config/prometheus/recording-rules.yml",
        "config/prometheus/alerting-rules.yml",
        "dashboards/inferprobe-overview.json",
        "dashboards/inferprobe-target.json",
    ] {
        let shipped = std::fs::read_to_string(root.join(file)).unwrap();
        let made = std::fs::read_to_string(again.path().join(file)).unwrap();
        assert!(
            shipped == made,
            "{file} is not what scripts/site_labels.py makes: run it with --in-place"
        );
        for list in target_groupings(&shipped) {
            assert!(
                list.split(',').any(|i| i.trim() == "cluster"),
                "{file}: ({list}) lacks cluster"
            );
        }
    }
    // Another setting: every grouping carries both labels, and promtool accepts the rules.
    let other = tempfile::tempdir().unwrap();
    site_labels("region,cluster", other.path());
    let rules = other.path().join("config/prometheus");
    for name in ["recording-rules.yml", "alerting-rules.yml"] {
        let text = std::fs::read_to_string(rules.join(name)).unwrap();
        for list in target_groupings(&text) {
            assert!(list.starts_with("region, cluster,"), "{name}: ({list})");
        }
        // The site from the series, else from the evaluating Prometheus's external labels;
        // the per-site no-data branch groups by the site labels alone.
        assert!(
            (text.contains(
                "{{ with $labels.region }} in {{ . }}{{ else }}\
                 {{ with $externalLabels.region }} in {{ . }}{{ end }}{{ end }}"
            ) && text.contains("group by (region, cluster) (inferprobe_build_info)"))
                || name.starts_with("recording")
        );
    }
    let dashboard =
        std::fs::read_to_string(other.path().join("dashboards/inferprobe-target.json")).unwrap();
    assert!(
        dashboard.contains(r#"region=~\"$region\", cluster=~\"$cluster\", target=~\"$target\""#)
    );
    let rec = rules.join("recording-rules.yml");
    let alert = rules.join("alerting-rules.yml");
    let (rec, alert) = (rec.to_string_lossy(), alert.to_string_lossy());
    if let Some((ok, text)) = promtool(&["check", "rules", &rec, &alert]) {
        assert!(ok, "{text}");
    }
}
