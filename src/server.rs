//! The daemon's HTTP endpoints: `/` (status page), `/metrics`, `/probe` (one probe at
//! scrape time: [`crate::scrape_probe`]), `/healthz`, `/readyz`, `/config` (the running
//! configuration, redacted) and `POST /-/reload`.
//!
//! Read-only but for the reload request, which is handed to the daemon's loop. The server
//! runs on its own thread and single-threaded runtime ([`spawn`]), off the probing runtime:
//! a burst of scrapes or a flood of clients costs CPU on a thread the OS schedules beside the
//! probe workers, never in front of a probe task waiting to stamp a token's arrival.
//! Abuse is bounded: headers (and the next request on an idle keep-alive connection) must
//! arrive within a timeout, at most [`MAX_CONNECTIONS`] are served at once (the rest wait
//! in the listen backlog), and concurrent scrapes share one encoding. On shutdown the
//! listener closes and open connections finish their current request.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use prometheus_client::registry::Registry;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::metrics::{Format, Metrics};
use crate::status::{self, Board};

/// A reload asked for over HTTP, with where to send its result.
pub type ReloadRequest = Option<oneshot::Sender<Result<(), String>>>;

const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// Connections served at once by the daemon: far more than any set of scrapers needs,
/// few enough that slow or stuck clients cannot exhaust memory or file descriptors.
pub const MAX_CONNECTIONS: usize = 1024;

/// What the endpoints show.
#[derive(Debug)]
pub struct State {
    registry: Registry,
    metrics: Metrics,
    board: Arc<Board>,
    config: RwLock<Value>,
    reloads: Option<mpsc::Sender<ReloadRequest>>,
    ready: AtomicBool,
    /// The latest encoding per format and when it began (see [`exposition`]).
    expositions: Mutex<[Option<(Instant, Bytes)>; 3]>,
    /// `/probe`: `None` where the daemon offers none (a fixed test server).
    scrape_probes: Option<Arc<crate::scrape_probe::ScrapeProbes>>,
}

impl State {
    /// `metrics` must be registered on `registry`. Without `reloads`, `/-/reload` answers
    /// that the daemon runs a fixed configuration.
    pub fn new(
        registry: Registry,
        metrics: Metrics,
        board: Arc<Board>,
        config: Value,
        reloads: Option<mpsc::Sender<ReloadRequest>>,
    ) -> Self {
        Self {
            registry,
            metrics,
            board,
            config: RwLock::new(config),
            reloads,
            ready: AtomicBool::new(false),
            expositions: Mutex::default(),
            scrape_probes: None,
        }
    }

    /// Serve `/probe` with `probes`.
    pub fn with_scrape_probes(mut self, probes: Arc<crate::scrape_probe::ScrapeProbes>) -> Self {
        self.scrape_probes = Some(probes);
        self
    }

    pub fn set_config(&self, config: Value) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = config;
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }
}

/// The endpoints' thread; [`Self::join`] waits for it after `stop` was cancelled.
#[derive(Debug)]
pub struct ServerThread(std::thread::JoinHandle<()>);

impl ServerThread {
    pub async fn join(self) {
        let thread = self.0;
        if let Ok(Err(_)) = tokio::task::spawn_blocking(move || thread.join()).await {
            tracing::error!("the HTTP server thread panicked");
        }
    }
}

/// Serve the daemon's endpoints on a thread of their own until `stop` is cancelled.
pub fn spawn(
    listener: TcpListener,
    state: Arc<State>,
    stop: CancellationToken,
) -> std::io::Result<ServerThread> {
    // A listener belongs to the runtime that registered it: hand over the socket itself.
    let listener = listener.into_std()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let thread = std::thread::Builder::new()
        .name("inferprobe-http".into())
        .spawn(move || {
            runtime.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => serve(listener, state, stop).await,
                    Err(e) => tracing::error!(error = %e, "cannot serve the HTTP endpoints"),
                }
            });
        })?;
    Ok(ServerThread(thread))
}

/// Serve the daemon's endpoints until `stop` is cancelled.
pub async fn serve(listener: TcpListener, state: Arc<State>, stop: CancellationToken) {
    let options = ServeOptions {
        close_grace: CLOSE_GRACE,
        tls: None,
        handshake_delay: Duration::ZERO,
        max_connections: MAX_CONNECTIONS,
        http1_only: true,
    };
    serve_with(listener, stop, options, move |req| {
        let state = Arc::clone(&state);
        async move { Ok::<_, Infallible>(handle(&req, &state).await) }
    })
    .await;
}

/// How [`serve_with`] treats its connections.
pub(crate) struct ServeOptions {
    /// On stop, how long open connections may take to finish.
    pub close_grace: Duration,
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// How long a TLS handshake waits before it is answered (the simulator's slow TLS).
    pub handshake_delay: Duration,
    /// Connections served at once; the next accept waits for one to close.
    pub max_connections: usize,
    /// Plain HTTP/1.1. Scrapers and browsers speak it without TLS, and it makes the header
    /// read timeout bound a connection from its first byte: detecting HTTP/2 would first
    /// wait, without any timeout, for a preface an idle client never sends.
    pub http1_only: bool,
}

