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
            "`targets[0].rat`",
            "did you mean `rate`?",
        ),
        (
            "[[targets]]\nname = \"a\"\nurl = \"http://h\"\nmodel = 5\n",
            "`targets[0].model`",
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

/// One rule for the exit code, flags included (docs/operating.md, "Exit codes"; issue 33,
/// item 7): clap's own 2 for a bad flag is mapped to 64, help and version are 0.
#[test]
fn bad_flags_are_usage_errors() {
    let cases: [(&[&str], i32); 9] = [
        (&["run", "--log-level", "[[["], 64),
        (&["simulate", "--fault", "reset=2"], 64),
        (&["run", "--bogus"], 64),
        (&["check"], 64),
        (&["frobnicate"], 64),
        (&[], 64),
        (&["--help"], 0),
        (&["check", "--help"], 0),
        (&["--version"], 0),
    ];
    for (args, code) in cases {
        let out = inferprobe(args);
        assert_eq!(out.status.code(), Some(code), "inferprobe {args:?}");
    }
}

/// Every `inferprobe check` command the repository documents (a config file's header, a
/// shell block of README.md or docs/) exits 0 as written, with no secret in the
/// environment: a laptop, CI (issue 33, item 6).
#[test]
fn every_documented_check_command_runs_as_written_without_secrets() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<std::path::PathBuf> = ["config", "config/kubernetes", "examples", "docs"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml" || e == "md"))
        .collect();
    files.push(root.join("README.md"));
    let mut commands = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let toml = file.extension().is_some_and(|e| e == "toml");
        let mut in_sh = false;
        for line in text.lines() {
            if line.starts_with("```") {
                in_sh = line == "```sh" && !in_sh;
                continue;
            }
            let line = if toml {
                line.trim_start_matches('#').trim()
            } else if in_sh {
                line.trim()
            } else {
                continue;
            };
            let line = line.split(" # ").next().unwrap_or("").trim();
            let Some(at) = line.find("inferprobe check ") else {
                continue;
            };
            // The tail after a `:` in prose ("Validate with: inferprobe check …").
            let prefix = line[..at].rsplit(": ").next().unwrap_or("");
            commands.push((file.clone(), format!("{prefix}{}", &line[at..])));
        }
    }
    assert!(commands.len() >= 8, "{commands:#?}");
    for (file, command) in &commands {
        let mut words = command.split_whitespace();
        let mut run = Command::new(env!("CARGO_BIN_EXE_inferprobe"));
        run.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .current_dir(root);
        for word in words.by_ref() {
            match word.split_once('=') {
                Some((var, value)) if var.chars().all(|c| c.is_ascii_uppercase() || c == '_') => {
                    run.env(var, value);
                }
                _ => break, // `inferprobe`
            }
        }
        let out = run.args(words).output().unwrap();
        assert!(
            out.status.success(),
            "{}: `{command}` exits {:?}: {}",
            file.display(),
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `--no-secrets` reads no secret but checks how each is given, and only `check` has it:
/// the daemon refuses to start without its secrets.
#[test]
fn no_secrets_checks_their_form_and_run_has_no_such_flag() {
    let dir = tempfile::tempdir().unwrap();
    let target = "[[targets]]\nname = \"t\"\nurl = \"http://127.0.0.1:1\"\nmodel = \"m\"\n";
    let absent = write(
        dir.path(),
        "absent.toml",
        &format!(
            "{target}api_key_file = \"/nonexistent/key\"\n[tracing]\notlp_endpoint = \"http://127.0.0.1:4318/v1/traces\"\nheaders_env = \"NOT_SET_ANYWHERE\"\n"
        ),
    );
    let out = inferprobe(&["check", "--no-secrets", "--config", &absent]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("secrets were not read"), "{stdout}");
    let out = inferprobe(&["check", "--config", &absent]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("targets[0].api_key_file"));
    // Both ways of giving one key is still wrong without reading either.
    let both = write(
        dir.path(),
        "both.toml",
        &format!("{target}api_key_file = \"/k\"\napi_key_env = \"K\"\n"),
    );
    let out = inferprobe(&["check", "--no-secrets", "--config", &both]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not both"));
    let out = inferprobe(&["run", "--no-secrets", "--config", &absent]);
    assert_eq!(out.status.code(), Some(64), "run has no --no-secrets");
}

/// `check` refuses a file_sd file it can read whose labels the daemon would rename, and
/// says what each target's alerts burn against.
#[test]
fn check_reads_a_file_sd_file_and_says_each_targets_slo() {
    let dir = tempfile::tempdir().unwrap();
    let sd = write(
        dir.path(),
        "sd.json",
        r#"[{"targets": ["127.0.0.1:8000"], "labels": {"group": "blue"}}]"#,
    );
    let config = write(
        dir.path(),
        "c.toml",
        &format!(
            "[[targets]]\nname = \"with\"\nurl = \"http://127.0.0.1:1\"\nmodel = \"m\"\nslo = {{ itl = \"100ms\" }}\n[[targets]]\nname = \"without\"\nurl = \"http://127.0.0.1:1\"\nmodel = \"m\"\n[[discovery]]\nname = \"pool\"\nsource = \"file\"\npath = \"{sd}\"\n[discovery.template]\nmodel = \"m\"\n"
        ),
    );
    let out = inferprobe(&["check", "--config", &config]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("discovery[0].path")
            && stderr.contains("`group`")
            && stderr.contains("exported_group"),
        "{stderr}"
    );
    std::fs::write(
        &sd,
        r#"[{"targets": ["127.0.0.1:8000"], "labels": {"zone": "a"}}]"#,
    )
    .unwrap();
    let out = inferprobe(&["check", "--config", &config]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("with: slo objective 99%: budget-burn alerts on availability, itl ≤ 100ms"),
        "{stdout}"
    );
    assert!(
        stdout.contains("without: no slo: no budget-burn alert"),
        "{stdout}"
    );
}

/// Issue 44, item 5: `check` says what a target's checks cost an hour, prompt and output
/// tokens, per replica and for a discovery block's `max_targets` replicas.
#[test]
fn check_prints_what_the_checks_cost_an_hour() {
    let dir = std::env::temp_dir().join(format!("inferprobe-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = write(
        &dir,
        "cost.toml",
        r#"
[[targets]]
name = "static"
url = "http://127.0.0.1:1"
model = "m"
canary = { interval = "60s" }
prefix_cache = { interval = "60s" }

[[discovery]]
name = "pool"
source = "pods"
selector = "app=vllm"
max_targets = 10
port = 8000
[discovery.template]
model = "m"
canary = { interval = "30s" }
"#,
    );
    let out = inferprobe(&["check", "--config", &path]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 60 checks of 32 tokens; 60 pairs of 2 × (1,024 + 14) prompt and 8 output tokens.
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.contains(&format!("{name}: checks cost, an hour")))
            .unwrap_or_else(|| panic!("no cost line for {name}:\n{stdout}"))
            .to_owned()
    };
    let static_line = line("static");
    assert!(
        static_line.contains("at most 1920 output tokens"),
        "{static_line}"
    );
    assert!(
        static_line
            .contains("the prefix-cache check about 124560 prompt and at most 480 output tokens"),
        "{static_line}"
    );
    let pool = line("pool");
    assert!(
        pool.contains("at most 3840 output tokens per replica"),
        "{pool}"
    );
    assert!(pool.contains("up to 10 replicas (max_targets)"), "{pool}");
    assert!(pool.contains("at most 38400 output tokens"), "{pool}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 44, item 2: `check --no-secrets` is the pre-flight check on a laptop. A canary's
/// prompts or golden file the cluster mounts is noted where it is not at hand, and read
/// and checked where it is; `run` (here: `check` without the flag) still needs it.
#[test]
fn no_secrets_notes_canary_files_the_cluster_mounts() {
    let dir = std::env::temp_dir().join(format!("inferprobe-mounted-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = |canary: &str| {
        format!(
            "[[targets]]\nname = \"t\"\nurl = \"http://127.0.0.1:1\"\nmodel = \"m\"\ncanary = {{ {canary} }}\n"
        )
    };
    let absent = write(
        &dir,
        "absent.toml",
        &config(r#"prompts = "/etc/inferprobe/canary/prompts.jsonl""#),
    );
    let out = inferprobe(&["check", "--no-secrets", "--config", &absent]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("canary file /etc/inferprobe/canary/prompts.jsonl is not here"),
        "{stdout}"
    );
    // The built-in prompts that stand in have no known answers; the file may: no advice
    // to add what it already has (issue 49, item 9).
    assert!(!stdout.contains("no known answers"), "{stdout}");
    assert!(
        stdout.contains(
            "known answers: those of /etc/inferprobe/canary/prompts.jsonl, not read here"
        ),
        "{stdout}"
    );
    let golden = write(
        &dir,
        "golden.toml",
        &config(r#"golden = "/etc/inferprobe/canary/golden.json""#),
    );
    let out = inferprobe(&["check", "--no-secrets", "--config", &golden]);
    assert_eq!(out.status.code(), Some(0));
    let out = inferprobe(&["check", "--config", &absent]);
    assert_eq!(
        out.status.code(),
        Some(64),
        "without --no-secrets the file is read"
    );
    // At hand, it is read and its shape checked, flag or not.
    let bad = write(&dir, "bad.jsonl", "{\"prompt\": 5}\n");
    let present = write(
        &dir,
        "present.toml",
        &config(&format!("prompts = \"{bad}\"")),
    );
    let out = inferprobe(&["check", "--no-secrets", "--config", &present]);
    assert_eq!(
        out.status.code(),
        Some(64),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_warns_where_the_slos_latency_leaves_too_few_slots() {
    // 1 probe/s at the SLO's 3.65 s (500 ms + 63 × 50 ms) keeps 3.65 probes in flight: 4
    // slots turn away 27.6% of arrivals (Erlang B), 9 under 1%. The same SLO at the
    // shipped 0.05/s needs no warning, nor a target without latency thresholds.
    let dir = tempfile::tempdir().unwrap();
    let slo = r#"slo = { ttft = "500ms", tpot = "50ms", objective = 0.99 }"#;
    let path = write(
        dir.path(),
        "slots.toml",
        &format!(
            "[defaults]\nurl = \"http://127.0.0.1:1\"\nmodel = \"m\"\noutput_tokens = 64\nmax_concurrency = 4\n\
             [[targets]]\nname = \"busy\"\nrate = 1\n{slo}\n\
             [[targets]]\nname = \"calm\"\nrate = 0.05\n{slo}\n\
             [[targets]]\nname = \"unbounded\"\nrate = 1\n"
        ),
    );
    let out = inferprobe(&["check", "--config", &path]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].starts_with("warning: busy: at the latency its slo allows (3.65s a probe) and rate 1/s, about 27.6% of arrivals")
            && warnings[0].ends_with("max_concurrency = 9 keeps it under 1%"),
        "{stderr}"
    );
}

/// Issue 49, items 3 and 6: `check` warns where one failed probe in an hour pages at the
/// target's objective (the fast burn's 14.4 budgets over an hour), naming the rate that
/// would not, and where the configuration sets a site label that belongs to the monitoring
/// stack's external_labels.
#[test]
fn check_warns_where_one_failure_pages_and_of_site_labels_in_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = |labels: &str, rate: &str, objective: &str| {
        format!(
            "{labels}[[targets]]\nname = \"t\"\nurl = \"http://127.0.0.1:1\"\nmodel = \"m\"\nrate = {rate}\nslo = {{ objective = {objective} }}\n"
        )
    };
    let stderr = |text: String| {
        let path = write(dir.path(), "c.toml", &text);
        let out = inferprobe(&["check", "--config", &path]);
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // 99.99% at 0.05/s: 180 probes an hour, and one failure pages in an hour of fewer than
    // 1 / (14.4 × 0.0001) = 694: every hour. Poisson arrivals put a fifth of the hours under
    // 694 at 0.2/s still; it takes 0.211/s to keep that under 1%.
    let err = stderr(config("", "0.05", "0.9999"));
    assert!(err.contains("an hour holds about 180 probes"), "{err}");
    assert!(
        err.contains("fewer than 694 (1 / (14.4 × the 0.01% budget))"),
        "{err}"
    );
    assert!(err.contains("about 100% of hours"), "{err}");
    assert!(err.contains("it takes 0.211 probes/s"), "{err}");
    assert!(err.contains("an objective of 99.95% or less"), "{err}");
    let err = stderr(config("", "0.2", "0.9999"));
    assert!(err.contains("about 17% of hours"), "{err}");
    // At 0.25/s, or at 99.9% (0.0255/s needed), one failure stays under the fast burn; at
    // 90% it cannot reach 14.4 budgets at all.
    assert!(!stderr(config("", "0.25", "0.9999")).contains("one failed"));
    assert!(!stderr(config("", "0.05", "0.999")).contains("one failed"));
    assert!(!stderr(config("", "0.0001", "0.9")).contains("one failed"));
    // A cluster label in [labels] collides where two sites' series meet.
    let err = stderr(config("[labels]\ncluster = \"east\"\n", "0.2", "0.99"));
    assert!(
        err.contains("label cluster = \"east\": a site label"),
        "{err}"
    );
    assert!(err.contains("external_labels"), "{err}");
    assert!(!stderr(config("[labels]\ntier = \"gold\"\n", "0.2", "0.99")).contains("site label"));
}

/// `inferprobe check ... | head -1`: the reader closes the pipe before the report ends. The
/// report stops there and the exit code still says the file is valid (a panic in `println!`
/// exited 101 with a backtrace).
#[test]
fn check_survives_a_reader_that_goes_away() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/example.toml");
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args(["check", "--config", example])
        .env("HOSTED_API_KEY", "sk-test")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Closed before the child writes its first line: every write of the report fails.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
