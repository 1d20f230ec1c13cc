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
        assert!(
            text.contains("SUCCESS: 12 rules found"),
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
