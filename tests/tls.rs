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
        let dir = tempfile::tempdir().unwrap();
        let mut ca_params = CertificateParams::new(Vec::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let issue = |names: Vec<String>, stem: &str| {
            let key = KeyPair::generate().unwrap();
            let cert = CertificateParams::new(names)
                .unwrap()
                .signed_by(&key, &ca)
                .unwrap();
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

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }
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
    let ca = format!("tls_ca_file = \"{}\"", pki.path("ca.pem"));
    let client = format!(
        "{ca}\ntls_client_cert_file = \"{}\"\ntls_client_key_file = \"{}\"",
        pki.path("client.pem"),
        pki.path("client-key.pem")
    );
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
