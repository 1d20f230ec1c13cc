use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::config::{RawConfig, RawTarget, validate};
use crate::error::ErrorCategory;
use crate::record::{Measurement, RequestRecord, TokenCount};
use crate::sse::SseDecoder;

fn target(backend: &str, edit: impl FnOnce(&mut RawTarget)) -> Arc<Target> {
    let mut raw = RawTarget {
        name: Some("t".into()),
        backend: Some(backend.into()),
        url: Some("http://127.0.0.1:1".into()),
        model: Some("m".into()),
        ..RawTarget::default()
    };
    edit(&mut raw);
    let config = RawConfig {
        targets: vec![raw],
        ..RawConfig::default()
    };
    Arc::clone(&validate(&config).unwrap().targets[0])
}

fn prompt(max_tokens: u32) -> Prompt {
    Prompt {
        text: "hello there".into(),
        input_tokens: 2,
        input_exact: false,
        media: Ok(Vec::new()),
        greedy: None,
        sampled: None,
        structure: None,
        cache_breakpoint: None,
        conversation: None,
        extra: None,
        max_tokens,
        model: "m".into(),
    }
}

fn json_body(spec: RequestSpec) -> Value {
    match spec.body {
        RequestBody::Json(body) => body,
        RequestBody::Multipart(_) => panic!("expected JSON"),
    }
}

/// Feed an SSE transcript through a backend's parser with events 10 ms apart; return the
/// measurement (or failure) and what the response said.
fn run(kind: BackendKind, sse: &str, eof: bool) -> (Result<Measurement, ProbeError>, ResponseInfo) {
    let (result, record) = run_record(kind, sse, eof);
    (result, record.response)
}

/// [`run`], with the whole record (events 10 ms apart from the request's start).
fn run_record(
    kind: BackendKind,
    sse: &str,
    eof: bool,
) -> (Result<Measurement, ProbeError>, RequestRecord) {
    let mut decoder = SseDecoder::default();
    let mut events = Vec::new();
    decoder.push(sse.as_bytes(), &mut events).unwrap();
    let mut parser = kind.backend().stream_parser();
    let t0 = Instant::now();
    let mut record = RequestRecord::new(t0);
    let mut at = t0;
    for event in &events {
        at += Duration::from_millis(10);
        match parser.on_event(event, &mut record.response) {
            Ok(StreamEvent::Chunk(chunk)) => record.on_chunk(at, chunk),
            Ok(StreamEvent::KeepAlive) => {}
            Ok(StreamEvent::Done(chunk)) => {
                record.on_chunk(at, chunk);
                record.done = true;
                record.end = Some(at);
                break;
            }
            Err(e) => return (Err(e), record),
        }
    }
    if record.end.is_none() && eof {
        at += Duration::from_millis(1);
        record.end = Some(at);
        if let Some(StreamEvent::Done(chunk)) = parser.on_eof() {
            record.on_chunk(at, chunk);
            record.done = true;
        }
    }
    (record.measure(None), record)
}

fn category(result: &Result<Measurement, ProbeError>) -> ErrorCategory {
    result.as_ref().expect_err("should fail").category()
}

#[test]
fn aliases_and_endpoints() {
    for alias in ["vllm", "sglang", "lmdeploy", "llama.cpp", "scalellm"] {
        assert_eq!(BackendKind::from_name(alias), Some(BackendKind::OpenAi));
    }
    for name in &BackendKind::NAMES[..16] {
        assert_eq!(BackendKind::from_name(name).unwrap().as_str(), *name);
    }
    let trt = target("tensorrt-llm", |t| t.model = Some("ens emble".into()));
    assert_eq!(trt.url.path(), "/v2/models/ens+emble/generate_stream");
}

#[test]
fn openai_parser_fills_response_info() {
    let sse = concat!(
        "data: {\"model\":\"served\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"model\":\"served\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let (result, info) = run(BackendKind::OpenAiChat, sse, false);
    assert!(result.is_ok());
    assert_eq!(
        info,
        ResponseInfo {
            text: "ok".into(),
            model: Some("served".into()),
            finish_reason: Some("stop".into()),
            server_timings: None,
            other_text: String::new(),
            reasoning_streamed: false,
            logprobs: None,
            tool_calls: Vec::new(),
            refusal: String::new(),
            cache_written: None,
            thinking: Vec::new(),
            reasoning: None,
            served_by: None,
            echo: Vec::new(),
            quota: None,
        }
    );
}

#[test]
fn llama_cpp_timings_are_kept() {
    let sse = concat!(
        "data: {\"choices\":[{\"text\":\" a\",\"index\":0,\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":3},",
        "\"timings\":{\"cache_n\":0,\"prompt_n\":3,\"prompt_ms\":1.5,\"predicted_n\":1,\"predicted_ms\":0.2,\"predicted_per_token_ms\":0.2}}\n\n",
        "data: [DONE]\n\n",
    );
    let (_, info) = run(BackendKind::OpenAi, sse, false);
    let timings = info.server_timings.unwrap();
    assert_eq!((timings.prompt_n, timings.prompt_ms), (Some(3), Some(1.5)));
    assert_eq!(
        (timings.predicted_n, timings.predicted_per_token_ms),
        (Some(1), Some(0.2))
    );
}

mod audio_embeddings;
mod cached;
mod clouds;
mod dialects;
mod hosted;
mod native;
mod reasoning;
