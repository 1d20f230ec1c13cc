//! Test harness: the simulator and the daemon in-process on 127.0.0.1:0, and a scraper that
//! reads the exposition the way Prometheus would (over HTTP).
#![allow(dead_code)] // each test binary uses a different subset

pub mod adapters;
pub mod canary;
pub mod clouds;
pub mod docs;
pub mod gates;
pub mod hostile;
pub mod kube_api;
pub mod llama;
pub mod otlp;
pub mod process;
pub mod prometheus;
pub mod replay;
pub mod rollout;
pub mod structured;
pub mod templates;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use figment::Figment;
use figment::providers::{Format, Toml};
use inferprobe::config::{self, RawConfig};
use inferprobe::sim::{self, SimConfig};
use inferprobe::{DrainReport, Shutdown};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub struct Sim {
    pub addr: SocketAddr,
    stop: CancellationToken,
}

impl Sim {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A file_sd file `pool.json` in `dir`: each member (`host:port`, or a URL) a group of its
/// own, labelled `pod = "r<i>"` and with its `labels`.
#[allow(dead_code)]
pub fn pool_file(dir: &std::path::Path, members: &[(&str, &[(&str, &str)])]) -> std::path::PathBuf {
    let groups: Vec<serde_json::Value> = members
        .iter()
        .enumerate()
        .map(|(i, (address, labels))| {
            let mut map = serde_json::Map::new();
            map.insert("pod".into(), format!("r{i}").into());
            for (k, v) in *labels {
                map.insert((*k).into(), (*v).into());
            }
            let address = address.trim_start_matches("http://");
            serde_json::json!({ "targets": [address], "labels": map })
        })
        .collect();
    let path = dir.join("pool.json");
    std::fs::write(&path, serde_json::Value::Array(groups).to_string()).unwrap();
    path
}

pub async fn start_sim(config: SimConfig) -> Sim {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        sim::serve(listener, config, token).await.unwrap();
    });
    Sim { addr, stop }
}

pub struct Daemon {
    pub addr: SocketAddr,
    pub shutdown: Shutdown,
    handle: JoinHandle<anyhow::Result<DrainReport>>,
}

/// Parse `toml` through the same figment + validation path as a config file.
pub fn parse_config(toml: &str) -> Result<config::Config, config::ConfigError> {
    let raw: RawConfig = Figment::from(Toml::string(toml))
        .extract()
        .map_err(|e| config::ConfigError::new("", e.to_string()))?;
    config::validate(&raw)
}

pub async fn start_daemon(toml: &str) -> Daemon {
    let config = parse_config(toml).unwrap_or_else(|e| panic!("test config: {e}\n{toml}"));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = Shutdown::new();
    let handle = tokio::spawn(inferprobe::run(listener, config, shutdown.clone()));
    Daemon {
        addr,
        shutdown,
        handle,
    }
}

/// The daemon with a config file it reloads (SIGHUP-equivalent: [`Daemon::reload`]).
pub async fn start_reloadable(path: &std::path::Path) -> Daemon {
    let path = path.to_owned();
    let watched = path.clone();
    let loader: inferprobe::Loader =
        std::sync::Arc::new(move || config::load(Some(&path), &config::Overrides::default()));
    let config = loader().unwrap_or_else(|e| panic!("test config: {e}"));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = Shutdown::new();
    let handle = tokio::spawn(inferprobe::run_reloadable(
        listener,
        config,
        loader,
        inferprobe::ReloadTrigger::new(),
        Some(watched),
        shutdown.clone(),
    ));
    Daemon {
        addr,
        shutdown,
        handle,
    }
}

impl Daemon {
    /// A daemon started by the test itself (`inferprobe::run` on its own listener).
    pub fn from_parts(
        addr: SocketAddr,
        shutdown: Shutdown,
        handle: JoinHandle<anyhow::Result<DrainReport>>,
    ) -> Self {
        Self {
            addr,
            shutdown,
            handle,
        }
    }

