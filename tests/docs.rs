//! The documentation cannot go stale (README.md and docs/): every TOML block passes
//! `inferprobe check`; every metric family the daemon and the simulator export is in
//! docs/metrics.md, and every one documented there is exported; every configuration key the
//! schema accepts is documented, and every documented key is accepted. (Runbooks, links,
//! dependencies and the README's length: tests/docs_pages.rs.)

use crate::common;

use std::collections::BTreeSet;

use common::docs::{pages, read, root};
use common::{start_daemon, start_sim};
use inferprobe::config::{
    RawCanary, RawConfig, RawDiscovery, RawKubernetes, RawMedia, RawSlo, RawTarget, RawTracing,
    RawValidation,
};
use inferprobe::sim::SimConfig;

/// Fenced blocks of `lang`: (line of the fence, info string after the language, body).
fn blocks(text: &str, lang: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let mut words = info.split_whitespace();
                    if words.next() == Some(lang) {
                        open = Some((i + 1, words.collect::<Vec<_>>().join(" "), String::new()));
                    } else if !info.trim().is_empty() || trimmed == "```" {
                        // Another language's block: skip to its end.
                        open = Some((0, "skip".into(), String::new()));
                    }
                }
            }
            Some((at, info, body)) => {
                if trimmed.starts_with("```") {
                    if *at > 0 {
                        out.push((*at, info.clone(), std::mem::take(body)));
                    }
                    open = None;
                } else {
                    body.push_str(line.strip_prefix("  ").unwrap_or(line));
                    body.push('\n');
                }
            }
        }
    }
    out
}

/// A fragment (target keys, a section) is completed by this configuration, which
/// docs/configuration.md states; a block marked `toml fragment` is left alone on purpose
/// (it names files or variables only a real deployment has).
const MINIMAL_TARGET: &str =
    "[[targets]]\nname = \"docs\"\nurl = \"http://127.0.0.1:8000\"\nmodel = \"m\"\n";

fn inferprobe(args: &[&str], envs: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args(args)
        .current_dir(root())
        .env_remove("INFERPROBE_CONFIG")
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

/// What a DaemonSet's downward API sets, which the examples and docs read.
const POD_ENV: [(&str, &str); 4] = [
    ("NODE_NAME", "node-1"),
    ("POD_NAME", "inferprobe-x"),
    ("POD_NAMESPACE", "inferprobe"),
    ("OPENAI_API_KEY", "sk-docs"),
];

/// Where `check` fails a TOML block, or `None`.
fn check_toml(toml: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("block.toml");
    std::fs::write(&path, toml).unwrap();
    let out = inferprobe(&["check", "--config", path.to_str().unwrap()], &POD_ENV);
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn every_toml_block_passes_check() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for (page, text) in pages() {
        for (line, info, body) in blocks(&text, "toml") {
            if info == "fragment" {
                continue;
            }
            let complete = body.contains("[[targets]]") || body.contains("[[discovery]]");
            let toml = if complete {
                body.clone()
            } else if body.trim_start().starts_with('[') {
                format!("{body}\n{MINIMAL_TARGET}")
            } else {
                // Bare keys: a target's.
                format!("{MINIMAL_TARGET}{body}")
            };
            checked += 1;
            if let Some(error) = check_toml(&toml) {
                failures.push(format!("{page}:{line}: {}\n{body}", error.trim()));
            }
        }
    }
    assert!(checked >= 4, "only {checked} TOML blocks found");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Issue 41 item 6: the rollout gate's configuration as its files show it passes `check`:
/// the Flagger templates' header block, and the shipped Kubernetes configuration with its
/// commented canary line on. The mounted prompts file is read from the repository (the
/// pod's `/etc/inferprobe/canary/prompts.jsonl` is the ConfigMap made of it).
#[test]
fn the_rollout_gates_configuration_passes_check() {
    let prompts = root().join("config/kubernetes/canary-prompts.jsonl");
    let mounted = |text: &str| {
        text.replace(
            "/etc/inferprobe/canary/prompts.jsonl",
            prompts.to_str().unwrap(),
        )
    };
    let header = read("config/rollouts/flagger-metrictemplates.yaml");
    let block: Vec<&str> = header
        .lines()
        .skip_while(|l| !l.contains("[[discovery]]"))
        .take_while(|l| l.trim() != "#")
        .map(|l| l.trim_start_matches('#').trim_start())
        .collect();
    assert!(block.len() > 5, "{block:?}");
    let toml = mounted(&block.join("\n"));
    assert!(toml.contains("canary = {"), "{toml}");
    assert_eq!(check_toml(&toml), None, "{toml}");
    let shipped = read("config/kubernetes/inferprobe.toml");
    let on = mounted(&shipped.replace("# canary = {", "canary = {"));
    assert_ne!(on, mounted(&shipped), "the commented canary line");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inferprobe.toml");
    std::fs::write(&path, &on).unwrap();
    // As README's pre-flight runs it: the API key is the cluster's Secret.
    let args = ["check", "--no-secrets", "--config", path.to_str().unwrap()];
    let out = inferprobe(&args, &POD_ENV);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("3 known answer(s)"), "{said}");
}

/// Metric families in an exposition: `# TYPE name kind` (counters without `_total`).
fn exported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(|n| n.strip_suffix("_total").unwrap_or(n).to_owned())
        .collect()
}

