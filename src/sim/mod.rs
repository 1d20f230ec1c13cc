//! `inferprobe simulate`: an OpenAI-compatible streaming server with injected latencies
//! and faults.
//!
//! It is the ground truth for the measurement tests (it knows exactly when it wrote each
//! token) and a rehearsal target for dashboards and alerts. Latencies are scheduled from
//! the request's arrival on absolute instants, so they do not drift with write overhead.

pub mod faults;
mod plan;
mod render;
mod request;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

pub use faults::{FAULT_HEADER, Fault};
pub use plan::{Action, Step, stream_plan, stream_steps};
pub use request::{Dialect, SimRequest};

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

const MAX_REQUEST_BYTES: usize = 4 << 20;

#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct SimConfig {
    /// Time to first token.
    #[arg(long, default_value = "50ms", value_parser = humantime::parse_duration)]
    pub ttft: Duration,
    /// Time per output token after the first.
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    pub itl: Duration,
    /// Uniform relative jitter on every delay: 0.2 means ±20%.
    #[arg(long, default_value_t = 0.0)]
    pub jitter: f64,
    /// Tokens per streamed chunk.
    #[arg(long, default_value_t = 1)]
    pub tokens_per_chunk: u32,
    /// Output length, overriding the request's max_tokens.
    #[arg(long)]
    pub output_tokens: Option<u32>,
    /// Send no usage even when the request asks for it.
    #[arg(long = "no-usage", action = clap::ArgAction::SetFalse)]
    pub usage: bool,
    /// Ignore `continuous_usage_stats` requests (usage only at the end).
    #[arg(long = "no-continuous-usage", action = clap::ArgAction::SetFalse)]
    pub continuous_usage: bool,
    /// Do not send the role-only first chat chunk.
    #[arg(long = "no-role-chunk", action = clap::ArgAction::SetFalse)]
    pub role_chunk: bool,
    /// Inject a fault with a probability, e.g. `--fault reset=0.05` (repeatable). Faults:
    /// http_429 http_500 http_401 error_event reset stall ttft_stall malformed_json no_done empty.
    #[arg(long = "fault", value_name = "NAME=P", value_parser = faults::parse_fault_spec)]
    pub faults: Vec<(Fault, f64)>,
    /// How long `stall` and `ttft_stall` pause.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub stall: Duration,
    /// Seed for fault draws and jitter.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Length of the vectors `/v1/embeddings` returns.
    #[arg(long, default_value_t = 16)]
    pub embedding_dimensions: u32,
    /// The `drip` fault sends one byte per this interval.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub drip_interval: Duration,
    /// Serve HTTPS with this certificate chain (PEM)...
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// ...and this private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Require client certificates signed by this CA (PEM): mutual TLS.
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<std::path::PathBuf>,
    /// Append, per streamed response, when the request arrived and when each token chunk
    /// was handed to the connection (JSON lines, wall-clock nanoseconds): ground truth for
    /// the fidelity benchmark.
    #[arg(long)]
    pub timeline_file: Option<std::path::PathBuf>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            ttft: Duration::from_millis(50),
            itl: Duration::from_millis(10),
            jitter: 0.0,
            tokens_per_chunk: 1,
            output_tokens: None,
            usage: true,
            continuous_usage: true,
            role_chunk: true,
            faults: Vec::new(),
            stall: Duration::from_secs(3600),
            seed: None,
            embedding_dimensions: 16,
            drip_interval: Duration::from_secs(1),
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            timeline_file: None,
        }
    }
}

struct Shared {
    config: SimConfig,
    rng: Mutex<StdRng>,
    timeline: Option<Arc<Mutex<std::io::BufWriter<std::fs::File>>>>,
}

/// One response's ground truth, written as a JSON line when the response ends (or is
/// dropped because the client went away).
struct Timeline {
    out: Arc<Mutex<std::io::BufWriter<std::fs::File>>>,
    request_id: String,
    arrival_ns: u128,
    token_sends_ns: Vec<u128>,
}

fn wall_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

