//! A probe as an OpenTelemetry span, named and attributed after the GenAI semantic
//! conventions (`{gen_ai.operation.name} {gen_ai.request.model}`, kind client), with the
//! first token as an event and the probe's own measurements as attributes.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use tokio::time::Instant;

use crate::endpoint::{BackendKind, Target};
use crate::error::ProbeError;
use crate::probe::ProbeReport;
use crate::record::Measurement;

pub(super) fn resource() -> Resource {
    Resource::builder_empty()
        .with_service_name("inferprobe")
        .with_attributes([KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))])
        .build()
}

/// `gen_ai.operation.name`, and the API the target speaks (`gen_ai.provider.name`).
fn operation(backend: BackendKind) -> (&'static str, &'static str) {
    match backend {
        BackendKind::OpenAiChat | BackendKind::OpenAiResponses => ("chat", "openai"),
        BackendKind::Anthropic => ("chat", "anthropic"),
        BackendKind::Bedrock | BackendKind::AnthropicBedrock => ("chat", "aws.bedrock"),
        BackendKind::Gemini => ("chat", "gcp.gemini"),
        BackendKind::VertexGemini | BackendKind::AnthropicVertex => ("chat", "gcp.vertex_ai"),
        BackendKind::AzureOpenAi => ("chat", "azure.ai.openai"),
        BackendKind::OpenAi => ("text_completion", "openai"),
        BackendKind::Tgi => ("text_completion", "huggingface"),
        BackendKind::TgiChat => ("chat", "huggingface"),
        BackendKind::TensorRtLlm => ("text_completion", "nvidia.triton"),
        BackendKind::DeepSpeedMii => ("text_completion", "deepspeed"),
        BackendKind::OpenAiEmbeddings => ("embeddings", "openai"),
        BackendKind::OpenAiAudio => ("transcription", "openai"),
    }
}

/// The span of a finished probe, when it carried a sampled trace.
pub fn probe_span(
    target: &Target,
    request_id: &str,
    report: &ProbeReport,
    result: &Result<Measurement, ProbeError>,
    canary: bool,
) -> Option<SpanData> {
    let record = &report.record;
    let trace = record.trace.filter(|t| t.sampled)?;
    // Instants to wall clock, through one reading of each clock.
    let (now, wall) = (Instant::now(), SystemTime::now());
    let at = |i: Instant| {
        wall.checked_sub(now.saturating_duration_since(i))
            .unwrap_or(wall)
    };
    let start = at(record.start);
    let end = record.end.map_or(wall, at);
    let (operation, provider) = operation(target.backend);
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", operation),
        KeyValue::new("gen_ai.provider.name", provider),
        KeyValue::new("gen_ai.request.model", target.model.clone()),
        KeyValue::new("gen_ai.request.stream", target.backend.streams()),
        KeyValue::new("inferprobe.request_id", request_id.to_owned()),
        KeyValue::new("inferprobe.target", target.name.clone()),
    ];
    if let Some(host) = target.url.host_str() {
        attributes.push(KeyValue::new("server.address", host.to_owned()));
    }
    if let Some(port) = target.url.port_or_known_default() {
        attributes.push(KeyValue::new("server.port", i64::from(port)));
    }
    for (name, value) in &target.labels {
        attributes.push(KeyValue::new(
            format!("inferprobe.label.{name}"),
            value.clone(),
        ));
    }
    if canary {
        attributes.push(KeyValue::new("inferprobe.canary", true));
    }
    let response = &record.response;
    if let Some(model) = &response.model {
        attributes.push(KeyValue::new("gen_ai.response.model", model.clone()));
    }
    if let Some(reason) = &response.finish_reason {
        let reasons = Value::Array(vec![opentelemetry::StringValue::from(reason.clone())].into());
        attributes.push(KeyValue::new("gen_ai.response.finish_reasons", reasons));
    }
    let mut events = Vec::new();
    let status = match result {
        Ok(m) => {
            // A reply that began with a tool call: the time to the call's first delta (the
            // server's tool parser holds the stream back until it has the name), which a
            // trace backend must not read as a TTFT.
            let (event, attribute) = match record.first_is_call() {
                true => ("inferprobe.first_tool_call", "inferprobe.time_to_call"),
                false => ("gen_ai.first_token", "gen_ai.response.time_to_first_chunk"),
            };
            measured(&mut attributes, m, attribute);
            if let Some(ttft) = m.ttft {
                events.push(opentelemetry::trace::Event::new(
                    event,
                    start + ttft,
                    vec![KeyValue::new(attribute, seconds(ttft))],
                    0,
                ));
            }
            Status::Unset
        }
        Err(e) => {
            attributes.push(KeyValue::new("error.type", e.category().as_str()));
            let message = crate::report::redact(&crate::error::chain(e), target);
            Status::error(crate::error::snippet(&message))
        }
    };
    let operation_name = format!("{operation} {}", target.model);
    Some(SpanData {
        span_context: SpanContext::new(
            TraceId::from_bytes(trace.trace_id),
            SpanId::from_bytes(trace.span_id),
            TraceFlags::SAMPLED,
            false,
            TraceState::NONE,
        ),
        parent_span_id: SpanId::INVALID,
        parent_span_is_remote: false,
        span_kind: SpanKind::Client,
        name: Cow::Owned(operation_name),
        start_time: start,
        end_time: end,
        attributes,
        dropped_attributes_count: 0,
        events: {
            let mut all = SpanEvents::default();
            all.events = events;
            all
        },
        links: SpanLinks::default(),
        status,
        instrumentation_scope: InstrumentationScope::builder("inferprobe")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build(),
    })
}

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// What the probe measured, as attributes.
fn measured(attributes: &mut Vec<KeyValue>, m: &Measurement, first: &'static str) {
    if let Some(ttft) = m.ttft {
        attributes.push(KeyValue::new(first, seconds(ttft)));
    }
    if let Some(tpot) = m.tpot {
        attributes.push(KeyValue::new("inferprobe.tpot", seconds(tpot)));
    }
    attributes.push(KeyValue::new("inferprobe.e2el", seconds(m.e2el)));
    attributes.push(KeyValue::new(
        "inferprobe.itl_observations",
        m.itl_observations() as i64,
    ));
    if let Some(tokens) = m.output_tokens {
        let tokens = i64::try_from(tokens.value()).unwrap_or(i64::MAX);
        attributes.push(KeyValue::new("gen_ai.usage.output_tokens", tokens));
    }
    if let Some(tokens) = m.prompt_tokens {
        let tokens = i64::try_from(tokens).unwrap_or(i64::MAX);
        attributes.push(KeyValue::new("gen_ai.usage.input_tokens", tokens));
    }
}
