//! The status page at `/`: server-rendered HTML with every target, its recent probes, a
//! sparkline and SLO state, escaping what servers send; rendered in headless Chromium,
//! whose screenshot is kept in target/ (the path is printed).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::replay::{Capture, serve};
use common::{start_daemon, start_sim};
use inferprobe::sim::{Fault, SimConfig};

async fn daemon_with_history() -> (common::Sim, common::Daemon) {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(40),
        itl: Duration::from_millis(5),
        jitter: 0.5,
        faults: vec![(Fault::Http500, 0.15), (Fault::Reset, 0.1)],
        seed: Some(7),
        ..SimConfig::default()
    })
    .await;
    // A server whose error page is markup: the page must show it, not run it.
    let hostile = Capture {
        status_line: "HTTP/1.1 500 Internal Server Error".into(),
        headers: vec!["content-type: text/html".into()],
        body: b"<script>alert('pwned')</script>".to_vec(),
    };
    let hostile = serve(hostile, Duration::ZERO).await;
    let toml = format!(
        r#"
        seed = 9
        [defaults]
        model = "m"
        rate = 15
        output_tokens = 8
        [[targets]]
        name = "chat-with-slo"
        url = "{}"
        slo = {{ ttft = "100ms", objective = 0.9 }}
        [[targets]]
        name = "completions"
        backend = "openai"
        url = "{}"
        [[targets]]
        name = "hostile"
        url = "http://{hostile}"
        "#,
        sim.url(),
        sim.url()
    );
    let daemon = start_daemon(&toml).await;
    daemon
        .wait_for(Duration::from_secs(20), |s| {
            s.requests("chat-with-slo") >= 20.0
                && s.requests("completions") >= 20.0
                && s.requests("hostile") >= 3.0
        })
        .await;
    (sim, daemon)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_recent_probes_and_escapes_server_text() {
    let (_sim, daemon) = daemon_with_history().await;
    let response = daemon.get("/", None).await;
    assert_eq!(
        response.headers()["content-type"],
        "text/html; charset=utf-8"
    );
    let page = response.text().await.unwrap();
    daemon.stop().await;
    for name in ["chat-with-slo", "completions", "hostile"] {
        assert!(page.contains(&format!("<section id=\"{name}\">")), "{name}");
    }
    assert!(page.contains("<meta http-equiv=\"refresh\""));
    assert_eq!(page.matches("<svg class=\"spark\"").count(), 3);
    assert!(
        page.contains("class=\"fail\""),
        "failures are marked on the sparkline"
    );
    assert!(page.contains("http_5xx") && page.contains("<td>ok</td>"));
    assert!(
        page.contains("meeting") || page.contains("violating"),
        "SLO state shown"
    );
    assert!(page.contains("no SLO"));
    assert!(
        !page.contains("<script>"),
        "no script, not even the server's"
    );
    assert!(page.contains("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;"));
}

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            let found = Command::new("which").arg(name).output().ok()?;
            found
                .status
                .success()
                .then(|| PathBuf::from(String::from_utf8_lossy(&found.stdout).trim()))
        })
}

/// Headless Chromium with the flags this sandbox needs (no network beyond loopback).
fn browser(binary: &Path, profile: &Path, args: &[&str]) -> std::process::Output {
    Command::new(binary)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_renders_in_a_real_browser() {
    let Some(binary) = chromium() else {
        assert!(
            std::env::var_os("INFERPROBE_REQUIRE_CHROMIUM").is_none(),
            "chromium is required here"
        );
        eprintln!("SKIPPED: no chromium; .ci/run installs Debian's package");
        return;
    };
    let (_sim, daemon) = daemon_with_history().await;
    let url = format!("http://{}/", daemon.addr);
    let profile = tempfile::tempdir().unwrap();
    let dom = browser(&binary, profile.path(), &["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    let out = browser(
        &binary,
        profile.path(),
        &[
            "--window-size=1280,1800",
            &format!("--screenshot={}", shot.display()),
            &url,
        ],
    );
    daemon.stop().await;
    assert!(
        dom.contains("<h2>chat-with-slo</h2>") && dom.contains("<h2>hostile</h2>"),
        "rendered DOM:\n{dom}"
    );
    assert!(dom.contains("<polyline"), "the sparkline is in the DOM");
    let png = std::fs::read(&shot).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        png.len() > 20_000,
        "a real page, not a blank one ({} bytes)",
        png.len()
    );
    println!("status page screenshot: {}", shot.display());
}

/// The sampler check's section (docs/sampling.md): the server semantics its logprobs are
/// read by, resolved from `/v1/models` (the simulator says `owned_by: "vllm"`, for a model
/// of another name: the first entry) or configured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_the_sampler_checks_server_semantics() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::ZERO,
        ..SimConfig::default()
    })
    .await;
    let target = |name: &str, server: &str| {
        format!(
            r#"
            [[targets]]
            name = "{name}"
            url = "{}"
            model = "m"
            rate = 0.001
            sampler = {{ interval = "50ms"{server} }}
            "#,
            sim.url()
        )
    };
    let toml = target("auto", "") + &target("configured", r#", server = "llama.cpp""#);
    let daemon = start_daemon(&toml).await;
    daemon
        .wait_for(Duration::from_secs(30), |s| {
            ["auto", "configured"]
                .iter()
                .all(|t| s.sum("inferprobe_sampler_checks_total", &[("target", *t)]) >= 2.0)
        })
        .await;
    let page = daemon.get("/", None).await.text().await.unwrap();
    daemon.stop().await;
    let sampler = |name: &str| {
        page.split(&format!("<section id=\"{name}\">"))
            .nth(1)
            .and_then(|s| s.split("</section>").next())
            .and_then(|s| s.split("<h3>Sampler</h3>").nth(1))
            .unwrap_or_else(|| panic!("no sampler section for {name}:\n{page}"))
            .to_owned()
    };
    assert!(
        sampler("auto")
            .contains("server semantics: <b>vllm</b> (/v1/models: owned_by &quot;vllm&quot;)"),
        "{}",
        sampler("auto")
    );
    assert!(
        sampler("configured").contains("server semantics: <b>llama.cpp</b> (configured)"),
        "{}",
        sampler("configured")
    );
    // Its rounds, each with its tokens judged: the simulator lists raw logprobs, 64 a
    // round inside the support, first at the production-like setting.
    assert!(
        sampler("auto").contains("<td>ok</td><td>temperature 0.7 · top_k 19 · top_p 0.8 · min_p 0</td><td>vllm</td><td>64 / 0 / 0</td>"),
        "{}",
        sampler("auto")
    );
}