/// The names in docs/metrics.md's tables (first column, several per cell allowed), as
/// family names: `requests_total{category}` is family `inferprobe_requests`.
fn documented_metrics() -> BTreeSet<String> {
    let text = read("docs/metrics.md");
    let mut names = BTreeSet::new();
    // Rows of the tables headed `| metric |` (not, say, the histogram modes' table).
    let mut in_metrics_table = false;
    for line in text.lines() {
        if !line.starts_with('|') {
            in_metrics_table = false;
            continue;
        }
        if line.starts_with("| metric |") {
            in_metrics_table = true;
        }
        if !in_metrics_table || !line.starts_with("| `") {
            continue;
        }
        let cell = line.split('|').nth(1).unwrap_or("");
        for name in cell.split('`').skip(1).step_by(2) {
            let name = name.split('{').next().unwrap_or("").trim();
            if name.is_empty() {
                continue;
            }
            let full = if name.starts_with("vllm:") || name.starts_with("process_") {
                name.to_owned()
            } else {
                format!("inferprobe_{name}")
            };
            names.insert(full.strip_suffix("_total").unwrap_or(&full).to_owned());
        }
    }
    names
}

/// A rollout's comparisons with its baseline group, and a node-local pool's votes: no
/// series until a discovered pool has them (Kubernetes, two versions); cached prompt
/// tokens: none until a server reports them (the daemon here is scraped before a probe);
/// a session's per-turn series: none until its turns ran.
const ONLY_WHEN_USED: [(&str, &str); 31] = [
    ("inferprobe_reasoning_tokens", "tests/reasoning.rs"),
    (
        "inferprobe_time_to_first_answer_token_seconds",
        "tests/reasoning.rs",
    ),
    (
        "inferprobe_prompt_cache_write_tokens",
        "src/metrics/tests/lifecycle.rs",
    ),
    ("inferprobe_connection_phase_seconds", "tests/tls.rs"),
    (
        "inferprobe_tls_earliest_cert_expiry_timestamp_seconds",
        "tests/tls.rs",
    ),
    ("inferprobe_adapter_checks", "tests/adapters.rs"),
    ("inferprobe_adapter_recorded", "tests/adapters.rs"),
    ("inferprobe_ratelimit_remaining", "tests/quota.rs"),
    ("inferprobe_ratelimit_limit", "tests/quota.rs"),
    (
        "inferprobe_ratelimit_reset_timestamp_seconds",
        "tests/quota.rs",
    ),
    ("inferprobe_retry_after_seconds", "tests/quota.rs"),
    (
        "inferprobe_adapter_recorded_other_version",
        "tests/adapters/gate.rs",
    ),
    (
        "inferprobe_adapter_informative_prompts",
        "tests/adapters.rs",
    ),
    (
        "inferprobe_adapter_uninformative_prompts",
        "tests/adapters.rs",
    ),
    (
        "inferprobe_canary_baseline_checks",
        "tests/canary_groups.rs",
    ),
    ("inferprobe_canary_votes", "tests/canary_groups.rs"),
    (
        "inferprobe_prompt_cached_tokens",
        "tests/sim_prefix_cache.rs",
    ),
    ("inferprobe_session_turn_ttft_seconds", "tests/session.rs"),
    ("inferprobe_session_turn_e2el_seconds", "tests/session.rs"),
    (
        "inferprobe_session_turn_time_to_call_seconds",
        "tests/session.rs",
    ),
    ("inferprobe_session_routed_cache", "tests/session.rs"),
    ("inferprobe_session_turn_cache", "tests/session.rs"),
    ("inferprobe_session_prompt_tokens", "tests/session.rs"),
    ("inferprobe_session_cached_tokens", "tests/session.rs"),
    ("inferprobe_session_output_tokens", "tests/session.rs"),
    ("inferprobe_session_routed_turns", "tests/session.rs"),
    ("inferprobe_session_replica_switches", "tests/session.rs"),
    (
        "inferprobe_session_served_window_tokens",
        "tests/session.rs",
    ),
    ("inferprobe_session_depth_tokens", "tests/session.rs"),
    (
        "inferprobe_sampler_calibration_statistic",
        "tests/sampler.rs",
    ),
    ("inferprobe_sampler_calibration_p_value", "tests/sampler.rs"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_exported_metric_is_documented_and_every_documented_one_exported() {
    let sim = start_sim(SimConfig::default()).await;
    // A target with a canary (structured prompts among its prompts: their series are made
    // per capability) and a discovery block, so every family is registered.
    let dir = tempfile::tempdir().unwrap();
    let file = common::pool_file(dir.path(), &[(&sim.url(), &[])]);
    // Known answers have series of their own (the rollout gate's denominator).
    let known = dir.path().join("known.jsonl");
    std::fs::write(&known, r#"{"prompt": "What is 2 + 2?", "expect": "4"}"#).unwrap();
    let toml = format!(
        r#"
        [tracing]
        otlp_endpoint = "http://127.0.0.1:9"
        [[targets]]
        name = "t"
        url = "{}"
        model = "m"
        rate = 0.001
        slo = {{ ttft = "1s", objective = 0.99 }}
        canary = {{ interval = "1h", structured = true }}
        prefix_cache = {{ interval = "1h", objective = 0.9 }}
        session = {{ interval = "1h" }}
        sampler = {{ interval = "1h" }}
        adapters = {{ interval = "1h" }}
        [[targets]]
        name = "k"
        url = "{}"
        model = "m"
        rate = 0.001
        canary = {{ interval = "1h", warmup = 0, prompts = "{}" }}
        [[discovery]]
        name = "pool"
        source = "file"
        path = "{}"
        [discovery.template]
        model = "m"
        rate = 0.001
        "#,
        sim.url(),
        sim.url(),
        known.display(),
        file.display()
    );
    // The simulator's series exist once it has served a request.
    let served = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", sim.url()))
        .body(r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}"#)
        .send()
        .await
        .unwrap();
    assert!(served.status().is_success());
    let daemon = start_daemon(&toml).await;
    let text = daemon.get("/metrics", None).await.text().await.unwrap();
    daemon.stop().await;
    let served = reqwest::get(format!("{}/metrics", sim.url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut exported = exported(&text);
    exported.extend(self::exported(&served));
    let documented = documented_metrics();
    // Families that exist only once used, each scraped by the test that uses it.
    for (family, test) in ONLY_WHEN_USED {
        let text = read(test);
        assert!(text.contains(family), "{test} does not scrape {family}");
        exported.insert(family.to_owned());
    }
    let undocumented: Vec<_> = exported.difference(&documented).collect();
    let gone: Vec<_> = documented.difference(&exported).collect();
    assert!(
        undocumented.is_empty() && gone.is_empty(),
        "exported but not in docs/metrics.md: {undocumented:?}\nin docs/metrics.md but not exported: {gone:?}"
    );
}

/// The fields a raw config type accepts: serde's own list, from the error an unknown field
/// gets (`deny_unknown_fields`), so the schema is read, not restated.
fn fields<T: serde::de::DeserializeOwned>() -> BTreeSet<String> {
    let error = serde_json::from_value::<T>(serde_json::json!({ "not a key": 0 }))
        .err()
        .expect("an unknown field is refused")
        .to_string();
    // "expected one of `a`, `b`", or "expected `a`" for a type of one field.
    let list = error
        .split_once("expected one of ")
        .or_else(|| error.split_once("expected "))
        .map_or("", |(_, list)| list);
    list.split(", ")
        .map(|f| {
            f.trim()
                .trim_matches('`')
                .split('`')
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .filter(|f| !f.is_empty())
        .collect()
}

/// Keys in the first column of the configuration tables (`key`, or `key.sub` and `a`, `b`
/// pairs), in the pages that document configuration.
fn documented_keys() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for page in [
        "docs/configuration.md",
        "docs/canary.md",
        "docs/tracing.md",
        "docs/kubernetes.md",
        "docs/prompts.md",
        "docs/backends.md",
        "docs/structured.md",
        "docs/sessions.md",
        "docs/adapters.md",
    ] {
        for line in read(page).lines().filter(|l| l.starts_with("| `")) {
            let cell = line.split('|').nth(1).unwrap_or("");
            for key in cell.split('`').skip(1).step_by(2) {
                if let Some(key) = config_key(key) {
                    keys.insert(key);
                }
            }
        }
    }
    keys
}

/// The key a table cell names: `[[targets]]` is `targets`, `canary.interval` and
/// `[kubernetes] kubeconfig` their last part, `ttft = "1s"` its name.
fn config_key(cell: &str) -> Option<String> {
    let key = cell.split('=').next().unwrap_or("").trim();
    let key = key.rsplit("] ").next().unwrap_or(key);
    let key = key.trim_matches(|c| c == '[' || c == ']');
    let key = key.rsplit('.').next().unwrap_or("").trim();
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    plain.then(|| key.to_owned())
}

#[test]
fn every_configuration_key_is_documented_and_every_documented_key_accepted() {
    let mut accepted = BTreeSet::new();
    for set in [
        fields::<RawConfig>(),
        fields::<RawTarget>(),
        fields::<RawCanary>(),
        fields::<RawSlo>(),
        fields::<RawValidation>(),
        fields::<RawMedia>(),
        fields::<RawDiscovery>(),
        fields::<RawKubernetes>(),
        fields::<RawTracing>(),
        fields::<inferprobe::config::RawSession>(),
        fields::<inferprobe::config::RawAdapters>(),
        fields::<inferprobe::config::RawMetrics>(),
    ] {
        assert!(!set.is_empty(), "serde listed no fields");
        accepted.extend(set);
    }
    let documented = documented_keys();
    let undocumented: Vec<_> = accepted.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "accepted but documented nowhere: {undocumented:?}"
    );
    // The other way: every key of docs/configuration.md's tables is accepted somewhere.
    let text = read("docs/configuration.md");
    let mut unknown = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cell = line.split('|').nth(1).unwrap_or("");
        for key in cell.split('`').skip(1).step_by(2) {
            match config_key(key) {
                Some(key) if !accepted.contains(&key) => unknown.push(key),
                _ => {}
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "documented in docs/configuration.md, accepted nowhere: {unknown:?}"
    );
}
