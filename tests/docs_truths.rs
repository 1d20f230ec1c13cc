//! The smaller truths an operator meets first (issue 33, items 7 and 8), beside
//! tests/docs.rs (which keeps keys and names true): the defaults docs/configuration.md
//! gives are the ones `/config` shows and the daemon runs with, what discovery requires is
//! what `check` requires, `simulate` lists every fault and endpoint it has (in its help,
//! its start-up line and docs/simulator.md), and every exit code example of
//! docs/operating.md exits as the table says.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use inferprobe::sim::{ENDPOINTS, Fault};
use serde_json::Value;

use common::process::inferprobe;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap()
}

/// The rows of the markdown table that follows `heading`: first column key (backticks
/// stripped) → the other columns.
fn table(text: &str, heading: &str) -> BTreeMap<String, Vec<String>> {
    let start = text.find(heading).unwrap_or_else(|| panic!("{heading}"));
    let rows = text[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'));
    rows.filter_map(|row| {
        let cells: Vec<&str> = row.split(" | ").collect();
        let key = cells.first()?.trim_start_matches("| ").trim_matches('`');
        let rest = cells[1..]
            .iter()
            .map(|c| c.trim_end_matches(" |").to_owned());
        Some((key.to_owned(), rest.collect()))
    })
    .collect()
}

/// A documented default that is one literal (`5s`, `0.1`, `true`), as JSON would hold it.
fn literal(cell: &str) -> Option<Value> {
    let inner = cell.strip_prefix('`')?.strip_suffix('`')?;
    if inner.contains('`') {
        return None;
    }
    Some(match inner {
        "true" => Value::from(true),
        "false" => Value::from(false),
        number if number.parse::<f64>().is_ok() => {
            Value::from(number.parse::<f64>().unwrap_or_default())
        }
        text => Value::from(text),
    })
}

fn same(documented: &Value, shown: &Value) -> bool {
    let duration = |v: &Value| v.as_str().and_then(|s| humantime::parse_duration(s).ok());
    match (documented.as_f64(), shown.as_f64()) {
        (Some(a), Some(b)) => (a - b).abs() < 1e-12,
        _ => match (duration(documented), duration(shown)) {
            (Some(a), Some(b)) => a == b,
            _ => documented == shown,
        },
    }
}

/// `/config` shows a target with the built-in defaults it runs with, and each is the
/// default docs/configuration.md gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_shows_the_documented_defaults() {
    let docs = table(
        &read("docs/configuration.md"),
        "Per target (or in `[defaults]`):",
    );
    let daemon = common::start_daemon(
        "[[targets]]\nname = \"t\"\nurl = \"http://127.0.0.1:9\"\nmodel = \"m\"\nrate = 0.1\n",
    )
    .await;
    let shown: Value = daemon.get("/config", None).await.json().await.unwrap();
    daemon.stop().await;
    let target = shown["targets"][0].as_object().unwrap().clone();
    let mut compared = Vec::new();
    for (key, value) in &target {
        if ["name", "url", "model"].contains(&key.as_str()) {
            continue;
        }
        let cell = docs
            .get(key)
            .unwrap_or_else(|| panic!("/config shows `{key}`, which the table does not list"));
        let documented = literal(&cell[0])
            .unwrap_or_else(|| panic!("`{key}`: documented default {cell:?} is no single value"));
        assert!(
            same(&documented, value),
            "`{key}`: docs say {documented}, /config shows {value}"
        );
        compared.push(key.clone());
    }
    // The timeouts and limits the issue found missing are among them.
    for key in [
        "connect_timeout",
        "ttft_timeout",
        "request_timeout",
        "max_events",
        "backend",
    ] {
        assert!(
            compared.contains(&key.to_owned()),
            "{key} not shown: {target:?}"
        );
    }
}

