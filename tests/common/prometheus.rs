//! A real Prometheus server (Debian's `prometheus`, as `.ci/run` installs it) scraping the
//! in-process daemon every second the way the shipped PodMonitor does (`honor_labels`), and
//! its HTTP query API as a rollout controller calls it (`GET /api/v1/query`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Prometheus {
    child: Child,
    pub url: String,
    /// One client for every query: building one loads the TLS roots (10-50 ms in a debug
    /// build), and a rollout test runs over a hundred queries a second.
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn binary() -> PathBuf {
    std::env::var_os("PROMETHEUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/prometheus".into())
}

/// A vector sample's value as Prometheus wrote it ("NaN", "+Inf" included).
fn value(sample: &serde_json::Value) -> f64 {
    let text = sample["value"][1].as_str().unwrap_or("NaN");
    match text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().unwrap_or(f64::NAN),
    }
}

impl Prometheus {
    /// Prometheus scraping `daemon` every second; `None` (the test skips) where the binary
    /// is missing on a developer's machine, a panic where CI requires it.
    pub async fn start(daemon: SocketAddr) -> Option<Self> {
        Self::start_with(&format!(
            "  - job_name: inferprobe\n    honor_labels: true\n\
             \x20   static_configs:\n      - targets: ['{daemon}']\n"
        ))
        .await
    }

    /// Prometheus with these `scrape_configs` entries (YAML list items, indented two
    /// spaces), evaluating every second.
    pub async fn start_with(scrape_configs: &str) -> Option<Self> {
        Self::start_with_flags(scrape_configs, &[]).await
    }

    /// As [`Self::start_with`], with native histograms on: Prometheus 2.x asks for the
    /// protobuf exposition only behind `--enable-feature=native-histograms` (and keeps
    /// exemplars only with `exemplar-storage`).
    pub async fn start_native(scrape_configs: &str) -> Option<Self> {
        Self::start_with_flags(
            scrape_configs,
            &["--enable-feature=native-histograms,exemplar-storage"],
        )
        .await
    }

    async fn start_with_flags(scrape_configs: &str, flags: &[&str]) -> Option<Self> {
        let bin = binary();
        if !bin.exists() {
            assert!(
                std::env::var_os("INFERPROBE_REQUIRE_PROMTOOL").is_none(),
                "{} is missing; .ci/run installs Debian's prometheus",
                bin.display()
            );
            eprintln!("SKIPPED: {} not found; .ci/run installs it", bin.display());
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n{scrape_configs}"
            ),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        let prometheus = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
            _dir: dir,
        };
        let ready = format!("{}/-/ready", prometheus.url);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let ok = reqwest::get(&ready)
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "Prometheus not ready in 30 s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Some(prometheus)
    }

    /// An instant query now: the vector's values in Prometheus's order (a scalar as one);
    /// `Err` with Prometheus's answer when the query fails.
    pub async fn query(&self, expr: &str) -> Result<Vec<f64>, String> {
        self.query_params(&[("query", expr)]).await
    }

    /// An instant query at `at` (Unix seconds): several queries at one instant read the
    /// same scrape.
    pub async fn query_at(&self, expr: &str, at: f64) -> Result<Vec<f64>, String> {
        self.query_params(&[("query", expr), ("time", &format!("{at:.3}"))])
            .await
    }

    async fn query_params(&self, params: &[(&str, &str)]) -> Result<Vec<f64>, String> {
        let url = reqwest::Url::parse_with_params(&format!("{}/api/v1/query", self.url), params)
            .map_err(|e| e.to_string())?;
        let response = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let body: serde_json::Value = response.json().await.map_err(|e| e.to_string())?;
        if body["status"] != "success" {
            return Err(body.to_string());
        }
        let data = &body["data"];
        match data["resultType"].as_str() {
            Some("vector") => Ok(data["result"]
                .as_array()
                .map(|a| a.iter().map(value).collect())
                .unwrap_or_default()),
            Some("scalar") => Ok(vec![value(&serde_json::json!({ "value": data["result"] }))]),
            other => Err(format!("result type {other:?}: {body}")),
        }
    }

    /// Wait until `expr` returns at least one sample.
    pub async fn wait_for(&self, expr: &str, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        while self.query(expr).await.map_or(true, |v| v.is_empty()) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{expr}: no data in {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// `promtool check metrics` on an exposition: its report (empty when clean), prefixed
/// "failed: " when it exits non-zero; `None` (the test skips) where promtool is missing on
/// a developer's machine, a panic where CI requires it.
pub fn promtool_check_metrics(text: &str) -> Option<String> {
    use std::io::Write;
    let promtool = std::env::var("PROMTOOL").unwrap_or_else(|_| "promtool".into());
    let child = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) if std::env::var_os("INFERPROBE_REQUIRE_PROMTOOL").is_none() => {
            eprintln!("SKIPPED: {promtool} not runnable ({e}); .ci/run installs it");
            return None;
        }
        Err(e) => panic!("{promtool}: {e}"),
    };
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(text.as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(if out.status.success() {
        report
    } else {
        format!("failed: {report}")
    })
}