impl Drop for Timeline {
    fn drop(&mut self) {
        use std::io::Write;
        let line = json!({
            "request_id": self.request_id,
            "arrival_ns": self.arrival_ns.to_string(),
            "token_sends_ns": self.token_sends_ns.iter().map(u128::to_string).collect::<Vec<_>>(),
        });
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
}

impl Shared {
    /// The lock is never held across an await.
    fn with_rng<T>(&self, f: impl FnOnce(&mut StdRng) -> T) -> T {
        f(&mut self.rng.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Serve the simulator on `listener` until `stop` is cancelled.
pub async fn serve(
    listener: TcpListener,
    config: SimConfig,
    stop: CancellationToken,
) -> Result<(), String> {
    faults::validate(&config.faults)?;
    if !(0.0..=1.0).contains(&config.jitter) {
        return Err(format!("jitter {} must be between 0 and 1", config.jitter));
    }
    let rng = match config.seed {
        Some(seed) => StdRng::seed_from_u64(seed),
        None => rand::make_rng(),
    };
    let tls = tls_acceptor(&config)?;
    let timeline = match &config.timeline_file {
        None => None,
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            Some(Arc::new(Mutex::new(std::io::BufWriter::new(file))))
        }
    };
    let shared = Arc::new(Shared {
        config,
        rng: Mutex::new(rng),
        timeline,
    });
    let options = crate::server::ServeOptions {
        close_grace: Duration::from_secs(1),
        tls,
        // A load generator's thousands of streams are the simulator's job.
        max_connections: usize::MAX,
        http1_only: false,
    };
    crate::server::serve_with(listener, stop, options, move |req| {
        let shared = Arc::clone(&shared);
        async move { handle(req, &shared).await }
    })
    .await;
    Ok(())
}

/// HTTPS for TLS tests: the configured certificate, and client certificates required when
/// a client CA is given.
fn tls_acceptor(config: &SimConfig) -> Result<Option<tokio_rustls::TlsAcceptor>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) else {
        return Ok(None);
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect)
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match &config.tls_client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in
                CertificateDer::pem_file_iter(ca).map_err(|e| format!("{}: {e}", ca.display()))?
            {
                roots
                    .add(cert.map_err(|e| e.to_string())?)
                    .map_err(|e| e.to_string())?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| e.to_string())?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut server = builder
        .with_single_cert(chain, key)
        .map_err(|e| e.to_string())?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Some(tokio_rustls::TlsAcceptor::from(Arc::new(server))))
}

