//! A test OTLP collector on one port: `POST /v1/traces` (http/protobuf, HTTP/1.1) and the
//! gRPC method `TraceService/Export` (HTTP/2 without TLS, gRPC's length-prefixed frames and
//! `grpc-status` trailer, written out here rather than pulling in a gRPC server), both
//! decoded with the official protos (`opentelemetry-proto`). It can answer late (a slow
//! collector) to show that probes never wait for it.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::net::TcpListener;

#[derive(Clone, Default)]
pub struct Collector {
    pub spans: Arc<Mutex<Vec<Span>>>,
    pub resources: Arc<Mutex<Vec<String>>>,
    /// The transport of each export: "http" or "grpc".
    pub transports: Arc<Mutex<Vec<&'static str>>>,
    pub url: String,
}

impl Collector {
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}

/// A collector on 127.0.0.1 that answers each export after `delay`.
pub async fn start(delay: Duration) -> Collector {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector = Collector {
        url: format!("http://{}", listener.local_addr().unwrap()),
        ..Collector::default()
    };
    let shared = collector.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let shared = shared.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let shared = shared.clone();
                    async move {
                        let grpc = req.uri().path() == GRPC_EXPORT;
                        assert!(grpc || req.uri().path() == "/v1/traces", "{}", req.uri());
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let message = if grpc { unframe(&body) } else { body };
                        let export = ExportTraceServiceRequest::decode(message).unwrap();
                        shared
                            .transports
                            .lock()
                            .unwrap()
                            .push(if grpc { "grpc" } else { "http" });
                        for resource in export.resource_spans {
                            let attributes =
                                resource.resource.map(|r| r.attributes).unwrap_or_default();
                            shared
                                .resources
                                .lock()
                                .unwrap()
                                .extend(attributes.iter().map(|kv| kv.key.clone()));
                            for scope in resource.scope_spans {
                                shared.spans.lock().unwrap().extend(scope.spans);
                            }
                        }
                        tokio::time::sleep(delay).await;
                        let answer = ExportTraceServiceResponse::default().encode_to_vec();
                        Ok::<_, std::convert::Infallible>(if grpc {
                            grpc_answer(&answer)
                        } else {
                            Response::builder()
                                .header("content-type", "application/x-protobuf")
                                .body(body_of(vec![Ok(Frame::data(Bytes::from(answer)))]))
                                .unwrap()
                        })
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    collector
}

const GRPC_EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

type Body =
    StreamBody<futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

fn body_of(frames: Vec<Result<Frame<Bytes>, Infallible>>) -> Body {
    StreamBody::new(futures_util::stream::iter(frames))
}

/// The message inside one gRPC frame: a compression flag (the exporter sends none) and a
/// big-endian length, then the message.
fn unframe(body: &[u8]) -> Bytes {
    assert!(body.len() >= 5, "a gRPC frame has a 5-byte prefix");
    assert_eq!(body[0], 0, "uncompressed");
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    assert_eq!(body.len(), 5 + len, "one message per export");
    Bytes::copy_from_slice(&body[5..])
}

/// A unary gRPC answer: the framed message, then `grpc-status: 0` as a trailer.
fn grpc_answer(message: &[u8]) -> Response<Body> {
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(message);
    let mut trailers = hyper::HeaderMap::new();
    trailers.insert("grpc-status", hyper::header::HeaderValue::from_static("0"));
    Response::builder()
        .header("content-type", "application/grpc")
        .body(body_of(vec![
            Ok(Frame::data(Bytes::from(framed))),
            Ok(Frame::trailers(trailers)),
        ]))
        .unwrap()
}

/// A span attribute's value as text (strings, ints, doubles, bools).
pub fn attribute(span: &Span, key: &str) -> Option<String> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    let value = span
        .attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .as_ref()?
        .value
        .as_ref()?;
    Some(match value {
        Value::StringValue(s) => s.clone(),
        Value::IntValue(i) => i.to_string(),
        Value::DoubleValue(d) => d.to_string(),
        Value::BoolValue(b) => b.to_string(),
        other => format!("{other:?}"),
    })
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
