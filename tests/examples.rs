//! Every configuration in examples/ passes `inferprobe check` as written: only what a real
//! deployment provides is supplied (the downward API's variables, the API key files, which
//! are written to a temporary directory and substituted for their paths).

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_example_passes_check() {
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    examples.sort();
    let names: Vec<String> = examples
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    // The common setups the examples cover.
    for expected in [
        "vllm.toml",
        "node-local-vllm.toml",
        "inferencepool.toml",
        "hosted-apis.toml",
        "canary-golden.toml",
        "vision.toml",
        "clouds.toml",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "no examples/{expected}: {names:?}"
        );
    }
    let keys = tempfile::tempdir().unwrap();
    for name in ["openai", "anthropic", "together", "gemini"] {
        std::fs::write(keys.path().join(name), "sk-example\n").unwrap();
    }
    let mut failures = Vec::new();
    for path in &examples {
        let text = std::fs::read_to_string(path).unwrap();
        let text = text.replace(
            "/var/run/secrets/inferprobe/",
            &format!("{}/", keys.path().display()),
        );
        let config = keys.path().join("example.toml");
        std::fs::write(&config, &text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_inferprobe"))
            .args(["check", "--config", config.to_str().unwrap()])
            .current_dir(root())
            .env_remove("INFERPROBE_CONFIG")
            .envs([
                ("NODE_NAME", "node-1"),
                ("POD_NAME", "inferprobe-x"),
                ("POD_NAMESPACE", "inferprobe"),
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            failures.push(format!("{}: {stderr}", path.display()));
        } else if !stdout.contains(": ok,") {
            failures.push(format!("{}: {stdout}", path.display()));
        }
        // No shipped example should carry a warning of an alert it can never fire.
        if stderr.contains("can never fire") {
            failures.push(format!("{}: {stderr}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
