//! OTLP export: one client span per probe, with the trace and span ids its `traceparent`
//! carried, so the server's own span of the request (vLLM's `llm_request`) is its child. A
//! session check's turns and a prefix-cache pair are one trace each, under a span of their
//! own ([`CheckTrace`]).
//!
//! Probes never wait for the collector. A finished probe's span goes into a bounded queue
//! with `try_send`; when the queue is full the span is dropped and counted
//! (`inferprobe_trace_spans_dropped_total`). One task drains the queue in batches through
//! the OpenTelemetry SDK's OTLP exporter (http/protobuf or gRPC). A collector that is down
//! or slow costs one log line per minute and the spans of that time, nothing else.
//! No global tracer provider is installed: the ids are the probe's own.

mod check;
mod span;

use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::ExportMetrics;

pub use check::CheckTrace;
pub use span::probe_span;

/// Spans exported per batch, and how long a batch waits to fill.
const BATCH: usize = 512;
const BATCH_WAIT: Duration = Duration::from_secs(1);
/// One export's time limit.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// At most one log line per this interval while exports fail.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// `[tracing]`, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct TracingExport {
    /// The collector: `http://host:4318` (http/protobuf; `/v1/traces` is appended when the
    /// URL has no path) or `http://host:4317` (grpc).
    pub endpoint: url::Url,
    pub protocol: ExportProtocol,
    /// Header (or gRPC metadata) names and values, e.g. an authorization token.
    pub headers: Vec<(String, crate::endpoint::Secret)>,
    /// Fraction of probes whose trace is sampled (and exported).
    pub sampling_ratio: f64,
    pub queue_size: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportProtocol {
    HttpProtobuf,
    Grpc,
}

/// Where probes hand their spans.
#[derive(Clone, Debug)]
pub struct Spans {
    queue: mpsc::Sender<SpanData>,
    metrics: ExportMetrics,
    sampling_ratio: f64,
}

impl Spans {
    /// Start the exporter task (until `stop`, then one last flush).
    pub fn start(
        config: &TracingExport,
        metrics: ExportMetrics,
        stop: CancellationToken,
    ) -> Result<(Self, tokio::task::JoinHandle<()>), String> {
        let exporter = build(config)?;
        let (queue, spans) = mpsc::channel(config.queue_size.max(1));
        let task = tokio::spawn(export_loop(exporter, spans, metrics.clone(), stop));
        let spans = Self {
            queue,
            metrics,
            sampling_ratio: config.sampling_ratio,
        };
        Ok((spans, task))
    }

    /// Draw whether a probe's trace is sampled.
    pub fn sample(&self) -> bool {
        self.sampling_ratio >= 1.0 || rand::random::<f64>() < self.sampling_ratio
    }

    /// Hand over a finished probe's span; never waits.
    pub fn offer(&self, span: SpanData) {
        if self.queue.try_send(span).is_err() {
            self.metrics.dropped.inc();
        }
    }

    /// Hand over a trace's spans all or none (a parent dropped from a full queue would
    /// leave its children orphans); never waits.
    pub fn offer_all(&self, spans: Vec<SpanData>) {
        match self.queue.try_reserve_many(spans.len()) {
            Ok(permits) => permits
                .zip(spans)
                .for_each(|(permit, span)| permit.send(span)),
            Err(_) => {
                self.metrics.dropped.inc_by(spans.len() as u64);
            }
        }
    }
}

fn build(config: &TracingExport) -> Result<opentelemetry_otlp::SpanExporter, String> {
    let headers = config
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.expose().to_owned()));
    let mut exporter = match config.protocol {
        ExportProtocol::HttpProtobuf => {
            let mut endpoint = config.endpoint.clone();
            if endpoint.path() == "/" || endpoint.path().is_empty() {
                endpoint.set_path("/v1/traces");
            }
            let client = reqwest::Client::builder()
                .timeout(EXPORT_TIMEOUT)
                .build()
                .map_err(|e| format!("cannot build the OTLP HTTP client: {e}"))?;
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(client)
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(endpoint.as_str())
                .with_timeout(EXPORT_TIMEOUT)
                .with_headers(headers.collect())
                .build()
        }
        ExportProtocol::Grpc => {
            let mut metadata = tonic::metadata::MetadataMap::new();
            for (name, value) in headers {
                let name =
                    tonic::metadata::MetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes())
                        .map_err(|e| format!("OTLP header `{name}`: {e}"))?;
                let value = value.parse().map_err(|_| {
                    format!("the value of OTLP header `{name}` is not a valid header value")
                })?;
                metadata.insert(name, value);
            }
            opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(config.endpoint.as_str())
                .with_timeout(EXPORT_TIMEOUT)
                .with_metadata(metadata)
                .build()
        }
    }
    .map_err(|e| format!("cannot build the OTLP exporter: {e}"))?;
    exporter.set_resource(&span::resource());
    Ok(exporter)
}

