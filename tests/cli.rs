//! The binary's exit codes and messages: `check` exits 0 for a valid file and 64 naming
//! the key for a bad one; `run` refuses a bad config the same way.

use std::path::Path;
use std::process::{Command, Output};

fn inferprobe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args(args)
        .env_remove("INFERPROBE_CONFIG")
        .output()
        .unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn check_accepts_the_shipped_example_config() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/example.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args(["check", "--config", example])
        .env("HOSTED_API_KEY", "sk-test")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok, 3 target(s)"));
}

#[test]
fn check_accepts_the_multi_backend_example() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/backends.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args(["check", "--config", example])
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok, 9 target(s)"));
}

#[test]
fn check_names_a_bad_dataset_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = write(
        dir.path(),
        "p.jsonl",
        "{\"prompt\": \"a\"}\n{\"prompt\": 3}\n",
    );
    let toml = format!(
        "[[targets]]\nname = \"a\"\nurl = \"http://h\"\nmodel = \"m\"\ndataset = \"{data}\"\n"
    );
    let path = write(dir.path(), "c.toml", &toml);
    let out = inferprobe(&["check", "--config", &path]);
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`targets[0].dataset`") && stderr.contains("p.jsonl: line 2"),
        "{stderr}"
    );
}

#[test]
fn check_names_a_missing_api_key_variable() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/example.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args(["check", "--config", example])
        .env_remove("HOSTED_API_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`targets[2].api_key_env`") && stderr.contains("HOSTED_API_KEY"),
        "{stderr}"
    );
}

#[test]
fn check_exits_64_naming_the_key_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[[targets]]\nname = \"a\"\nurl = \"http://h\"\nmodel = \"m\"\nrate = 0\n",
            "`targets[0].rate`",
            "must be > 0",
        ),
        (
            "[[targets]]\nname = \"a\"\nurl = \"http://h\"\nmodel = \"m\"\nrat = 1\n",
            "`targets.0.rat`",
            "unknown field",
        ),
        (
            "[[targets]]\nname = \"a\"\nurl = \"http://h\"\nmodel = 5\n",
            "`targets.0.model`",
            "invalid type",
        ),
        ("[[targets\n", "", "TOML"),
    ];
    for (i, (toml, key, reason)) in cases.iter().enumerate() {
        let path = write(dir.path(), &format!("bad{i}.toml"), toml);
        let out = inferprobe(&["check", "--config", &path]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{toml}\n{stderr}");
        assert!(
            stderr.contains(key) && stderr.contains(reason),
            "{toml}\n{stderr}"
        );
        assert!(stderr.contains(&path), "names the file: {stderr}");
    }
    let out = inferprobe(&["check", "--config", "/nonexistent.toml"]);
    assert_eq!(out.status.code(), Some(64));
}

#[test]
fn run_refuses_a_bad_config_with_64() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "bad.toml",
        "listen = \"nope\"\n[[targets]]\nname = \"a\"\nurl = \"http://h\"\nmodel = \"m\"\n",
    );
    let out = inferprobe(&["run", "--config", &path, "--log-format", "json"]);
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(line["level"], "ERROR");
    assert!(
        line["message"].as_str().unwrap().contains("`listen`"),
        "{stderr}"
    );
}

#[test]
fn bad_flags_are_usage_errors() {
    let out = inferprobe(&["run", "--log-level", "[[["]);
    assert_eq!(out.status.code(), Some(64));
    let out = inferprobe(&["simulate", "--fault", "reset=2"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
}
