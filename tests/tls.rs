//! TLS against a local HTTPS simulator with its own certificate authority: trusted by a
//! configured CA bundle, rejected without it, accepted with verification disabled, and
//! mutual TLS with a client certificate.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{start_daemon, start_sim};
use inferprobe::sim::SimConfig;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate.
    fn new() -> Self {
        Self::expiring(None)
    }

    /// [`Self::new`], the server certificate expiring at midnight UTC of day `server_days`
    /// since the Unix epoch (rcgen's default otherwise: 4096-01-01).
    fn expiring(server_days: Option<i64>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut ca_params = CertificateParams::new(Vec::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let issue = |names: Vec<String>, stem: &str| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(names).unwrap();
            if let (Some(days), "server") = (server_days, stem) {
                let (y, m, d) = civil(days);
                params.not_after = rcgen::date_time_ymd(y, m, d);
            }
            let cert = params.signed_by(&key, &ca).unwrap();
            std::fs::write(dir.path().join(format!("{stem}.pem")), cert.pem()).unwrap();
            std::fs::write(
                dir.path().join(format!("{stem}-key.pem")),
                key.serialize_pem(),
            )
            .unwrap();
        };
        issue(vec!["localhost".into(), "127.0.0.1".into()], "server");
        issue(vec!["inferprobe-client".into()], "client");
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        Self { dir }
    }

    /// The target keys that trust this CA.
    fn ca_line(&self) -> String {
        format!("tls_ca_file = \"{}\"", self.path("ca.pem"))
    }

    /// The keys that trust this CA and present the client certificate.
    fn client_lines(&self) -> String {
        format!(
            "{}\ntls_client_cert_file = \"{}\"\ntls_client_key_file = \"{}\"",
            self.ca_line(),
            self.path("client.pem"),
            self.path("client-key.pem")
        )
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }
}

/// The calendar date of day `days` since 1970-01-01 (Hinnant's days-to-civil).
fn civil(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y as i32, m as u8, d as u8)
}

fn https_sim(pki: &Pki, client_ca: bool) -> SimConfig {
    SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tls_cert: Some(pki.path("server.pem").into()),
        tls_key: Some(pki.path("server-key.pem").into()),
        tls_client_ca: client_ca.then(|| Path::new(&pki.path("ca.pem")).to_owned()),
        ..SimConfig::default()
    }
}

fn target(name: &str, url: &str, extra: &str) -> String {
    format!(
        "[[targets]]\nname = \"{name}\"\nurl = \"{url}\"\nmodel = \"m\"\nrate = 10\noutput_tokens = 2\n{extra}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_trust_verification_and_mutual_tls() {
    let pki = Pki::new();
    let server = start_sim(https_sim(&pki, false)).await;
    let mutual = start_sim(https_sim(&pki, true)).await;
    let https = |addr: std::net::SocketAddr| format!("https://127.0.0.1:{}", addr.port());
    let (ca, client) = (pki.ca_line(), pki.client_lines());
    let toml = [
        target("trusted", &https(server.addr), &ca),
        target("unknown-ca", &https(server.addr), ""),
        target(
            "insecure",
            &https(server.addr),
            "insecure_skip_verify = true",
        ),
        target("mtls", &https(mutual.addr), &client),
        target("mtls-no-cert", &https(mutual.addr), &ca),
        target(
            "localhost-name",
            &format!("https://localhost:{}", server.addr.port()),
            &ca,
        ),
    ]
    .concat();
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(20), |s| {
            ["trusted", "insecure", "mtls", "localhost-name"]
                .iter()
                .all(|t| s.successes(t) >= 3.0)
                && ["unknown-ca", "mtls-no-cert"]
                    .iter()
                    .all(|t| s.requests(t) >= 3.0)
        })
        .await;
    daemon.stop().await;
    for t in ["trusted", "insecure", "mtls", "localhost-name"] {
        assert_eq!(s.all_errors(t), 0.0, "{t}:\n{}", s.text);
    }
    assert_eq!(
        s.errors("unknown-ca", "tls"),
        s.requests("unknown-ca"),
        "{}",
        s.text
    );
    // Under TLS 1.3 the server rejects a missing client certificate after the client's
    // handshake: its alert races the request's first write, so the probe may only see the
    // connection close. Either way every probe fails.
    let rejected = s.errors("mtls-no-cert", "tls") + s.errors("mtls-no-cert", "stream_interrupted");
    assert_eq!(rejected, s.requests("mtls-no-cert"), "{}", s.text);
}