/// The accept loop shared by the daemon and the simulator: HTTP/1 and HTTP/2, optional
/// TLS, a header read timeout, a connection cap, and on `stop` a graceful close.
pub(crate) async fn serve_with<F, Fut, B>(
    listener: TcpListener,
    stop: CancellationToken,
    options: ServeOptions,
    handler: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = Builder::new(TokioExecutor::new());
    if options.http1_only {
        builder = builder.http1_only();
    }
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    let ServeOptions {
        close_grace,
        tls,
        max_connections,
        handshake_delay,
        ..
    } = options;
    let slots = Arc::new(Semaphore::new(
        max_connections.clamp(1, Semaphore::MAX_PERMITS),
    ));
    loop {
        let slot = tokio::select! {
            () = stop.cancelled() => break,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and similar: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Small writes (one SSE event each) must leave at once: with Nagle's algorithm and
        // the peer's delayed ACK, a stream's events would arrive in bursts and distort ITL.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let (builder, watcher, handler, tls) = (
            Arc::clone(&builder),
            graceful.watcher(),
            handler.clone(),
            tls.clone(),
        );
        tokio::spawn(async move {
            let _slot = slot;
            let result = match tls {
                None => {
                    let conn = builder.serve_connection(TokioIo::new(stream), service_fn(handler));
                    watcher.watch(conn.into_owned()).await
                }
                Some(tls) => {
                    if !handshake_delay.is_zero() {
                        tokio::time::sleep(handshake_delay).await;
                    }
                    // The handshake runs in the connection's task, so a slow client cannot
                    // hold up the accept loop; it gets the header read timeout's budget.
                    let stream = match tokio::time::timeout(HEADER_READ_TIMEOUT, tls.accept(stream))
                        .await
                    {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(e)) => return tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => return tracing::debug!("TLS handshake timed out"),
                    };
                    let conn = builder.serve_connection(TokioIo::new(stream), service_fn(handler));
                    watcher.watch(conn.into_owned()).await
                }
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(close_grace, graceful.shutdown()).await;
}

async fn handle(req: &Request<Incoming>, state: &State) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let method = req.method();
    if path == "/-/reload" {
        if !matches!(*method, Method::POST | Method::PUT) {
            return not_allowed("POST, PUT");
        }
        return reload(state).await;
    }
    if path == "/probe" {
        let Some(probes) = &state.scrape_probes else {
            return text(StatusCode::NOT_FOUND, "not found\n");
        };
        // GET alone: a HEAD would cost a whole probe for nothing to read.
        if *method != Method::GET {
            return not_allowed("GET");
        }
        let timeout = req
            .headers()
            .get("x-prometheus-scrape-timeout-seconds")
            .and_then(|v| v.to_str().ok());
        let (status, body) = probes.answer(req.uri().query(), timeout).await;
        let content_type = match status {
            StatusCode::OK => "text/plain; version=0.0.4; charset=utf-8",
            _ => "text/plain; charset=utf-8",
        };
        let mut response = with_type(body, content_type);
        *response.status_mut() = status;
        return response;
    }
    if !matches!(path, "/" | "/metrics" | "/healthz" | "/readyz" | "/config") {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    if !matches!(*method, Method::GET | Method::HEAD) {
        return not_allowed("GET, HEAD");
    }
    match path {
        "/metrics" => {
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            let format = Format::negotiate(accept);
            match exposition(state, format).await {
                Ok(body) => with_type(body, format.content_type()),
                Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "encoding failed\n"),
            }
        }
        "/" => with_type(status::render(&state.board), "text/html; charset=utf-8"),
        "/config" => {
            let config = state.config.read().unwrap_or_else(|e| e.into_inner());
            let body = serde_json::to_string_pretty(&*config).unwrap_or_default() + "\n";
            with_type(body, "application/json")
        }
        "/healthz" => text(StatusCode::OK, "ok\n"),
        _ if state.ready.load(Ordering::Relaxed) => text(StatusCode::OK, "ready\n"),
        _ => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
    }
}

/// The exposition for a scrape that arrived now. Scrapes that arrive together share one
/// encoding: each first lets the other ready connections parse their requests, then takes
/// the latest encoding if it began after the scrape arrived (so nothing older than the
/// request is ever served), or encodes. A burst of 1,000 scrapes costs a couple of encodings.
async fn exposition(state: &State, format: Format) -> Result<Bytes, std::fmt::Error> {
    let arrived = Instant::now();
    tokio::task::yield_now().await;
    let slot = match format {
        Format::OpenMetrics => 0,
        Format::Text => 1,
        Format::Protobuf => 2,
    };
    let cached = || state.expositions.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((began, body)) = &cached()[slot] {
        if *began >= arrived {
            return Ok(body.clone());
        }
    }
    let began = Instant::now();
    let body = Bytes::from(state.metrics.encode(&state.registry, format)?);
    let mut cache = cached();
    // A concurrent encoding (on another runtime thread) may have begun later: keep the newer.
    if cache[slot].as_ref().is_none_or(|(other, _)| *other < began) {
        cache[slot] = Some((began, body.clone()));
    }
    Ok(body)
}

/// Hand the request to the daemon's loop and answer with its outcome, as Prometheus does:
/// 200 when the new configuration runs, 500 with the reason when the old one stays.
async fn reload(state: &State) -> Response<Full<Bytes>> {
    let Some(reloads) = &state.reloads else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "reload is not available: this daemon runs a fixed configuration\n",
        );
    };
    let (respond, result) = oneshot::channel();
    if reloads.send(Some(respond)).await.is_err() {
        return text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n");
    }
    match result.await {
        Ok(Ok(())) => text(StatusCode::OK, "configuration reloaded\n"),
        Ok(Err(reason)) => {
            let mut response = with_type(
                format!("reload failed, keeping the running configuration: {reason}\n"),
                "text/plain; charset=utf-8",
            );
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            response
        }
        Err(_) => text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
    }
}

fn with_type(body: impl Into<Bytes>, content_type: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    response
}

fn not_allowed(allow: &'static str) -> Response<Full<Bytes>> {
    let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    response
        .headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static(allow));
    response
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
