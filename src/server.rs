//! The daemon's HTTP endpoints: `/` (status page), `/metrics`, `/healthz`, `/readyz`,
//! `/config` (the running configuration, redacted) and `POST /-/reload`.
//!
//! Read-only but for the reload request, which is handed to the daemon's loop: handlers
//! render state the probes write; nothing here can slow a probe down except CPU. Headers must arrive within a short timeout, so slow or idle clients cannot
//! hold connections forever. On shutdown the listener closes and open connections finish
//! their current request.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

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
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::metrics::{Format, Metrics};
use crate::status::{self, Board};

/// A reload asked for over HTTP, with where to send its result.
pub type ReloadRequest = Option<oneshot::Sender<Result<(), String>>>;

const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// What the endpoints show.
#[derive(Debug)]
pub struct State {
    registry: Registry,
    metrics: Metrics,
    board: Arc<Board>,
    config: RwLock<Value>,
    reloads: Option<mpsc::Sender<ReloadRequest>>,
    ready: AtomicBool,
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
        }
    }

    pub fn set_config(&self, config: Value) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = config;
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }
}

/// Serve the daemon's endpoints until `stop` is cancelled.
pub async fn serve(listener: TcpListener, state: Arc<State>, stop: CancellationToken) {
    serve_with(listener, stop, CLOSE_GRACE, None, move |req| {
        let state = Arc::clone(&state);
        async move { Ok::<_, Infallible>(handle(&req, &state).await) }
    })
    .await;
}

/// The accept loop shared by the daemon and the simulator: HTTP/1 and HTTP/2, optional
/// TLS, a header read timeout, and on `stop` a graceful close bounded by `close_grace`.
pub(crate) async fn serve_with<F, Fut, B>(
    listener: TcpListener,
    stop: CancellationToken,
    close_grace: Duration,
    tls: Option<tokio_rustls::TlsAcceptor>,
    handler: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    loop {
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
            let result = match tls {
                None => {
                    let conn = builder.serve_connection(TokioIo::new(stream), service_fn(handler));
                    watcher.watch(conn.into_owned()).await
                }
                Some(tls) => {
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
            match state.metrics.encode(&state.registry, format) {
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

fn with_type(body: String, content_type: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
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
