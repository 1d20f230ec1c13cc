//! A test OTLP collector: `POST /v1/traces` (http/protobuf), decoded with the official
//! protos (`opentelemetry-proto`). It can answer late (a slow collector) to show that
//! probes never wait for it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
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
                        assert_eq!(req.uri().path(), "/v1/traces");
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let export = ExportTraceServiceRequest::decode(body).unwrap();
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
                        Ok::<_, std::convert::Infallible>(
                            Response::builder()
                                .header("content-type", "application/x-protobuf")
                                .body(Full::new(Bytes::from(answer)))
                                .unwrap(),
                        )
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
