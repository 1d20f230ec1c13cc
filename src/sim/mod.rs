//! `inferprobe simulate`: an OpenAI-compatible streaming server with injected latencies
//! and faults.
//!
//! It is the ground truth for the measurement tests (it knows exactly when it wrote each
//! token) and a rehearsal target for dashboards and alerts. Latencies are scheduled from
//! the request's arrival on absolute instants, so they do not drift with write overhead.
//!
//! Images and videos in a request are loaded and checked as a vision server would (a
//! malformed part is a 400 in the dialect's error format), can lengthen the prefill, and
//! are listed at `GET /sim/media` for tests to see what a probe sent.

mod config;
pub mod faults;
mod gateway;
mod media;
pub mod model;
mod parts;
mod plan;
mod prefix_cache;
mod render;
mod request;
mod server_metrics;
mod structured;
mod timeline;
mod tls;

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
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use timeline::{Timeline, wall_ns};

pub use config::{Gateway, Prefill, ReportCached, Route, SimConfig};
pub use faults::{FAULT_HEADER, Fault};
pub use plan::{Action, Step, stream_plan, stream_steps};
pub use request::ENDPOINTS;
pub use request::{Dialect, SimRequest};

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// Room for a probe's largest inline media: a 64 MiB video is 86 MiB of base64.
const MAX_REQUEST_BYTES: usize = 128 << 20;

struct Shared {
    config: SimConfig,
    rng: Mutex<StdRng>,
    timeline: Option<timeline::Sink>,
    loader: media::Loader,
    ledger: media::Ledger,
    /// The trace context of recent requests, for `GET /sim/traces`.
    traces: Mutex<std::collections::VecDeque<Value>>,
    /// What it served, under vLLM's metric names, for `GET /metrics`.
    served: server_metrics::ServerMetrics,
    /// One per replica behind the gateway (`--replicas`).
    prefix_caches: Vec<Mutex<prefix_cache::PrefixCache>>,
    next_replica: std::sync::atomic::AtomicUsize,
}

/// Requests whose trace context `/sim/traces` remembers.
const TRACES_KEPT: usize = 10_000;

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
    let tls = tls::acceptor(&config)?;
    let timeline = config
        .timeline_file
        .as_deref()
        .map(timeline::open)
        .transpose()?;
    let prefix_caches = (0..config.gateway.replicas)
        .map(|_| {
            Mutex::new(prefix_cache::PrefixCache::new(
                config.prefill.prefix_cache_blocks,
                config.prefill.block_tokens as usize,
                config.prefill.cache_reuse,
            ))
        })
        .collect();
    let shared = Arc::new(Shared {
        config,
        rng: Mutex::new(rng),
        timeline,
        loader: media::Loader::new()?,
        ledger: media::Ledger::default(),
        traces: Mutex::default(),
        served: server_metrics::ServerMetrics::default(),
        prefix_caches,
        next_replica: std::sync::atomic::AtomicUsize::new(0),
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

async fn handle(req: Request<Incoming>, shared: &Shared) -> Result<Response<Body>, Infallible> {
    let arrival = Instant::now();
    let arrival_ns = wall_ns();
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let traceparent = header("traceparent");
    let dialect = match (req.method(), req.uri().path()) {
        (&Method::GET, "/health") => {
            return Ok(json_response(StatusCode::OK, json!({"status": "ok"})));
        }
        (&Method::GET, "/v1/models") => {
            let models = json!({"object": "list", "data": [{"id": "sim", "object": "model"}]});
            return Ok(json_response(StatusCode::OK, models));
        }
        (&Method::GET, "/sim/media") => {
            return Ok(json_response(StatusCode::OK, shared.ledger.json()));
        }
        (&Method::GET, "/metrics") => {
            let mut response = Response::new(full(Bytes::from(shared.served.render())));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            return Ok(response);
        }
        (&Method::GET, "/sim/traces") => {
            let traces = shared.traces.lock().unwrap_or_else(|e| e.into_inner());
            return Ok(json_response(
                StatusCode::OK,
                Value::from(Vec::from(traces.clone())),
            ));
        }
        (method, path) => match Dialect::route(method, path) {
            Some(dialect) => dialect,
            None => return Ok(error(StatusCode::NOT_FOUND, "no such endpoint")),
        },
    };
    {
        let mut traces = shared.traces.lock().unwrap_or_else(|e| e.into_inner());
        if traces.len() == TRACES_KEPT {
            traces.pop_front();
        }
        traces.push_back(json!({
            "request_id": request_id,
            "traceparent": traceparent,
            "tracestate": header("tracestate"),
        }));
    }
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
    let (mut request, media) = match request::parse(dialect, &content_type, &body) {
        Ok(parsed) => parsed,
        Err(e) => return Ok(bad_request(dialect, &e)),
    };
    drop(body);
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
        // As vLLM words a prompt over its window: a window half the prompt.
        Some(Fault::ContextLength) => {
            let window = (request.prompt_tokens / 2).max(1);
            let message = format!(
                "This model's maximum context length is {window} tokens. However, your prompt contains at least {} input tokens, which exceeds this limit even without any output tokens.",
                request.prompt_tokens
            );
            return Ok(bad_request(dialect, &message));
        }
        // As xgrammar refused `minItems` (vLLM #16880).
        Some(Fault::SchemaRejected) if request.structure.is_some() => {
            return Ok(bad_request(
                dialect,
                "the JSON schema uses an unsupported keyword: minItems",
            ));
        }
        _ => {}
    }
    // After the status faults: a gateway's 429 never reaches the model server. The token
    // schedule stays anchored at arrival, so loading counts towards the time to first
    // token instead of being added to it.
    if !media.is_empty() {
        let loaded = match shared.loader.load_all(media).await {
            Ok(loaded) => loaded,
            Err(e) => return Ok(bad_request(dialect, &e)),
        };
        for item in &loaded {
            request.prompt_tokens += item.tokens();
            request.media_items += 1;
            request.image_pixels += item.pixels();
        }
        shared.ledger.record(request_id.as_deref(), &loaded);
    }
    // The prefix cache's faults change what it serves, not the response: after them the
    // request goes on as a healthy one.
    let fault = match fault {
        Some(cache @ (Fault::CacheDisabled | Fault::CacheEvicts)) => {
            shared.cache(&mut request, Some(cache));
            None
        }
        other => {
            shared.cache(&mut request, None);
            other
        }
    };
    if fault.is_none() {
        let served = server_metrics::Served {
            ttft: plan::first_token(&request, &shared.config),
            itl: shared.config.itl,
            prompt_tokens: request.prompt_tokens,
            output_tokens: plan::output_tokens(&request, &shared.config),
        };
        shared.served.record(&request.model, &served);
    }
    if !request.stream {
        return Ok(whole(&request, &shared.config, fault, arrival).await);
    }
    let steps = shared.with_rng(|rng| stream_steps(&request, &shared.config, fault, rng));
    let timeline = shared.timeline.as_ref().map(|out| Timeline {
        out: Arc::clone(out),
        request_id: request_id.unwrap_or_default(),
        traceparent,
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

/// A 400 in the dialect's own error format.
fn bad_request(dialect: Dialect, message: &str) -> Response<Body> {
    json_response(
        StatusCode::BAD_REQUEST,
        render::bad_request(dialect, message),
    )
}

/// An OpenAI-shaped error body.
fn error(status: StatusCode, message: &str) -> Response<Body> {
    let body =
        json!({"error": {"message": message, "type": "SimulatedError", "code": status.as_u16()}});
    json_response(status, body)
}