async fn handle(req: Request<Incoming>, shared: &Shared) -> Result<Response<Body>, Infallible> {
    let arrival = Instant::now();
    let arrival_ns = wall_ns();
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let dialect = match (req.method(), req.uri().path()) {
        (&Method::GET, "/health") => {
            return Ok(json_response(StatusCode::OK, json!({"status": "ok"})));
        }
        (&Method::GET, "/v1/models") => {
            let models = json!({"object": "list", "data": [{"id": "sim", "object": "model"}]});
            return Ok(json_response(StatusCode::OK, models));
        }
        (method, path) => match Dialect::route(method, path) {
            Some(dialect) => dialect,
            None => return Ok(error(StatusCode::NOT_FOUND, "no such endpoint")),
        },
    };
    let forced = req
        .headers()
        .get(FAULT_HEADER)
        .map(|v| v.to_str().unwrap_or("").parse::<Fault>());
    // Like some real servers, echo the credential in the 401 message: the probe must
    // scrub it from everything it logs and shows.
    let credential = ["authorization", "x-api-key"]
        .iter()
        .find_map(|h| req.headers().get(*h).and_then(|v| v.to_str().ok()))
        .unwrap_or("none")
        .to_owned();
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return Ok(error(
                StatusCode::BAD_REQUEST,
                "unreadable or oversized request body",
            ));
        }
    };
    let request = match request::parse(dialect, &content_type, &body) {
        Ok(request) => request,
        Err(e) => return Ok(error(StatusCode::BAD_REQUEST, &e)),
    };
    let fault = match forced {
        Some(Ok(fault)) => Some(fault),
        Some(Err(e)) => return Ok(error(StatusCode::BAD_REQUEST, &e)),
        None => shared.with_rng(|rng| faults::pick(&shared.config.faults, rng)),
    };
    tracing::debug!(
        ?fault,
        ?dialect,
        max_tokens = request.max_tokens,
        "simulated request"
    );
    match fault {
        Some(Fault::Http429) => {
            let mut response = error(StatusCode::TOO_MANY_REQUESTS, "simulated rate limit");
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            return Ok(response);
        }
        Some(Fault::Http500) => {
            return Ok(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "simulated server error",
            ));
        }
        Some(Fault::Http401) => {
            let message = format!("simulated invalid API key: {credential}");
            return Ok(error(StatusCode::UNAUTHORIZED, &message));
        }
        _ => {}
    }
    if !request.stream {
        return Ok(whole(&request, &shared.config, fault, arrival).await);
    }
    let steps = shared.with_rng(|rng| stream_steps(&request, &shared.config, fault, rng));
    let timeline = shared.timeline.as_ref().map(|out| Timeline {
        out: Arc::clone(out),
        request_id,
        arrival_ns,
        token_sends_ns: Vec::new(),
    });
    let frames = stream::unfold(
        (steps, timeline),
        move |(mut steps, mut timeline)| async move {
            let step = steps.next()?;
            sleep_until(arrival + step.at).await;
            if let (true, Some(timeline)) = (step.token, &mut timeline) {
                timeline.token_sends_ns.push(wall_ns());
            }
            let frame = match step.action {
                Action::Send(bytes) => Ok(Frame::data(bytes)),
                Action::Reset => Err(std::io::Error::other("simulated connection reset")),
            };
            Some((frame, (steps, timeline)))
        },
    );
    let mut response = Response::new(BodyExt::boxed_unsync(StreamBody::new(frames)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    Ok(response)
}

/// A non-streamed response (completions, chat, embeddings), faults included: an error
/// object in a 200, a reset, a stall, a truncated or empty body.
async fn whole(
    request: &SimRequest,
    config: &SimConfig,
    fault: Option<Fault>,
    arrival: Instant,
) -> Response<Body> {
    if !matches!(
        request.dialect,
        Dialect::Completions | Dialect::Chat | Dialect::Embeddings
    ) {
        return error(StatusCode::BAD_REQUEST, "this endpoint only streams");
    }
    let (mut delay, body) = plan::whole_response(request, config);
    if matches!(fault, Some(Fault::Stall | Fault::TtftStall)) {
        delay += config.stall;
    }
    sleep_until(arrival + delay).await;
    let bytes = match fault {
        Some(Fault::ErrorEvent) => {
            json!({"error": {"message": "simulated failure", "type": "InternalServerError", "code": 500}}).to_string()
        }
        Some(Fault::MalformedJson) => body.to_string()[..8].to_owned(),
        Some(Fault::NoDone | Fault::Empty) => String::new(),
        Some(Fault::Reset) => {
            let failing = stream::once(async { Err(std::io::Error::other("simulated connection reset")) });
            return Response::new(BodyExt::boxed_unsync(StreamBody::new(failing)));
        }
        _ => body.to_string(),
    };
    let mut response = Response::new(full(Bytes::from(bytes)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

fn full(bytes: Bytes) -> Body {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn json_response(status: StatusCode, value: serde_json::Value) -> Response<Body> {
    let mut response = Response::new(full(Bytes::from(value.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// An OpenAI-shaped error body.
fn error(status: StatusCode, message: &str) -> Response<Body> {
    let body =
        json!({"error": {"message": message, "type": "SimulatedError", "code": status.as_u16()}});
    json_response(status, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimConfig,
    }

    #[test]
    fn cli_defaults_equal_the_programmatic_defaults() {
        assert_eq!(Cli::parse_from(["sim"]).sim, SimConfig::default());
        let cli = Cli::parse_from(["sim", "--no-usage", "--fault", "reset=0.5", "--ttft", "2s"]);
        assert!(!cli.sim.usage);
        assert_eq!(cli.sim.faults, vec![(Fault::Reset, 0.5)]);
        assert_eq!(cli.sim.ttft, Duration::from_secs(2));
    }
}