async fn export_loop(
    exporter: opentelemetry_otlp::SpanExporter,
    mut spans: mpsc::Receiver<SpanData>,
    metrics: ExportMetrics,
    stop: CancellationToken,
) {
    let mut last_logged: Option<Instant> = None;
    let mut failures_since_log = 0u64;
    loop {
        let mut batch = Vec::with_capacity(BATCH);
        let deadline = tokio::time::sleep(BATCH_WAIT);
        tokio::pin!(deadline);
        let stopping = loop {
            tokio::select! {
                () = stop.cancelled() => break true,
                () = &mut deadline => break false,
                span = spans.recv() => match span {
                    Some(span) => {
                        batch.push(span);
                        if batch.len() == BATCH { break false; }
                    }
                    None => break true,
                },
            }
        };
        if stopping {
            while let Ok(span) = spans.try_recv() {
                batch.push(span);
            }
        }
        if !batch.is_empty() {
            let n = batch.len() as u64;
            let result = tokio::time::timeout(EXPORT_TIMEOUT, exporter.export(batch)).await;
            match result {
                Ok(Ok(())) => {
                    metrics.exported.inc_by(n);
                }
                failed => {
                    metrics.failed.inc_by(n);
                    failures_since_log += n;
                    if last_logged.is_none_or(|at| at.elapsed() >= LOG_EVERY) {
                        let error = match failed {
                            Ok(Err(e)) => e.to_string(),
                            _ => format!("no answer within {EXPORT_TIMEOUT:?}"),
                        };
                        tracing::warn!(
                            spans = failures_since_log,
                            error,
                            "cannot export probe spans to the OTLP collector (next report in a minute at the earliest)"
                        );
                        last_logged = Some(Instant::now());
                        failures_since_log = 0;
                    }
                }
            }
        }
        if stopping {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::Secret;

    fn export(protocol: ExportProtocol, header: (&str, &str)) -> TracingExport {
        TracingExport {
            endpoint: url::Url::parse("http://127.0.0.1:4317").unwrap(),
            protocol,
            headers: vec![(header.0.into(), Secret::new(header.1.into()))],
            sampling_ratio: 0.5,
            queue_size: 8,
        }
    }

    #[tokio::test]
    async fn both_protocols_build_with_their_headers() {
        for protocol in [ExportProtocol::HttpProtobuf, ExportProtocol::Grpc] {
            assert!(build(&export(protocol, ("authorization", "Bearer x"))).is_ok());
        }
        let err = build(&export(ExportProtocol::Grpc, ("bad header", "x"))).unwrap_err();
        assert!(err.contains("bad header"), "{err}");
    }

    #[tokio::test]
    async fn spans_that_cannot_be_queued_are_dropped_and_counted_never_awaited() {
        let metrics = ExportMetrics::default();
        let stop = CancellationToken::new();
        stop.cancel();
        let (spans, task) = Spans::start(
            &export(ExportProtocol::HttpProtobuf, ("a", "b")),
            metrics.clone(),
            stop,
        )
        .unwrap();
        let _ = task.await;
        // The exporter is gone: the queue neither drains nor blocks.
        let span = || {
            let mut data = opentelemetry_sdk::trace::SpanData {
                span_context: opentelemetry::trace::SpanContext::empty_context(),
                parent_span_id: opentelemetry::trace::SpanId::INVALID,
                parent_span_is_remote: false,
                span_kind: opentelemetry::trace::SpanKind::Client,
                name: "x".into(),
                start_time: std::time::SystemTime::now(),
                end_time: std::time::SystemTime::now(),
                attributes: Vec::new(),
                dropped_attributes_count: 0,
                events: Default::default(),
                links: Default::default(),
                status: opentelemetry::trace::Status::Unset,
                instrumentation_scope: Default::default(),
            };
            data.name = "probe".into();
            data
        };
        for _ in 0..20 {
            spans.offer(span());
        }
        assert_eq!(metrics.dropped.get(), 20);
        let sampled = (0..2000).filter(|_| spans.sample()).count();
        assert!(
            (800..1200).contains(&sampled),
            "{sampled} of 2000 at ratio 0.5"
        );
    }

    #[test]
    fn a_checks_spans_are_queued_all_or_none() {
        let metrics = ExportMetrics::default();
        let (queue, mut rx) = mpsc::channel(3);
        let spans = Spans {
            queue,
            metrics: metrics.clone(),
            sampling_ratio: 1.0,
        };
        let ids = crate::trace_context::TraceIds::random(true);
        let span = |name: &'static str| SpanData {
            span_context: opentelemetry::trace::SpanContext::empty_context(),
            parent_span_id: opentelemetry::trace::SpanId::from_bytes(ids.span_id),
            parent_span_is_remote: false,
            span_kind: opentelemetry::trace::SpanKind::Client,
            name: name.into(),
            start_time: std::time::SystemTime::now(),
            end_time: std::time::SystemTime::now(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: opentelemetry::trace::Status::Unset,
            instrumentation_scope: Default::default(),
        };
        spans.offer(span("probe"));
        // Two places left: a check of three spans is dropped whole, never its root alone.
        spans.offer_all(vec![span("root"), span("a"), span("b")]);
        assert_eq!(metrics.dropped.get(), 3);
        spans.offer_all(vec![span("root"), span("a")]);
        let names: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|s| s.name.into_owned())
            .collect();
        assert_eq!(names, ["probe", "root", "a"]);
    }
}