    /// `POST /-/reload`: status and body.
    pub async fn reload(&self) -> (u16, String) {
        let response = reqwest::Client::new()
            .post(format!("http://{}/-/reload", self.addr))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    pub async fn get(&self, path: &str, accept: Option<&str>) -> reqwest::Response {
        let mut req = reqwest::Client::new().get(format!("http://{}{path}", self.addr));
        if let Some(accept) = accept {
            req = req.header("accept", accept);
        }
        req.send().await.unwrap()
    }

    pub async fn scrape(&self) -> Scrape {
        let text = self.get("/metrics", None).await.text().await.unwrap();
        Scrape::parse(text)
    }

    /// Scrape until `done` holds, or panic after `timeout` showing the last scrape.
    pub async fn wait_for(&self, timeout: Duration, done: impl Fn(&Scrape) -> bool) -> Scrape {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let scrape = self.scrape().await;
            if done(&scrape) {
                return scrape;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "condition not met within {timeout:?}; last scrape:\n{}",
                    scrape.text
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Graceful shutdown; returns the drain report.
    pub async fn stop(self) -> DrainReport {
        self.shutdown.begin();
        self.handle.await.unwrap().unwrap()
    }

    /// Immediate shutdown (in-flight probes are cut).
    pub async fn kill(self) -> DrainReport {
        self.shutdown.now();
        self.handle.await.unwrap().unwrap()
    }
}

/// One parsed sample of the classic text exposition.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

pub struct Scrape {
    pub text: String,
    pub samples: Vec<Sample>,
}

impl Scrape {
    pub fn parse(text: String) -> Self {
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|line| {
                let (series, value) = line.rsplit_once(' ').unwrap();
                let (name, labels) = match series.split_once('{') {
                    Some((name, rest)) => (name, rest.trim_end_matches('}')),
                    None => (series, ""),
                };
                let labels = labels
                    .split("\",")
                    .filter(|p| !p.is_empty())
                    .map(|pair| {
                        let (k, v) = pair.split_once('=').unwrap();
                        (k.to_owned(), v.trim_matches('"').to_owned())
                    })
                    .collect();
                Sample {
                    name: name.to_owned(),
                    labels,
                    value: value.parse().unwrap(),
                }
            })
            .collect();
        Self { text, samples }
    }

    /// Sum of every sample named `name` whose labels include `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).map(|s| s.value).sum()
    }

    pub fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
    }

    /// `requests_total` of a target.
    pub fn requests(&self, target: &str) -> f64 {
        self.sum("inferprobe_requests_total", &[("target", target)])
    }

    /// Successful probes of a target (every success observes E2EL once).
    pub fn successes(&self, target: &str) -> f64 {
        self.sum(
            "inferprobe_e2e_request_latency_seconds_count",
            &[("target", target)],
        )
    }

    pub fn errors(&self, target: &str, category: &str) -> f64 {
        self.sum(
            "inferprobe_request_errors_total",
            &[("target", target), ("category", category)],
        )
    }

    pub fn all_errors(&self, target: &str) -> f64 {
        self.sum("inferprobe_request_errors_total", &[("target", target)])
    }

    /// `requests_total` of one discovered replica of `target` (`pod` "": the series without
    /// a `pod` label, such as a pool's gateway).
    pub fn replica(&self, target: &str, pod: &str) -> f64 {
        self.replica_series(target, pod).map(|s| s.value).sum()
    }

    /// Whether the replica has series at all (they go when it stops being probed).
    pub fn has_replica(&self, target: &str, pod: &str) -> bool {
        self.replica_series(target, pod).next().is_some()
    }

    fn replica_series<'a>(
        &'a self,
        target: &'a str,
        pod: &'a str,
    ) -> impl Iterator<Item = &'a Sample> {
        self.samples.iter().filter(move |x| {
            x.name == "inferprobe_requests_total"
                && x.labels.get("target").map(String::as_str) == Some(target)
                && x.labels.get("pod").map_or("", String::as_str) == pod
        })
    }

    /// `(sum, count)` of a histogram for a target.
    pub fn histogram(&self, name: &str, target: &str) -> (f64, f64) {
        (
            self.sum(&format!("{name}_sum"), &[("target", target)]),
            self.sum(&format!("{name}_count"), &[("target", target)]),
        )
    }
}

/// A port nothing listens on.
pub async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// A listening port whose accept queue is full, so new connections hang in SYN-SENT:
/// the way to get a real connect timeout on loopback. Keep the returned values alive.
pub fn unresponsive_port() -> (u16, tokio::net::TcpListener, std::net::TcpStream) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let port = listener.local_addr().unwrap().port();
    // Fills the backlog of 0 (Linux admits one pending connection).
    let filler = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    (port, listener, filler)
}
