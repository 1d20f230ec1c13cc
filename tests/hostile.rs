//! The hostile-server fault matrix: a raw-TCP server that misbehaves at the byte level
//! (`tests/common/hostile.rs`), one target per behaviour.
//!
//! For every target: its failures land in exactly the expected category; the server
//! alternates fault / healthy per path, so the books must show one failure per odd request
//! and one success per even one (the probe after each fault succeeds); the requests the
//! server received equal the probes the daemon counted (plus the retries, where a
//! behaviour provokes them); successes carry exactly the healthy stream's tokens and text;
//! and the daemon still answers /healthz.

use crate::common;

use std::time::Duration;

use common::hostile::faults::{GZIP_GAP, REDIRECT_PATH, REDIRECT_SECRET};
use common::hostile::{Hostile, Refuser, TEXT_REGEX, TOKENS, header};
use common::{Daemon, Scrape, start_daemon};
use inferprobe::error::ErrorCategory;

/// Short timeouts keep the suite fast; the drips and gaps are sized against them.
fn defaults() -> String {
    format!(
        r#"
        seed = 11
        [defaults]
        backend = "openai-chat"
        model = "m"
        rate = 4
        max_concurrency = 1
        input_tokens = 16
        output_tokens = 4
        connect_timeout = "500ms"
        ttft_timeout = "1s"
        stall_timeout = "1s"
        request_timeout = "3s"
        validate = {{ regex = '{TEXT_REGEX}' }}
        "#
    )
}

fn target(name: &str, url: &str, extra: &str) -> String {
    format!("[[targets]]\nname = \"{name}\"\nurl = \"{url}\"\n{extra}\n")
}

