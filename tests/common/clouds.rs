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

/// The daemon run with `env` as its only cloud identity (every inherited `AWS_*`,
/// `GOOGLE_*` and `AZURE_*` variable removed), logging JSON at debug level to `log`.
pub struct CloudDaemon {
    child: Child,
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
            child,
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
    pub fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(100));
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for CloudDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
