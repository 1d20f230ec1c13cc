//! The documentation's pages hold together: every alert has a runbook entry its
//! `runbook_url` points to; every relative link resolves; every dependency has a row in the
//! README saying why; the README's front door stays short.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use common::docs::{pages, read, root};

#[test]
fn every_alert_has_a_runbook_entry_its_url_points_to() {
    let rules = read("config/prometheus/alerting-rules.yml");
    let runbook = read("docs/alerts.md");
    let entries: BTreeSet<&str> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(str::trim)
        .collect();
    let mut alerts = BTreeSet::new();
    let mut problems = Vec::new();
    let mut current: Option<&str> = None;
    for line in rules.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("- alert: ") {
            alerts.insert(name.trim());
            if let Some(previous) = current.replace(name.trim()) {
                problems.push(format!("{previous}: no runbook_url"));
            }
        }
        if let Some(url) = line.strip_prefix("runbook_url: ") {
            let Some(alert) = current.take() else {
                problems.push(format!("a runbook_url outside an alert: {url}"));
                continue;
            };
            // Absolute: a page's link must open from Alertmanager, Slack or a pager, where a
            // relative path resolves against nothing (docs/alerts.md, "Runbook links").
            let expected = format!(
                "\"{}/blob/main/docs/alerts.md#{}\"",
                env!("CARGO_PKG_REPOSITORY"),
                alert.to_lowercase()
            );
            if url != expected {
                problems.push(format!("{alert}: runbook_url {url}, expected {expected}"));
            }
        }
    }
    if let Some(last) = current {
        problems.push(format!("{last}: no runbook_url"));
    }
    for alert in &alerts {
        if !entries.contains(alert) {
            problems.push(format!("{alert}: no `### {alert}` in docs/alerts.md"));
        }
    }
    for entry in &entries {
        if !alerts.contains(entry) {
            problems.push(format!("docs/alerts.md: `### {entry}` is no alert"));
        }
    }
    assert!(alerts.len() >= 17, "{alerts:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fence = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        }
        if !fence && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    let mut links = 0;
    for (page, text) in pages() {
        let dir = Path::new(&page)
            .parent()
            .unwrap_or(Path::new(""))
            .to_owned();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let link = &rest[..end];
            rest = &rest[end..];
            if link.contains("://") || link.starts_with("mailto:") || link.contains(' ') {
                continue;
            }
            links += 1;
            let (file, fragment) = link.split_once('#').unwrap_or((link, ""));
            let target = if file.is_empty() {
                root().join(&page)
            } else {
                root().join(&dir).join(file)
            };
            if !target.exists() {
                broken.push(format!("{page}: {link}: no such file"));
                continue;
            }
            if !fragment.is_empty() && target.extension().is_some_and(|e| e == "md") {
                let text = std::fs::read_to_string(&target).unwrap();
                if !anchors(&text).contains(fragment) {
                    broken.push(format!("{page}: {link}: no heading #{fragment}"));
                }
            }
        }
    }
    assert!(links >= 20, "only {links} relative links");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn every_dependency_has_a_row_saying_why() {
    let manifest = read("Cargo.toml");
    let mut deps = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]");
            continue;
        }
        if in_deps && !line.starts_with('#') {
            if let Some((name, _)) = line.split_once('=') {
                deps.insert(name.trim().to_owned());
            }
        }
    }
    let readme = read("README.md");
    let rows: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("| "))
        .map(|l| l.split('|').nth(1).unwrap_or(""))
        .collect();
    let missing: Vec<_> = deps
        .iter()
        .filter(|d| {
            !rows.iter().any(|cell| {
                cell.split([',', ' ', '('])
                    .any(|word| word.trim() == d.as_str())
            })
        })
        .collect();
    assert!(deps.len() > 20, "{deps:?}");
    assert!(
        missing.is_empty(),
        "no row in README's Dependencies: {missing:?}"
    );
}

#[test]
fn the_front_door_is_short() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; the rest belongs in docs/"
    );
}
