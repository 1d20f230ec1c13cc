//! Secrets never leave: an API key that a (badly behaved) server echoes back in errors is
//! absent from the logs (at debug level, every crate), /metrics in both formats, /config
//! and the status page. Also: labels from the environment land on every target series.

use crate::common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Scrape, start_sim};
use inferprobe::sim::SimConfig;

const KEY: &str = "sk-SECRET-9f8e7d6c5b4a";
const HEADER_SECRET: &str = "hdr-SECRET-0a1b2c3d";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_appear_nowhere() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    })
    .await;
    let url = sim.url();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let port = common::closed_port().await;
    let config = format!(
        r#"
        listen = "127.0.0.1:{port}"
        labels_from_env = {{ node = "PROBE_NODE_NAME" }}
        [defaults]
        model = "m"
        rate = 10
        output_tokens = 2
        url = "{url}"
        [[targets]]
        name = "auth-fails"
        api_key_env = "PROBE_TEST_KEY"
        headers = {{ "x-inferprobe-fault" = "http_401" }}
        [[targets]]
        name = "anthropic-auth-fails"
        backend = "anthropic"
        api_key_file = "{}"
        headers = {{ "x-inferprobe-fault" = "http_401" }}
        [[targets]]
        name = "ok"
        api_key_env = "PROBE_TEST_KEY"
        [[targets]]
        name = "header-secret"
        headers = {{ "x-api-key" = "{HEADER_SECRET}" }}
        extra_body = {{ access_token = "{HEADER_SECRET}" }}
        "#,
        key_file.display()
    );
    let path = dir.path().join("config.toml");
    std::fs::write(&path, config).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args([
            "run",
            "--config",
            path.to_str().unwrap(),
            "--log-format",
            "json",
            "--log-level",
            "debug",
        ])
        .env("PROBE_TEST_KEY", KEY)
        .env("PROBE_NODE_NAME", "node-7")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let get = |path: &str, accept: &str| {
        let request = client
            .get(format!("{base}{path}"))
            .header("accept", accept.to_owned());
        async move { request.send().await.ok()?.text().await.ok() }
    };
    let mut scrape = None;
    for _ in 0..200 {
        if let Some(text) = get("/metrics", "text/plain").await {
            let s = Scrape::parse(text);
            let done = ["auth-fails", "anthropic-auth-fails"]
                .iter()
                .all(|t| s.errors(t, "auth") >= 2.0)
                && s.successes("ok") >= 2.0
                && s.successes("header-secret") >= 2.0;
            if done {
                scrape = Some(s);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let scrape = scrape.expect("the daemon probed every target");
    let open_metrics = get("/metrics", "application/openmetrics-text;version=1.0.0")
        .await
        .unwrap();
    let config = get("/config", "*/*").await.unwrap();
    let page = get("/", "text/html").await.unwrap();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let mut logs = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    assert!(child.wait().unwrap().success());

    for (what, text) in [
        ("logs", &logs),
        ("/metrics", &scrape.text),
        ("/metrics (OpenMetrics)", &open_metrics),
        ("/config", &config),
        ("status page", &page),
    ] {
        assert!(!text.contains(KEY), "the API key leaked into {what}");
        assert!(
            !text.contains(HEADER_SECRET),
            "a credential header leaked into {what}"
        );
    }
    // The server did echo the key: it was scrubbed, not absent by luck.
    assert!(
        logs.contains("simulated invalid API key: Bearer [redacted]"),
        "{logs}"
    );
    assert!(
        logs.contains("simulated invalid API key: [redacted]"),
        "x-api-key echo: {logs}"
    );
    assert!(page.contains("Bearer [redacted]"));
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    let targets = config["targets"].as_array().unwrap();
    let secret_target = targets
        .iter()
        .find(|t| t["name"] == "header-secret")
        .unwrap();
    assert_eq!(secret_target["headers"]["x-api-key"], "[redacted]");
    assert_eq!(secret_target["extra_body"]["access_token"], "[redacted]");
    assert_eq!(
        targets[0]["api_key_env"], "PROBE_TEST_KEY",
        "where the key comes from is shown"
    );

    // labels_from_env
    assert_eq!(
        scrape.sum(
            "inferprobe_requests_total",
            &[("target", "ok"), ("node", "node-7")]
        ),
        scrape.requests("ok")
    );
}
