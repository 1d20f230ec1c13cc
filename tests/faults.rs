//! Every fault lands in exactly its category, the daemon stays up, and
//! `requests_total` = successes + errors for every target.
//!
//! One simulator serves all targets; each target forces one fault with the
//! `x-inferprobe-fault` header, so the expected category of every probe is known.

use crate::common;

use std::time::Duration;

use common::replay::{Capture, serve};
use common::{Scrape, closed_port, start_daemon, start_sim, unresponsive_port};
use inferprobe::error::ErrorCategory;
use inferprobe::sim::SimConfig;

/// (target name, fault forced by header, expected category)
const FAULTS: &[(&str, &str, &str)] = &[
    ("f-429", "http_429", "rate_limited"),
    ("f-500", "http_500", "http_5xx"),
    ("f-401", "http_401", "auth"),
    ("f-529", "http_529", "overloaded"),
    ("f-overloaded", "overloaded_event", "overloaded"),
    ("f-context", "context_length", "context_length"),
    ("f-error-event", "error_event", "stream_error_event"),
    ("f-reset", "reset", "stream_interrupted"),
    ("f-stall", "stall", "stall_timeout"),
    ("f-ttft-stall", "ttft_stall", "ttft_timeout"),
    ("f-malformed", "malformed_json", "invalid_response"),
    ("f-no-done", "no_done", "stream_interrupted"),
    ("f-empty", "empty", "empty_response"),
];

fn target(name: &str, backend: &str, url: &str, extra: &str) -> String {
    format!(
        r#"
        [[targets]]
        name = "{name}"
        backend = "{backend}"
        url = "{url}"
        {extra}
        "#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_lands_in_exactly_its_category() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(5),
        stall: Duration::from_secs(60),
        ..SimConfig::default()
    })
    .await;
    let url = sim.url();
    let mut toml = String::from(
        r#"
        seed = 2
        [defaults]
        model = "m"
        rate = 5
        max_concurrency = 2
        output_tokens = 8
        input_tokens = 16
        connect_timeout = "1s"
        ttft_timeout = "1s"
        stall_timeout = "300ms"
        request_timeout = "3s"
        "#,
    );
    for (i, (name, fault, _)) in FAULTS.iter().enumerate() {
        // Alternate wire formats: every fault must be caught on both.
        let backend = if i % 2 == 0 { "openai-chat" } else { "openai" };
        let header = format!(r#"headers = {{ "x-inferprobe-fault" = "{fault}" }}"#);
        toml += &target(name, backend, &url, &header);
    }
    toml += &target("healthy", "openai-chat", &url, "");
    // Transport failures, from real sockets and resolvers.
    let closed = format!("http://127.0.0.1:{}", closed_port().await);
    toml += &target("t-connect", "openai", &closed, "");
    toml += &target("t-dns", "openai", "http://inferprobe-test.invalid", "");
    toml += &target("t-tls", "openai", &url.replace("http://", "https://"), "");
    let (port, _listener, _filler) = unresponsive_port();
    toml += &target(
        "t-connect-timeout",
        "openai",
        &format!("http://127.0.0.1:{port}"),
        "connect_timeout = \"300ms\"",
    );
    let huge = format!(
        "data: {{\"choices\":[{{\"text\":\"{}\"}}]}}\n\n",
        "x".repeat(4096)
    );
    let big = serve(Capture::stream(&huge), Duration::ZERO).await;
    toml += &target(
        "t-too-large",
        "openai",
        &format!("http://{big}"),
        "max_event_bytes = 1024",
    );
    // A real 10-event vLLM transcript against tighter event and byte budgets.
    let vllm = fixtures_capture("vllm", "completions-usage");
    let replay = format!("http://{}", serve(vllm, Duration::ZERO).await);
    toml += &target("t-max-events", "openai", &replay, "max_events = 5");
    toml += &target(
        "t-max-bytes",
        "openai",
        &replay,
        "max_response_bytes = 1024",
    );
    toml += &target(
        "t-total",
        "openai",
        &url,
        "output_tokens = 1000\nrequest_timeout = \"1s\"\nttft_timeout = \"1s\"",
    );

    let daemon = start_daemon(&toml).await;
    let mut expected: Vec<(&str, &str)> = FAULTS.iter().map(|&(t, _, c)| (t, c)).collect();
    expected.extend([
        ("t-connect", "connect"),
        ("t-dns", "dns"),
        ("t-tls", "tls"),
        ("t-connect-timeout", "connect_timeout"),
        ("t-too-large", "too_large"),
        ("t-max-events", "too_large"),
        ("t-max-bytes", "too_large"),
        ("t-total", "request_timeout"),
    ]);
    let scrape = daemon
        .wait_for(Duration::from_secs(40), |s| {
            s.requests("healthy") >= 3.0 && expected.iter().all(|(t, _)| s.requests(t) >= 3.0)
        })
        .await;

    for (target, category) in &expected {
        assert_only_category(&scrape, target, category);
    }
    assert_eq!(scrape.all_errors("healthy"), 0.0, "{}", scrape.text);
    assert!(scrape.successes("healthy") >= 3.0);

    // Still up and answering after all of that.
    assert_eq!(daemon.get("/healthz", None).await.status(), 200);
    assert_eq!(daemon.get("/readyz", None).await.status(), 200);
    let mut targets: Vec<&str> = expected.iter().map(|(t, _)| *t).collect();
    targets.push("healthy");
    assert_totals_consistent(&daemon, &targets).await;
    let report = daemon.stop().await;
    assert_eq!(
        report.cut, 0,
        "every in-flight probe ends within its own timeouts"
    );
}