/// A target named after its path segment, the category its faults must land in (`None`:
/// every probe must succeed), and extra target config.
type Case = (&'static str, Option<&'static str>, &'static str);

/// Start one daemon with one target per case against one hostile server, wait until every
/// target made at least 4 probes (2 faults, 2 healthy), and check every case.
async fn run_matrix(cases: &[Case]) -> (Daemon, Hostile) {
    let server = Hostile::start().await;
    let mut toml = defaults();
    for (segment, _, extra) in cases {
        toml += &target(segment, &server.url(segment), extra);
    }
    let daemon = start_daemon(&toml).await;
    daemon
        .wait_for(Duration::from_secs(25), |s| {
            cases.iter().all(|(t, _, _)| s.requests(t) >= 4.0)
        })
        .await;
    let page = daemon.get("/", None).await.text().await.unwrap();
    for &(segment, expected, _) in cases {
        let (s, received) = settled(&daemon, segment, || server.requests(segment)).await;
        let failures = failures_on_page(&page, segment);
        check_books(&s, segment, received, expected, &failures);
    }
    assert_eq!(daemon.get("/healthz", None).await.status(), 200);
    (daemon, server)
}

/// A scrape taken while `target` has nothing in flight, with the server-side `count`
/// unchanged across it: then every request the server saw belongs to a probe the scrape
/// counts, and every probe the scrape counts has reached the server.
async fn settled<T: PartialEq>(
    daemon: &Daemon,
    target: &str,
    count: impl Fn() -> T,
) -> (Scrape, T) {
    for _ in 0..400 {
        let before = count();
        let s = daemon.scrape().await;
        let after = count();
        let in_flight = s.sum("inferprobe_requests_in_flight", &[("target", target)]);
        if before == after && in_flight == 0.0 {
            return (s, after);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{target}: no quiet moment to take a consistent scrape");
}

/// The failed probes of `target` on the status page (category and cause), for messages.
fn failures_on_page(page: &str, target: &str) -> Vec<String> {
    let Some(start) = page.find(&format!("<section id=\"{target}\">")) else {
        return Vec::new();
    };
    let section = &page[start..];
    let section = &section[..section.find("</section>").unwrap_or(section.len())];
    let rows = section.split("<tr class=\"bad\">").skip(1);
    let text = |row: &str| {
        let row = &row[..row.find("</tr>").unwrap_or(row.len())];
        let cells = row.split("<td>").map(|c| c.split('<').next().unwrap_or(""));
        cells
            .filter(|c| !c.is_empty())
            .collect::<Vec<_>>()
            .join(" | ")
    };
    rows.map(text).collect()
}

/// `received` requests reached the server, alternating fault / healthy from the first.
fn check_books(
    s: &Scrape,
    target: &str,
    received: u64,
    expected: Option<&str>,
    failures: &[String],
) {
    let (requests, successes, errors) = (
        s.requests(target),
        s.successes(target),
        s.all_errors(target),
    );
    let ctx =
        format!("{target}: {requests} requests, {successes} ok, {errors} failed {failures:#?}");
    assert_eq!(
        requests, received as f64,
        "{ctx}: the server received {received}"
    );
    assert_eq!(requests, successes + errors, "{ctx}");
    match expected {
        Some(category) => {
            for c in ErrorCategory::ALL.map(ErrorCategory::as_str) {
                if c != category {
                    let n = s.errors(target, c);
                    assert_eq!(n, 0.0, "{ctx}: {n} in {c}, expected only {category}");
                }
            }
            let faults = received.div_ceil(2) as f64;
            assert_eq!(
                s.errors(target, category),
                faults,
                "{ctx}: one {category} per fault"
            );
            assert_eq!(
                successes,
                (received / 2) as f64,
                "{ctx}: the probe after each fault succeeds"
            );
        }
        None => {
            let failed: Vec<String> = ErrorCategory::ALL
                .map(ErrorCategory::as_str)
                .into_iter()
                .filter(|c| s.errors(target, c) > 0.0)
                .map(|c| format!("{c}: {}", s.errors(target, c)))
                .collect();
            assert_eq!(
                successes, requests,
                "{ctx}: every probe succeeds; {failed:?}"
            );
        }
    }
    let tokens = s.sum("inferprobe_output_tokens_total", &[("target", target)]);
    assert_eq!(tokens, successes * TOKENS as f64, "{ctx}: output tokens");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silence_stalls_and_drips_are_timeouts() {
    let (daemon, _server) = run_matrix(&[
        ("silent", Some("ttft_timeout"), ""),
        ("head-stall", Some("ttft_timeout"), ""),
        ("drip-early", Some("ttft_timeout"), ""),
        // A byte every 250 ms with a 1 s stall timeout: if bytes (not events) reset the
        // stall deadline, these probes would run into request_timeout instead.
        ("drip-late", Some("stall_timeout"), ""),
    ])
    .await;
    assert_eq!(daemon.stop().await.cut, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_streams_land_in_their_categories() {
    let (daemon, _server) = run_matrix(&[
        ("reset", Some("stream_interrupted"), ""),
        ("no-done-chunked", Some("stream_interrupted"), ""),
        ("no-done-close", Some("stream_interrupted"), ""),
        ("html", Some("invalid_response"), ""),
        ("not-json", Some("invalid_response"), ""),
        ("error-event", Some("stream_error_event"), ""),
        ("huge-event", Some("too_large"), ""),
        ("endless.events", Some("too_large"), "max_events = 100"),
        (
            "endless.bytes",
            Some("too_large"),
            "max_response_bytes = 16384",
        ),
        ("gzip-corrupt", Some("invalid_response"), ""),
        ("gzip-truncated", Some("stream_interrupted"), ""),
    ])
    .await;
    assert_eq!(daemon.stop().await.cut, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_statuses_and_redirects() {
    let (daemon, _server) = run_matrix(&[
        ("redirect", Some("invalid_response"), ""),
        // A port that answers in another protocol answered, with nothing usable.
        ("tls-alert", Some("invalid_response"), ""),
        ("h2-goaway", Some("invalid_response"), ""),
        ("rate-limited", Some("rate_limited"), ""),
        ("unavailable", Some("http_5xx"), ""),
    ])
    .await;
    // The failure text (the log line's, shown on the status page) says why, names where
    // the redirect pointed, and leaves out its query, which may carry a token.
    let page = daemon.get("/", None).await.text().await.unwrap();
    assert!(page.contains("redirects are not followed"), "{page}");
    assert!(page.contains(REDIRECT_PATH), "{page}");
    assert!(!page.contains(REDIRECT_SECRET), "{page}");
    assert!(page.contains("did not answer with HTTP"), "{page}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_utf8_gzip_and_http10_succeed_exactly() {
    let identity = r#"headers = { "accept-encoding" = "identity" }"#;
    let (daemon, server) = run_matrix(&[
        ("split-utf8", None, ""),
        // Its gaps (3 × 350 ms) stay far inside the stall timeout even on a busy machine;
        // TTFT is still checked against 0.5 s below.
        (
            "gzip",
            None,
            "ttft_timeout = \"2s\"\nstall_timeout = \"2s\"",
        ),
        ("negotiate.default", None, ""),
        ("negotiate.identity", None, identity),
        ("http10", None, ""),
    ])
    .await;
    // Every success passed `validate.regex`: the multi-byte text arrived intact.

    // inferprobe asks for gzip as SDKs do, and a target can opt out.
    let accepts = |segment| -> Vec<String> {
        let heads = server.heads(segment);
        let values = heads
            .iter()
            .map(|h| header(h, "accept-encoding").unwrap_or("").to_owned());
        values.collect()
    };
    for segment in ["gzip", "negotiate.default"] {
        let values = accepts(segment);
        assert!(
            values.iter().all(|v| v.contains("gzip")),
            "{segment}: {values:?}"
        );
    }
    let values = accepts("negotiate.identity");
    assert!(values.iter().all(|v| v == "identity"), "{values:?}");

    // Gzip is decoded as it arrives: the first token is timed when its event is decoded,
    // not when the body ends. The gzipped responses (odd requests) last over 3 gaps, over
    // 1 s, yet every TTFT is far below that; the plain ones take milliseconds.
    assert!(3 * GZIP_GAP > Duration::from_secs(1));
    let (s, received) = settled(&daemon, "gzip", || server.requests("gzip")).await;
    let bucket = |name: &str, le: &str| {
        let labels = [("target", "gzip"), ("le", le)];
        let name = format!("{name}_bucket");
        assert_eq!(s.matching(&name, &labels).count(), 1, "{name} le={le}");
        s.sum(&name, &labels)
    };
    let ttft = "inferprobe_time_to_first_token_seconds";
    let (_, count) = s.histogram(ttft, "gzip");
    assert_eq!(bucket(ttft, "0.5"), count, "{}", s.text);
    let e2el = "inferprobe_e2e_request_latency_seconds";
    let (_, e2el_count) = s.histogram(e2el, "gzip");
    let long = e2el_count - bucket(e2el, "1.0");
    assert_eq!(long, received.div_ceil(2) as f64, "{}", s.text);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_connect_and_the_next_probe_succeeds() {
    let refuser = Refuser::new().await;
    let daemon = start_daemon(&(defaults() + &target("refuse", &refuser.url(), ""))).await;
    let wait = Duration::from_secs(10);
    for round in 1..=2u32 {
        let round = f64::from(round);
        daemon
            .wait_for(wait, |s| s.errors("refuse", "connect") >= round)
            .await;
        refuser.serve_one().await;
        daemon
            .wait_for(wait, |s| s.successes("refuse") >= round)
            .await;
    }
    let (s, served) = settled(&daemon, "refuse", || refuser.served()).await;
    let (requests, successes) = (s.requests("refuse"), s.successes("refuse"));
    assert_eq!(successes, 2.0, "each probe after the port opened succeeded");
    assert_eq!(served, 2);
    assert_eq!(
        s.errors("refuse", "connect"),
        requests - successes,
        "{}",
        s.text
    );
    assert_eq!(daemon.get("/healthz", None).await.status(), 200);
    daemon.stop().await;
}

/// Keep-alive race: the server closes the pooled connection as the next request arrives.
/// The probe retries once on a new connection and succeeds (probe.rs, `Stop::Closed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_connection_closed_before_the_response_is_retried() {
    let server = Hostile::start().await;
    let toml = defaults() + &target("close-idle", &server.url("close-idle"), "");
    let daemon = start_daemon(&toml).await;
    daemon
        .wait_for(Duration::from_secs(15), |s| s.requests("close-idle") >= 4.0)
        .await;
    let counts = || {
        (
            server.requests("close-idle"),
            server.dropped(),
            server.connections(),
        )
    };
    let (s, (received, dropped, connections)) = settled(&daemon, "close-idle", counts).await;
    let requests = s.requests("close-idle");
    assert_eq!(s.successes("close-idle"), requests, "{}", s.text);
    assert_eq!(s.all_errors("close-idle"), 0.0);
    assert!(
        dropped >= 2,
        "the race happened: {dropped} requests closed on"
    );
    assert_eq!(
        received,
        requests as u64 + dropped,
        "one retry per closed request"
    );
    assert_eq!(
        connections, requests as u64,
        "each probe opened exactly one connection"
    );
    let opened = s.sum(
        "inferprobe_connections_opened_total",
        &[("target", "close-idle")],
    );
    assert_eq!(opened, connections as f64);
    let retries = s.sum(
        "inferprobe_request_retries_total",
        &[("target", "close-idle")],
    );
    assert_eq!(retries, dropped as f64, "every retry is counted");
    daemon.stop().await;
}

/// A server that closes every connection before answering: each probe is on a connection
/// it opened itself, so nothing is retried and every probe fails as `stream_interrupted`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_always_closes_is_never_retried() {
    let server = Hostile::start().await;
    let toml = defaults() + &target("close-always", &server.url("close-always"), "");
    let daemon = start_daemon(&toml).await;
    daemon
        .wait_for(Duration::from_secs(15), |s| {
            s.requests("close-always") >= 3.0
        })
        .await;
    let counts = || (server.requests("close-always"), server.connections());
    let (s, (received, connections)) = settled(&daemon, "close-always", counts).await;
    let requests = s.requests("close-always");
    let interrupted = s.errors("close-always", "stream_interrupted");
    assert_eq!(interrupted, requests, "{}", s.text);
    assert_eq!(s.all_errors("close-always"), requests);
    assert_eq!(connections, requests as u64);
    assert_eq!(received, requests as u64);
    let retries = s.sum(
        "inferprobe_request_retries_total",
        &[("target", "close-always")],
    );
    assert_eq!(retries, 0.0);
    assert_eq!(daemon.get("/healthz", None).await.status(), 200);
    daemon.stop().await;
}

/// A replica that drops 30% of its (new) connections unanswered shows a 30% error ratio,
/// not the ~9% a silent retry would leave, in both connection modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_connections_count_as_failures() {
    for mode in ["reuse", "fresh"] {
        let server = Hostile::start().await;
        let toml = defaults().replace("rate = 4", "rate = 25")
            + &target(
                "drop-30",
                &server.url("drop-30"),
                &format!("connection = \"{mode}\""),
            );
        let daemon = start_daemon(&toml).await;
        daemon
            .wait_for(Duration::from_secs(30), |s| s.requests("drop-30") >= 60.0)
            .await;
        let counts = || (server.requests("drop-30"), server.dropped());
        let (s, (received, dropped)) = settled(&daemon, "drop-30", counts).await;
        daemon.stop().await;
        let requests = s.requests("drop-30");
        let errors = s.all_errors("drop-30");
        assert_eq!(received, requests as u64, "{mode}: one request per probe");
        assert_eq!(
            errors, dropped as f64,
            "{mode}: every drop is a failure\n{}",
            s.text
        );
        assert_eq!(errors, s.errors("drop-30", "stream_interrupted"));
        let ratio = errors / requests;
        // The server drops requests 1, 4, 7 of every ten: 30% up to the last partial ten.
        assert!(
            (0.25..=0.35).contains(&ratio),
            "{mode}: error ratio {ratio}"
        );
        let retries = s.sum("inferprobe_request_retries_total", &[("target", "drop-30")]);
        assert_eq!(retries, 0.0, "{mode}");
    }
}