/// Where the discovery table says a key is required for a source, `check` refuses that
/// source without it, naming the key; a source the docs give a default passes without it.
#[test]
fn discovery_requirements_are_what_check_requires() {
    let docs = table(
        &read("docs/configuration.md"),
        "| `name` | required | the `target` label of what it finds |",
    );
    let base: BTreeMap<&str, &str> = [
        (
            "pods",
            "namespace = \"inference\"\nselector = \"app=llm\"\nport = \"http\"\n",
        ),
        (
            "endpointslices",
            "namespace = \"inference\"\nservice = \"llm\"\nport = \"http\"\n",
        ),
        (
            "inferencepool",
            "namespace = \"inference\"\npool = \"llm\"\nport = 8000\n",
        ),
        ("file", "path = \"/nonexistent/sd.json\"\n"),
    ]
    .into();
    let dir = tempfile::tempdir().unwrap();
    let check = |source: &str, without: &str| {
        let body: String = base[source]
            .lines()
            .filter(|l| !l.starts_with(&format!("{without} =")))
            .map(|l| format!("{l}\n"))
            .collect();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            format!("[[discovery]]\nname = \"d\"\nsource = \"{source}\"\n{body}[discovery.template]\nmodel = \"m\"\n"),
        )
        .unwrap();
        inferprobe(&["check", "--config", path.to_str().unwrap()])
    };
    let mut checked = 0;
    for (key, cell) in &docs {
        for source in base.keys() {
            if !base[source].contains(&format!("{key} =")) {
                continue;
            }
            let out = check(source, key);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let says = |s: &str| cell.iter().any(|c| c.contains(s));
            let required = says(&format!("required for `{source}`"))
                || (says("required for `") && says(&format!("and `{source}`")));
            if required {
                assert_eq!(
                    out.status.code(),
                    Some(64),
                    "{source} without {key}: {stderr}"
                );
                assert!(stderr.contains(&format!("discovery[0].{key}")), "{stderr}");
            } else {
                assert!(
                    !stderr.contains(&format!("discovery[0].{key}`")),
                    "docs give `{key}` a default for {source} ({cell:?}), check requires it: {stderr}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 8, "{checked} (key, source) pairs");
}

/// `simulate --help`, its start-up line and docs/simulator.md name every fault and every
/// endpoint the simulator has.
#[test]
fn simulate_lists_every_fault_and_endpoint() {
    let help = String::from_utf8(inferprobe(&["simulate", "--help"]).stdout).unwrap();
    let docs = read("docs/simulator.md");
    for fault in Fault::ALL {
        assert!(help.contains(fault.name()), "--help misses {fault}");
        assert!(
            docs.contains(&format!("| `{}` |", fault.name()))
                || docs.contains(&format!("`{}` /", fault.name()))
                || docs.contains(&format!("/ `{}`", fault.name())),
            "docs/simulator.md misses {fault}"
        );
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args(["simulate", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stderr.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        !line.contains("127.0.0.1:0 "),
        "names the bound port: {line}"
    );
    for (method, path) in ENDPOINTS {
        assert!(line.contains(&format!("{method} {path}")), "{line}");
        let documented = path.replace("<model>", "<m>");
        assert!(
            docs.contains(&format!("`{documented}`")),
            "docs/simulator.md misses {path}"
        );
    }
}

/// Every example in docs/operating.md's exit code table exits with its row's code, and a
/// runtime failure (the listen address taken) exits 1.
#[test]
fn every_exit_code_example_exits_as_documented() {
    let text = read("docs/operating.md");
    let rows = table(&text, "### Exit codes");
    let mut ran = 0;
    for line in text[text.find("### Exit codes").unwrap()..]
        .lines()
        .filter(|l| l.starts_with("| 0 ") || l.starts_with("| 64 "))
    {
        let code: i32 = line[2..].split(' ').next().unwrap().parse().unwrap();
        for example in line.split('`').skip(1).step_by(2) {
            let Some(args) = example.strip_prefix("inferprobe") else {
                continue;
            };
            let args: Vec<&str> = args.split_whitespace().collect();
            let out = inferprobe(&args);
            assert_eq!(out.status.code(), Some(code), "`{example}`");
            ran += 1;
        }
    }
    assert!(ran >= 7 && rows.contains_key("1"), "{ran} examples run");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        "[[targets]]\nname = \"t\"\nurl = \"http://127.0.0.1:9\"\nmodel = \"m\"\n",
    )
    .unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let out = inferprobe(&[
        "run",
        "--config",
        config.to_str().unwrap(),
        "--listen",
        &listen,
    ]);
    assert_eq!(out.status.code(), Some(1), "cannot listen");
}