fn fixtures_capture(server: &str, name: &str) -> Capture {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(server);
    Capture::load(&dir, name)
}

fn assert_only_category(scrape: &Scrape, target: &str, category: &str) {
    let requests = scrape.requests(target);
    for c in ErrorCategory::ALL {
        let n = scrape.errors(target, c.as_str());
        if c.as_str() == category {
            assert_eq!(n, requests, "{target}: every probe should be {category}");
        } else {
            assert_eq!(
                n, 0.0,
                "{target}: {n} probes landed in {c}, expected {category}"
            );
        }
    }
    assert_eq!(
        scrape.successes(target),
        0.0,
        "{target}: no probe may succeed"
    );
}

/// `requests_total` = successes + errors in every scrape, even with probes finishing
/// while it is taken (recording a probe is atomic with respect to scrapes).
async fn assert_totals_consistent(daemon: &common::Daemon, targets: &[&str]) {
    for _ in 0..20 {
        let s = daemon.scrape().await;
        for t in targets {
            let (requests, successes, errors) = (s.requests(t), s.successes(t), s.all_errors(t));
            assert_eq!(
                requests,
                successes + errors,
                "{t}: {successes} + {errors} != {requests}"
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_faults_keep_the_books_balanced() {
    use inferprobe::sim::Fault;
    let faults = Fault::ALL
        .iter()
        // Faults that hold a probe until its timeouts would only slow this test down.
        .filter(|f| {
            !matches!(
                f,
                Fault::Stall | Fault::TtftStall | Fault::Endless | Fault::Drip
            )
        })
        .map(|&f| (f, 0.05))
        .collect();
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(10),
        itl: Duration::from_millis(2),
        faults,
        seed: Some(9),
        ..SimConfig::default()
    })
    .await;
    let toml = format!(
        r#"
        seed = 3
        [defaults]
        url = "{}"
        model = "m"
        rate = 40
        max_concurrency = 8
        output_tokens = 8
        [[targets]]
        name = "chaos"
        "#,
        sim.url()
    );
    let daemon = start_daemon(&toml).await;
    let scrape = daemon
        .wait_for(Duration::from_secs(30), |s| s.requests("chaos") >= 150.0)
        .await;
    let errors = scrape.all_errors("chaos");
    assert!(errors > 0.0 && scrape.successes("chaos") > 0.0);
    assert_totals_consistent(&daemon, &["chaos"]).await;
    daemon.stop().await;
}

/// The probe arms its deadline timer lazily (events push the stall deadline back without
/// touching the timer), so the one deadline that moves *earlier*, TTFT's giving way to the
/// stall deadline at the first token, must re-arm it at once: a stall is caught a stall
/// timeout after the last event, not when the much later TTFT deadline would have fired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_is_caught_at_the_stall_deadline_even_when_the_ttft_one_is_far_later() {
    use std::sync::Arc;

    use inferprobe::probe::{Outcome, Prober};
    use inferprobe::prompt::Prompt;
    use prometheus_client::metrics::counter::Counter;
    use rand::{SeedableRng, rngs::StdRng};
    use tokio_util::sync::CancellationToken;

    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(10),
        itl: Duration::from_millis(5),
        stall: Duration::from_secs(120),
        ..SimConfig::default()
    })
    .await;
    let toml = format!(
        r#"
        [[targets]]
        name = "lazy-timer"
        backend = "openai-chat"
        url = "{}"
        model = "m"
        output_tokens = 8
        ttft_timeout = "30s"
        stall_timeout = "300ms"
        request_timeout = "60s"
        headers = {{ "x-inferprobe-fault" = "stall" }}
        "#,
        sim.url()
    );
    let target = Arc::clone(&common::parse_config(&toml).unwrap().targets[0]);
    let prober = Prober::new(Arc::clone(&target), Counter::default()).unwrap();
    let prompt: Prompt = target.prompts.next(&mut StdRng::seed_from_u64(1));
    let started = std::time::Instant::now();
    let report = prober
        .probe("lazy-timer-1", &prompt, &CancellationToken::new())
        .await;
    let took = started.elapsed();
    let Outcome::Finished(Err(e)) = &report.outcome else {
        panic!("expected a stall timeout, got {:?}", report.outcome);
    };
    assert_eq!(e.category(), ErrorCategory::StallTimeout, "{e}");
    assert!(
        report.record.has_token(),
        "the stall came after the first token"
    );
    // 300 ms after the last event; the TTFT deadline would have been 30 s. Generous for a
    // busy 2-core machine, far below the wrong answer.
    assert!(took < Duration::from_secs(5), "took {took:?}");
}