#[test]
fn bad_tls_files_fail_the_config_check() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let config = dir.path().join("c.toml");
    let cases = [
        (
            format!("tls_ca_file = \"{}\"", junk.display()),
            "`targets[0].tls_ca_file`",
        ),
        (
            "tls_ca_file = \"/nonexistent/ca.pem\"".to_owned(),
            "cannot read /nonexistent/ca.pem",
        ),
        (
            format!("tls_client_cert_file = \"{}\"", junk.display()),
            "set both",
        ),
    ];
    for (line, expected) in cases {
        std::fs::write(&config, target("t", "https://h", &line)).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_inferprobe"))
            .args(["check", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{line}: {stderr}");
        assert!(stderr.contains(expected), "{line}: {stderr}");
    }
}

fn phase(s: &common::Scrape, target: &str, phase: &str) -> (f64, f64) {
    let labels = [("target", target), ("phase", phase)];
    (
        s.sum("inferprobe_connection_phase_seconds_sum", &labels),
        s.sum("inferprobe_connection_phase_seconds_count", &labels),
    )
}

fn expiry(s: &common::Scrape, target: &str, chain: &str) -> Option<f64> {
    let labels = [("target", target), ("chain", chain)];
    let name = "inferprobe_tls_earliest_cert_expiry_timestamp_seconds";
    s.matching(name, &labels).next().map(|x| x.value)
}

/// Each request that opens a connection records its DNS, TCP and TLS phases, and a slow
/// handshake lands in `tls` alone; a reused connection records none, an IP literal no DNS,
/// plain HTTP no TLS; the chains' expiries are the certificates' own notAfter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_phases_and_certificate_expiry() {
    // Long enough that a request queued behind it is told from a loaded machine's delays.
    const HANDSHAKE: Duration = Duration::from_millis(400);
    let today = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        / 86_400;
    let pki = Pki::expiring(Some(today + 10));
    let slow = start_sim(SimConfig {
        tls_handshake_delay: HANDSHAKE,
        ..https_sim(&pki, false)
    })
    .await;
    let mutual = start_sim(https_sim(&pki, true)).await;
    let plain = start_sim(SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    })
    .await;
    let (ca, client) = (pki.ca_line(), pki.client_lines());
    let toml = [
        target(
            "fresh",
            &format!("https://localhost:{}", slow.addr.port()),
            &format!("{ca}\nconnection = \"fresh\""),
        ),
        target(
            "reused",
            &format!("https://127.0.0.1:{}", slow.addr.port()),
            &ca,
        ),
        target(
            "mtls",
            &format!("https://127.0.0.1:{}", mutual.addr.port()),
            &client,
        ),
        target(
            "plain",
            &format!("http://localhost:{}", plain.addr.port()),
            "",
        ),
    ]
    .concat();
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            ["fresh", "reused", "mtls", "plain"]
                .iter()
                .all(|t| s.successes(t) >= 8.0)
        })
        .await;
    daemon.stop().await;
    for t in ["fresh", "reused", "mtls", "plain"] {
        assert_eq!(s.all_errors(t), 0.0, "{t}:\n{}", s.text);
    }

    // A fresh connection per probe: every phase per request, the slow handshake in `tls`.
    let (tls_sum, tls_count) = phase(&s, "fresh", "tls");
    let (connect_sum, connect_count) = phase(&s, "fresh", "connect");
    let (_, resolve_count) = phase(&s, "fresh", "resolve");
    let (_, processing_count) = phase(&s, "fresh", "processing");
    assert!(tls_count >= s.successes("fresh"), "{}", s.text);
    // Phases are recorded at the headers, requests_total at the end: the rest are in flight.
    let started =
        s.requests("fresh") + s.sum("inferprobe_requests_in_flight", &[("target", "fresh")]);
    assert!(tls_count <= started, "{}", s.text);
    // One connection's phases are observed one after another, so a scrape may fall between.
    for count in [connect_count, resolve_count, processing_count] {
        assert!((count - tls_count).abs() <= 1.0, "{}", s.text);
    }
    let tls_mean = tls_sum / tls_count;
    assert!(
        (HANDSHAKE.as_secs_f64()..HANDSHAKE.as_secs_f64() + 0.5).contains(&tls_mean),
        "tls mean {tls_mean}\n{}",
        s.text
    );
    let connect_mean = connect_sum / connect_count;
    assert!(
        connect_mean < HANDSHAKE.as_secs_f64() / 2.0,
        "connect mean {connect_mean}"
    );

    // A pooled connection: set up once (no DNS for an IP literal), waited on every time.
    let (_, reused_tls) = phase(&s, "reused", "tls");
    let (_, reused_processing) = phase(&s, "reused", "processing");
    assert!((1.0..=2.0).contains(&reused_tls), "{}", s.text);
    assert!(reused_processing >= s.successes("reused"), "{}", s.text);
    assert_eq!(phase(&s, "reused", "resolve").1, 0.0, "{}", s.text);
    let resolve_series = s.matching(
        "inferprobe_connection_phase_seconds_count",
        &[("target", "reused"), ("phase", "resolve")],
    );
    assert_eq!(resolve_series.count(), 0, "no zero-filled resolve series");

    // The wait for headers is the server's (a few ms, over 100 on a loaded machine): never
    // the handshake a request queued behind, on the one HTTP/2 connection or its own.
    for t in ["fresh", "reused"] {
        let labels = [("target", t), ("phase", "processing"), ("le", "0.256")];
        let quick = s.sum("inferprobe_connection_phase_seconds_bucket", &labels);
        assert_eq!(quick, phase(&s, t, "processing").1, "{t}\n{}", s.text);
    }

    // Plain HTTP: DNS and connect, never TLS, no certificate.
    assert!(phase(&s, "plain", "connect").1 >= 1.0, "{}", s.text);
    assert!(phase(&s, "plain", "resolve").1 >= 1.0, "{}", s.text);
    let plain_tls = s.matching(
        "inferprobe_connection_phase_seconds_count",
        &[("target", "plain"), ("phase", "tls")],
    );
    assert_eq!(plain_tls.count(), 0, "{}", s.text);
    assert_eq!(expiry(&s, "plain", "server"), None, "{}", s.text);

    // The server chain's earliest notAfter is the 10-day leaf's (the CA's is rcgen's 4096).
    let ten_days = ((today + 10) * 86_400) as f64;
    for t in ["fresh", "reused", "mtls"] {
        assert_eq!(expiry(&s, t, "server"), Some(ten_days), "{t}\n{}", s.text);
    }
    for t in ["fresh", "reused"] {
        assert_eq!(expiry(&s, t, "client"), None, "{t}");
    }
    let rcgen_default = (civil_days(4096, 1, 1) * 86_400) as f64;
    assert_eq!(
        expiry(&s, "mtls", "client"),
        Some(rcgen_default),
        "{}",
        s.text
    );
}

/// Days since 1970-01-01 of a date (the inverse of [`civil`]).
fn civil_days(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
