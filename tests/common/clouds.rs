//! Stand-ins for the clouds' credential services, and the daemon as a child process whose
//! environment alone holds the cloud identity (the default chains read the environment,
//! which a test must not change in its own process).
//!
//! AWS STS answers `AssumeRoleWithWebIdentity` (IRSA's exchange) with credentials that
//! live `lifetime`; their session token `sim-expires-<unix>` is refused by the simulator
//! once past, so a daemon that does not refresh in time fails its probes.

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// The secret every stand-in issues and the simulator checks signatures with.
pub const AWS_SECRET: &str = "sim-SECRET-aws-5e6f7a8b9c";

/// What a stand-in issued: when, and the Unix second the credentials expire.
#[derive(Clone, Default)]
pub struct Issued(pub Arc<Mutex<Vec<(SystemTime, u64)>>>);

impl Issued {
    pub fn list(&self) -> Vec<(SystemTime, u64)> {
        self.0.lock().unwrap().clone()
    }
}

/// STS on 127.0.0.1: each `AssumeRoleWithWebIdentity` gets credentials for `lifetime`.
pub async fn sts(lifetime: Duration) -> (String, Issued) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let issued = Issued::default();
    let record = issued.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let record = record.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let record = record.clone();
                    async move {
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let form = String::from_utf8_lossy(&body);
                        assert!(form.contains("Action=AssumeRoleWithWebIdentity"), "{form}");
                        assert!(form.contains("WebIdentityToken=web-identity-jwt"), "{form}");
                        let now = SystemTime::now();
                        let expires = (now + lifetime)
                            .duration_since(UNIX_EPOCH)
                            .unwrap()
                            .as_secs();
                        let mut list = record.0.lock().unwrap();
                        list.push((now, expires));
                        let n = list.len();
                        let stamp =
                            httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(expires));
                        let iso =
                            humantime::format_rfc3339(httpdate::parse_http_date(&stamp).unwrap());
                        let xml = format!(
                            r#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>ASIASIM{n:08}</AccessKeyId>
      <SecretAccessKey>{AWS_SECRET}</SecretAccessKey>
      <SessionToken>sim-expires-{expires}</SessionToken>
      <Expiration>{iso}</Expiration>
    </Credentials>
    <SubjectFromWebIdentityToken>system:serviceaccount:probe:inferprobe</SubjectFromWebIdentityToken>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/probe/s{n}</Arn>
      <AssumedRoleId>AROASIM:s{n}</AssumedRoleId>
    </AssumedRoleUser>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>req-{n}</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>"#
                        );
                        let mut response = Response::new(Full::new(Bytes::from(xml)));
                        response
                            .headers_mut()
                            .insert("content-type", "text/xml".parse().unwrap());
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (url, issued)
}

/// What a stand-in answers a request with: status, content type, body.
type Answer = (u16, &'static str, String);

/// A stand-in on 127.0.0.1, over TLS with `tls`; `answer` sees the method, the path and
/// query, the headers and the body.
async fn stand_in(
    tls: Option<tokio_rustls::TlsAcceptor>,
    answer: impl Fn(&str, &str, &http::HeaderMap, &str) -> Answer + Send + Sync + 'static,
) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (answer, tls) = (Arc::clone(&answer), tls.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let answer = Arc::clone(&answer);
                    async move {
                        let (head, body) = req.into_parts();
                        let body = body.collect().await.unwrap().to_bytes();
                        let path = head.uri.path_and_query().map_or("/", |p| p.as_str());
                        let (status, kind, text) = answer(
                            head.method.as_str(),
                            path,
                            &head.headers,
                            &String::from_utf8_lossy(&body),
                        );
                        let mut response = Response::new(Full::new(Bytes::from(text)));
                        *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
                        response
                            .headers_mut()
                            .insert("content-type", kind.parse().unwrap());
                        Ok::<_, Infallible>(response)
                    }
                });
                let builder = hyper::server::conn::http1::Builder::new();
                match tls {
                    Some(tls) => {
                        if let Ok(stream) = tls.accept(stream).await {
                            let _ = builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                    }
                    None => {
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                }
            });
        }
    });
    addr
}

/// `now + lifetime` in Unix seconds, recorded as issued.
fn issue(issued: &Issued, lifetime: Duration) -> (usize, u64) {
    let now = SystemTime::now();
    let expires = (now + lifetime)
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut list = issued.0.lock().unwrap();
    list.push((now, expires));
    (list.len(), expires)
}

/// The GCE metadata server (GKE Workload Identity's), for `GCE_METADATA_HOST`: each token
/// request gets `…sim-expires-<unix>` living `lifetime`.
pub async fn metadata(lifetime: Duration) -> (String, Issued) {
    let issued = Issued::default();
    let record = issued.clone();
    let addr = stand_in(None, move |_, path, headers, _| {
        if headers.get("metadata-flavor").and_then(|v| v.to_str().ok()) != Some("Google") {
            return (403, "text/plain", "Metadata-Flavor: Google is required".into());
        }
        if !path.starts_with("/computeMetadata/v1/instance/service-accounts/default/token") {
            return (404, "text/plain", "not found".into());
        }
        let (n, expires) = issue(&record, lifetime);
        let body = format!(
            r#"{{"access_token":"ya29.gke-{n}-sim-expires-{expires}","expires_in":{},"token_type":"Bearer"}}"#,
            lifetime.as_secs()
        );
        (200, "application/json", body)
    })
    .await;
    (addr.to_string(), issued)
}

