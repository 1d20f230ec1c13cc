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

pub mod adapters;
mod bedrock;
mod config;
mod conversation;
pub mod faults;
mod framing;
mod gateway;
mod media;
pub mod model;
mod parts;
mod plan;
mod prefix_cache;
pub mod ratelimit;
mod render;
mod request;
mod respond;
pub mod sampler;
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
use http_body_util::{BodyExt, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use respond::{bad_request, error, full, json_response};
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
    adapters: adapters::Adapters,
    limiter: Option<ratelimit::Limiter>,
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
    config.gateway.validate()?;
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
        rng: Mutex::new(rng),
        timeline,
        loader: media::Loader::new()?,
        ledger: media::Ledger::default(),
        traces: Mutex::default(),
        served: server_metrics::ServerMetrics::default(),
        prefix_caches,
        next_replica: std::sync::atomic::AtomicUsize::new(0),
        adapters: adapters::Adapters::new(&config.lora),
        limiter: ratelimit::Limiter::new(&config.limits),
        config,
    });
    let options = crate::server::ServeOptions {
        close_grace: Duration::from_secs(1),
        tls,
        handshake_delay: shared.config.tls_handshake_delay,
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
    let dialect = match (req.method(), req.uri().path()) {
        (&Method::GET, "/health") => {
            return Ok(json_response(StatusCode::OK, json!({"status": "ok"})));
        }
        (&Method::GET, "/v1/models") => {
            return Ok(json_response(StatusCode::OK, models(shared)));
        }
        (&Method::POST, path @ ("/v1/load_lora_adapter" | "/v1/unload_lora_adapter")) => {
            let load = path == "/v1/load_lora_adapter";
            let body = match Limited::new(req.into_body(), 1 << 16).collect().await {
                Ok(body) => body.to_bytes(),
                Err(_) => return Ok(error(StatusCode::BAD_REQUEST, "unreadable body")),
            };
            let (status, said) = match load {
                true => shared.adapters.load(&body),
                false => shared.adapters.unload(&body),
            };
            return Ok(match status.is_success() {
                true => Response::new(full(Bytes::from(said))),
                false => error(status, &said),
            });
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
    // A hosted API's quota: its headers on every answer, a 429 past it.
    let quota = match shared.limiter.as_ref().map(|l| l.admit(dialect)) {
        Some(Err(refused)) => return Ok(*refused),
        Some(Ok(headers)) => headers,
        None => http::HeaderMap::new(),
    };
    let mut served_by = None;
    let mut response = generate(req, shared, dialect, &mut served_by).await;
    response.headers_mut().extend(quota);
    // Behind a gateway, every answer of a request it routed names the replica.
    if let (Some(replica), true) = (served_by, shared.prefix_caches.len() > 1) {
        if let Ok(value) = header::HeaderValue::from_str(&format!("replica-{replica}")) {
            response.headers_mut().insert(SERVED_BY, value);
        }
    }
    Ok(response)
}

/// The header naming the replica that served a request, behind a gateway.
pub const SERVED_BY: &str = "x-served-by";

/// `GET /v1/models`: the base model, with its window as vLLM reports it when
/// `--max-model-len` sets one, then its adapters.
fn models(shared: &Shared) -> Value {
    let config = &shared.config;
    // What a sampled request's logprobs are, said the way vLLM and llama.cpp say it.
    let owned_by = match config.model.logprobs_mode {
        sampler::LogprobsMode::Raw => "vllm",
        sampler::LogprobsMode::Processed => "llamacpp",
    };
    let base = shared.adapters.base();
    let mut model =
        json!({"id": base, "object": "model", "owned_by": owned_by, "root": base, "parent": null});
    if let Some(window) = config.max_model_len {
        model["max_model_len"] = json!(window);
    }
    let mut data = vec![model];
    data.extend(shared.adapters.listing());
    json!({"object": "list", "data": data})
}

/// A request to a generating endpoint, served by the replica it routes to (set in
/// `served_by` once known).
async fn generate(
    req: Request<Incoming>,
    shared: &Shared,
    dialect: Dialect,
    served_by: &mut Option<usize>,
) -> Response<Body> {
    let arrival = Instant::now();
    let arrival_ns = wall_ns();
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let request_id = header("x-request-id");
    let traceparent = header("traceparent");
    let session = header(&shared.config.gateway.route_header);
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
    // A stand-in's expiring OAuth token (Vertex AI, Azure), refused once past as the
    // clouds refuse theirs.
    let bearer = header(header::AUTHORIZATION.as_str()).unwrap_or_default();
    if bedrock::expired(&bearer, std::time::SystemTime::now()) {
        return error(
            StatusCode::UNAUTHORIZED,
            "Request had invalid authentication credentials: the access token expired",
        );
    }
    let content_type = header(header::CONTENT_TYPE.as_str()).unwrap_or_default();
    let (head, body) = req.into_parts();
    let body = match Limited::new(body, MAX_REQUEST_BYTES).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "unreadable or oversized request body",
            );
        }
    };
    if let (true, Some(secret)) = (framing::is_bedrock(dialect), &shared.config.sigv4_secret) {
        let host = head
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let path = head.uri.path_and_query().map_or("/", |p| p.as_str());
        let uri = format!("http://{host}{path}");
        let signed = bedrock::Signed {
            method: head.method.as_str(),
            uri: &uri,
            headers: &head.headers,
            body: &body,
        };
        if let Err(refused) = bedrock::verify(secret, &signed, std::time::SystemTime::now()) {
            return *refused;
        }
    }
    let (mut request, media) = match request::parse(dialect, &content_type, &body) {
        Ok(parsed) => parsed,
        Err(e) => return bad_request(dialect, &e),
    };
    if let Some(model) = request::path_model(head.uri.path()) {
        request.model = model;
    }
    // Azure answers a deployment's path without `api-version` with a 404.
    let query = head.uri.query().unwrap_or("");
    if head.uri.path().starts_with("/openai/") && !query.contains("api-version=") {
        return error(StatusCode::NOT_FOUND, "Resource not found");
    }
    drop(body);
    request.session = session;
    request.replica = shared.route(&request);
    *served_by = Some(request.replica);
    let fault = match forced {
        Some(Ok(fault)) => Some(fault),
        Some(Err(e)) => return error(StatusCode::BAD_REQUEST, &e),
        None => shared.pick_fault(request.replica),
    };
    tracing::debug!(
        ?fault,
        ?dialect,
        max_tokens = request.max_tokens,
        replica = request.replica,
        "simulated request"
    );
    if let Some(refused) = respond::refusal(&request, fault, &credential) {
        return refused;
    }
    // The base model or an adapter answers (`adapters`), with its own toy weights.
    let config = match shared.adapters.resolve(&request.model) {
        adapters::Answerer::NotFound => {
            let said = adapters::not_found_message(&request.model);
            return error(StatusCode::NOT_FOUND, &said);
        }
        adapters::Answerer::Base { corrupted: false } => std::borrow::Cow::Borrowed(&shared.config),
        answerer => {
            let mut config = shared.config.clone();
            *config.model = answerer.model(&shared.config.model);
            std::borrow::Cow::Owned(config)
        }
    };
    // After the status faults: a gateway's 429 never reaches the model server. The token
    // schedule stays anchored at arrival, so loading counts towards the time to first
    // token instead of being added to it.
    if !media.is_empty() {
        let loaded = match shared.loader.load_all(media).await {
            Ok(loaded) => loaded,
            Err(e) => return bad_request(dialect, &e),
        };
        for item in &loaded {
            request.prompt_tokens += item.tokens();
            request.media_items += 1;
            request.image_pixels += item.pixels();
        }
        shared.ledger.record(request_id.as_deref(), &loaded);
    }
    if let Some(refused) = respond::beyond_window(&request, config.max_model_len) {
        return refused;
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
    // A session fault changes what is said, not how it is served.
    if fault.is_none_or(|f| Fault::SESSION.contains(&f)) {
        let served = server_metrics::Served {
            ttft: plan::first_token(&request, &config),
            itl: config.itl,
            prompt_tokens: request.prompt_tokens,
            output_tokens: plan::output_tokens(&request, &config),
        };
        shared.served.record(&request.model, &served);
    }
    if !request.stream {
        return respond::whole(&request, &config, fault, arrival).await;
    }
    let steps = shared.with_rng(|rng| stream_steps(&request, &config, fault, rng));
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
        header::HeaderValue::from_static(match framing::is_bedrock(dialect) {
            true => "application/vnd.amazon.eventstream",
            false => "text/event-stream; charset=utf-8",
        }),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    response
}
