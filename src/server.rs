//! The daemon's HTTP endpoints: `/metrics`, `/healthz`, `/readyz`.
//!
//! Read-only: handlers render state the probes write; nothing here can slow a probe down
//! except CPU. Headers must arrive within a short timeout, so slow or idle clients cannot
//! hold connections forever. On shutdown the listener closes and open connections finish
//! their current request.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::{Format, Metrics};

const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// What the endpoints show.
#[derive(Debug)]
pub struct State {
    registry: Registry,
    metrics: Metrics,
    ready: AtomicBool,
}

impl State {
    /// `metrics` must be registered on `registry`.
    pub fn new(registry: Registry, metrics: Metrics) -> Self {
        Self {
            registry,
            metrics,
            ready: AtomicBool::new(false),
        }
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }
}

/// Serve the daemon's endpoints until `stop` is cancelled.
pub async fn serve(listener: TcpListener, state: Arc<State>, stop: CancellationToken) {
    serve_with(listener, stop, CLOSE_GRACE, move |req| {
        let state = Arc::clone(&state);
        async move { Ok::<_, Infallible>(handle(&req, &state)) }
    })
    .await;
}

/// The accept loop shared by the daemon and the simulator: HTTP/1 and HTTP/2, a header
/// read timeout, and on `stop` a graceful close bounded by `close_grace`.
pub(crate) async fn serve_with<F, Fut, B>(
    listener: TcpListener,
    stop: CancellationToken,
    close_grace: Duration,
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
        let conn = builder
            .serve_connection(TokioIo::new(stream), service_fn(handler.clone()))
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(close_grace, graceful.shutdown()).await;
}

fn handle(req: &Request<Incoming>, state: &State) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if !matches!(path, "/metrics" | "/healthz" | "/readyz") {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match path {
        "/metrics" => {
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            let format = Format::negotiate(accept);
            match state.metrics.encode(&state.registry, format) {
                Ok(body) => {
                    let mut response = Response::new(Full::new(Bytes::from(body)));
                    response.headers_mut().insert(
                        header::CONTENT_TYPE,
                        header::HeaderValue::from_static(format.content_type()),
                    );
                    response
                }
                Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "encoding failed\n"),
            }
        }
        "/healthz" => text(StatusCode::OK, "ok\n"),
        _ if state.ready.load(Ordering::Relaxed) => text(StatusCode::OK, "ready\n"),
        _ => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
    }
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