/// Entra ID's token endpoint over HTTPS, its certificate issued by a CA whose PEM is
/// written to `ca`: a workload identity's client assertion gets a token living `lifetime`.
pub async fn entra(lifetime: Duration, ca: &std::path::Path) -> (String, Issued) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let issuer = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    std::fs::write(ca, issuer.pem()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let tls = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let issued = Issued::default();
    let record = issued.clone();
    let addr = stand_in(Some(tls), move |method, path, _, form| {
        if method != "POST" || !path.ends_with("/oauth2/v2.0/token") {
            return (404, "text/plain", "not found".into());
        }
        let field = |name: &str| {
            url::form_urlencoded::parse(form.as_bytes())
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        if field("client_assertion") != "aks-federated-token" || field("client_id") != AZURE_CLIENT {
            return (401, "application/json", r#"{"error":"invalid_client"}"#.into());
        }
        let (n, expires) = issue(&record, lifetime);
        let body = format!(
            r#"{{"token_type":"Bearer","expires_in":{secs},"ext_expires_in":{secs},"access_token":"eyJ.aks-{n}-sim-expires-{expires}"}}"#,
            secs = lifetime.as_secs()
        );
        (200, "application/json", body)
    })
    .await;
    (format!("https://localhost:{}", addr.port()), issued)
}

/// The client id the Entra stand-in expects.
pub const AZURE_CLIENT: &str = "00000000-0000-0000-0000-0000000000a1";

/// The environment of a pod on GKE with Workload Identity: only the metadata server.
pub fn gke(dir: &std::path::Path, metadata: &str) -> Vec<(&'static str, String)> {
    vec![
        ("GCE_METADATA_HOST", metadata.to_owned()),
        // No gcloud file: ADC falls through to the metadata server.
        ("HOME", dir.display().to_string()),
        ("CLOUDSDK_CONFIG", dir.join("gcloud").display().to_string()),
    ]
}

/// The environment AKS's workload-identity webhook gives a pod, Entra at `authority`.
pub fn aks(
    dir: &std::path::Path,
    authority: &str,
    ca: &std::path::Path,
) -> Vec<(&'static str, String)> {
    let token = dir.join("azure-identity-token");
    std::fs::write(&token, "aks-federated-token").unwrap();
    vec![
        ("AZURE_FEDERATED_TOKEN_FILE", token.display().to_string()),
        ("AZURE_CLIENT_ID", AZURE_CLIENT.into()),
        (
            "AZURE_TENANT_ID",
            "11111111-1111-1111-1111-111111111111".into(),
        ),
        ("AZURE_AUTHORITY_HOST", authority.to_owned()),
        // The stand-in's CA, for the system roots the daemon's HTTP clients read.
        ("SSL_CERT_FILE", ca.display().to_string()),
    ]
}

/// The daemon run with `env` as its only cloud identity (every inherited `AWS_*`,
/// `GOOGLE_*` and `AZURE_*` variable removed), logging JSON at debug level to `log`.
pub struct CloudDaemon {
    child: Mutex<Child>,
    pub base: String,
    pub log: Arc<Mutex<String>>,
}

impl CloudDaemon {
    pub fn spawn(config: &std::path::Path, port: u16, env: &[(&str, String)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_inferprobe"));
        command
            .args(["run", "--config", config.to_str().unwrap()])
            .args(["--log-format", "json", "--log-level", "debug"]);
        for (name, _) in std::env::vars() {
            if ["AWS_", "GOOGLE_", "AZURE_", "GCE_"]
                .iter()
                .any(|p| name.starts_with(p))
            {
                command.env_remove(name);
            }
        }
        command
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", "/nonexistent/inferprobe-test")
            .env(
                "AWS_SHARED_CREDENTIALS_FILE",
                "/nonexistent/inferprobe-test",
            );
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = sink.lock().unwrap_or_else(|e| e.into_inner());
                log.push_str(&line);
                log.push('\n');
            }
        });
        Self {
            child: Mutex::new(child),
            base: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    pub async fn get(&self, path: &str) -> Option<String> {
        reqwest::get(format!("{}{path}", self.base))
            .await
            .ok()?
            .text()
            .await
            .ok()
    }

    /// Scrape until `done`, or panic after `timeout` with the last scrape and the log.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&super::Scrape) -> bool,
    ) -> super::Scrape {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(text) = self.get("/metrics").await {
                let scrape = super::Scrape::parse(text);
                if done(&scrape) {
                    return scrape;
                }
                if std::time::Instant::now() > deadline {
                    panic!(
                        "not met within {timeout:?}:\n{}\nlog:\n{}",
                        scrape.text,
                        self.log.lock().unwrap_or_else(|e| e.into_inner())
                    );
                }
            } else if let Ok(Some(status)) = self.child.lock().unwrap().try_wait() {
                panic!(
                    "the daemon exited ({status}); log:\n{}",
                    self.log.lock().unwrap_or_else(|e| e.into_inner())
                );
            } else if std::time::Instant::now() > deadline {
                panic!(
                    "no /metrics within {timeout:?}; log:\n{}",
                    self.log.lock().unwrap_or_else(|e| e.into_inner())
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, wait, and the whole log.
    pub fn stop(self) -> String {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
        drop(child);
        std::thread::sleep(Duration::from_millis(100));
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for CloudDaemon {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The environment of a pod on EKS with IRSA: a projected token and a role, STS at `sts`.
pub fn irsa(dir: &std::path::Path, sts: &str) -> Vec<(&'static str, String)> {
    let token = dir.join("web-identity-token");
    std::fs::write(&token, "web-identity-jwt").unwrap();
    vec![
        (
            "AWS_ROLE_ARN",
            "arn:aws:iam::123456789012:role/probe".into(),
        ),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token.display().to_string()),
        ("AWS_ENDPOINT_URL_STS", sts.to_owned()),
        ("AWS_REGION", "us-east-1".into()),
    ]
}
