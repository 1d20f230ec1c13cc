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
            Ok(StreamEvent::Done(chunk)) => {
                record.on_chunk(at, chunk);
                record.done = true;
                record.end = Some(at);
                break;
            }
            Err(e) => return (Err(e), record.response),
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
    let result = record.measure(None);
    (result, record.response)
}

fn category(result: &Result<Measurement, ProbeError>) -> ErrorCategory {
    result.as_ref().expect_err("should fail").category()
}

#[test]
fn aliases_and_endpoints() {
    for alias in ["vllm", "sglang", "lmdeploy", "llama.cpp", "scalellm"] {
        assert_eq!(BackendKind::from_name(alias), Some(BackendKind::OpenAi));
    }
    for name in &BackendKind::NAMES[..9] {
        assert_eq!(BackendKind::from_name(name).unwrap().as_str(), *name);
    }
    let trt = target("tensorrt-llm", |t| t.model = Some("ens emble".into()));
    assert_eq!(trt.url.path(), "/v2/models/ens+emble/generate_stream");
}

#[test]
fn tgi_request_translates_sampling_to_what_tgi_accepts() {
    let t = target("tgi", |t| {
        t.temperature = Some(0.0);
        t.top_p = Some(1.0);
        t.top_k = Some(5);
    });
    let body = json_body(Tgi.request(&t, &prompt(7)));
    assert_eq!(body["inputs"], "hello there");
    let parameters = &body["parameters"];
    assert_eq!(parameters["max_new_tokens"], 7);
    assert_eq!(parameters["details"], true);
    assert_eq!(parameters["do_sample"], false, "temperature 0 means greedy");
    assert!(parameters.get("temperature").is_none() && parameters.get("top_p").is_none());
    assert_eq!(parameters["top_k"], 5);
}

use tgi::Tgi;

#[test]
fn tgi_stream_counts_tokens_and_ends_on_the_final_event() {
    let sse = concat!(
        "data:{\"index\":1,\"token\":{\"id\":1,\"text\":\" a\",\"logprob\":-1,\"special\":false},\"generated_text\":null,\"details\":null}\n\n",
        ":\n\n",
        "data:{\"index\":2,\"token\":{\"id\":2,\"text\":\" b\",\"logprob\":-1,\"special\":false},\"generated_text\":null,\"details\":null}\n\n",
        "data:{\"index\":3,\"token\":{\"id\":3,\"text\":\"</s>\",\"logprob\":-1,\"special\":true},\"generated_text\":\" a b\",\"details\":{\"finish_reason\":\"eos_token\",\"generated_tokens\":3,\"seed\":null,\"input_length\":4}}\n\n",
    );
    let (result, info) = run(BackendKind::Tgi, sse, true);
    let m = result.unwrap();
    assert_eq!(m.ttft, Some(Duration::from_millis(10)));
    assert_eq!(
        m.output_tokens,
        Some(TokenCount::Usage(3)),
        "details.generated_tokens"
    );
    assert_eq!(m.prompt_tokens, Some(4));
    assert_eq!(
        m.itl_observations(),
        1,
        "the special EOS token is not output"
    );
    assert_eq!(info.text, " a b");
    assert_eq!(info.finish_reason.as_deref(), Some("eos_token"));

    let truncated = &sse[..sse.rfind("data:").unwrap()];
    let (result, _) = run(BackendKind::Tgi, truncated, true);
    assert_eq!(
        category(&result),
        ErrorCategory::StreamInterrupted,
        "no final event"
    );
}

#[test]
fn tgi_error_inside_a_200_stream() {
    let sse = "data:{\"error\":\"Model is overloaded\",\"error_type\":\"overloaded\"}\n\n";
    let (result, _) = run(BackendKind::Tgi, sse, true);
    let err = result.unwrap_err();
    assert_eq!(err.category(), ErrorCategory::StreamErrorEvent);
    assert_eq!(
        err.to_string(),
        "error event in a 2xx stream: overloaded: Model is overloaded"
    );
}

#[test]
fn triton_stream_ends_at_eof_and_reports_errors() {
    let t = target("tensorrt-llm", |_| {});
    let body = json_body(trtllm::TensorRtLlm.request(&t, &prompt(9)));
    assert_eq!(
        (body["text_input"].as_str(), body["max_tokens"].as_u64()),
        (Some("hello there"), Some(9))
    );
    assert_eq!(body["min_tokens"], 9, "ignore_eos via min_tokens");
    assert_eq!(body["stream"], true);

    let event = |text: &str| {
        format!(
            "data: {{\"model_name\":\"ensemble\",\"model_version\":\"1\",\"text_output\":\"{text}\"}}\n\n"
        )
    };
    let sse = [event(" x"), event(" y"), event(" z")].concat();
    let (result, info) = run(BackendKind::TensorRtLlm, &sse, true);
    let m = result.unwrap();
    assert_eq!(m.output_tokens, Some(TokenCount::Events(3)));
    assert_eq!(info.text, " x y z");
    assert_eq!(info.model.as_deref(), Some("ensemble"));

    let (result, _) = run(
        BackendKind::TensorRtLlm,
        &format!("{}data: {{\"error\":\"boom\"}}\n\n", event(" x")),
        true,
    );
    assert_eq!(category(&result), ErrorCategory::StreamErrorEvent);
    let (result, _) = run(
        BackendKind::TensorRtLlm,
        "data: {\"text_output\":5}\n\n",
        true,
    );
    assert_eq!(category(&result), ErrorCategory::InvalidResponse);
}

const ANTHROPIC: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"model\":\"claude-x\",\"content\":[],\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: ping\ndata: {\"type\":\"ping\"}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"abc\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" there\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[test]
fn anthropic_stream_skips_placeholders_and_counts_cumulative_usage() {
    let (result, info) = run(BackendKind::Anthropic, ANTHROPIC, false);
    let m = result.unwrap();
    // message_start's output_tokens: 1 is a placeholder, not the first token.
    assert_eq!(m.ttft, Some(Duration::from_millis(40)));
    assert_eq!(m.output_tokens, Some(TokenCount::Usage(2)));
    assert_eq!(m.prompt_tokens, Some(12));
    assert_eq!(m.itl_observations(), 1, "signature deltas are not tokens");
    assert_eq!(info.text, "Hi there");
    assert_eq!(info.finish_reason.as_deref(), Some("end_turn"));
    assert_eq!(info.model.as_deref(), Some("claude-x"));

    let error = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let first_four: String = ANTHROPIC.split_inclusive("\n\n").take(4).collect();
    let (result, _) = run(
        BackendKind::Anthropic,
        &format!("{first_four}{error}"),
        true,
    );
    let err = result.unwrap_err();
    assert_eq!(
        err.to_string(),
        "error event in a 2xx stream: overloaded_error: Overloaded"
    );
}

#[test]
fn anthropic_request_uses_its_own_headers() {
    let t = target("anthropic", |t| {
        t.stop = Some(vec!["\n\n".into()]);
        t.temperature = Some(0.2);
    });
    let spec = anthropic::Anthropic.request(&t, &prompt(3));
    assert!(
        spec.headers
            .iter()
            .any(|(n, v)| n == "anthropic-version" && v == "2023-06-01")
    );
    let body = json_body(spec);
    assert_eq!(body["stop_sequences"][0], "\n\n");
    assert_eq!(body["messages"][0]["content"], "hello there");
    let auth = anthropic::Anthropic.authorize(&Secret::new("sk-ant".into()));
    assert_eq!(auth[0].0, "x-api-key");
    assert!(auth[0].1.is_sensitive());
    let bearer = tgi::Tgi.authorize(&Secret::new("k".into()));
    assert_eq!(
        (bearer[0].0.as_str(), bearer[0].1.to_str().unwrap()),
        ("authorization", "Bearer k")
    );
}

fn responses_event(kind: &str, body: &str) -> String {
    format!("event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":1{body}}}\n\n")
}

#[test]
fn responses_stream_deltas_and_terminal_events() {
    let deltas = [
        responses_event(
            "response.created",
            ",\"response\":{\"model\":\"gpt-x\",\"status\":\"in_progress\",\"usage\":null}",
        ),
        responses_event("response.reasoning_text.delta", ",\"delta\":\"think\""),
        responses_event("response.output_text.delta", ",\"delta\":\"Hello\""),
        responses_event("response.output_text.delta", ",\"delta\":\"\""),
        responses_event("response.output_text.delta", ",\"delta\":\" world\""),
    ]
    .concat();
    let completed = responses_event(
        "response.completed",
        ",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":5,\"output_tokens\":4}}",
    );
    let (result, info) = run(
        BackendKind::OpenAiResponses,
        &format!("{deltas}{completed}"),
        false,
    );
    let m = result.unwrap();
    assert_eq!(
        m.ttft,
        Some(Duration::from_millis(20)),
        "reasoning deltas are tokens too"
    );
    assert_eq!(m.output_tokens, Some(TokenCount::Usage(4)));
    assert_eq!(m.prompt_tokens, Some(5));
    assert_eq!(
        (info.text.as_str(), info.finish_reason.as_deref()),
        ("Hello world", Some("completed"))
    );
    assert_eq!(info.model.as_deref(), Some("gpt-x"));

    let incomplete = responses_event(
        "response.incomplete",
        ",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"usage\":{\"output_tokens\":3}}",
    );
    let (result, info) = run(
        BackendKind::OpenAiResponses,
        &format!("{deltas}{incomplete}"),
        false,
    );
    assert!(result.is_ok());
    assert_eq!(info.finish_reason.as_deref(), Some("max_output_tokens"));

    let (result, _) = run(BackendKind::OpenAiResponses, &deltas, true);
    assert_eq!(
        category(&result),
        ErrorCategory::StreamInterrupted,
        "no terminal event"
    );

    let failed = responses_event(
        "response.failed",
        ",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"bad\"}}",
    );
    let flat = responses_event(
        "error",
        ",\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\",\"param\":null",
    );
    let nested = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"too_many_requests\",\"message\":\"nested\"}}\n\n";
    for (error, message) in [
        (failed, "bad"),
        (flat, "slow down"),
        (nested.to_owned(), "nested"),
    ] {
        let (result, _) = run(
            BackendKind::OpenAiResponses,
            &format!("{deltas}{error}"),
            true,
        );
        let err = result.unwrap_err();
        assert_eq!(err.category(), ErrorCategory::StreamErrorEvent);
        assert!(err.to_string().ends_with(message), "{err}");
    }
}

#[test]
fn audio_reads_both_transcription_dialects() {
    let vllm = concat!(
        "data: {\"id\":\"t\",\"object\":\"transcription.chunk\",\"model\":\"w\",\"choices\":[{\"delta\":{\"content\":\" one\"}}]}\n\n",
        "data: {\"id\":\"t\",\"object\":\"transcription.chunk\",\"model\":\"w\",\"choices\":[{\"delta\":{\"content\":\" two\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: {\"id\":\"t\",\"object\":\"transcription.chunk\",\"model\":\"w\",\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":2}}\n\n",
        "data: [DONE]\n\n",
    );
    let (result, info) = run(BackendKind::OpenAiAudio, vllm, false);
    assert_eq!(result.unwrap().output_tokens, Some(TokenCount::Usage(2)));
    assert_eq!(info.text, " one two");

    let openai = concat!(
        "data: {\"type\":\"transcript.text.delta\",\"delta\":\" one\"}\n\n",
        "data: {\"type\":\"transcript.text.delta\",\"delta\":\" two\"}\n\n",
        "data: {\"type\":\"transcript.text.done\",\"text\":\" one two\",\"usage\":{\"type\":\"tokens\",\"input_tokens\":20,\"output_tokens\":2,\"total_tokens\":22}}\n\n",
    );
    let (result, info) = run(BackendKind::OpenAiAudio, openai, true);
    let m = result.unwrap();
    assert_eq!(
        (m.output_tokens, m.prompt_tokens),
        (Some(TokenCount::Usage(2)), Some(20))
    );
    assert_eq!(m.itl_observations(), 1);
    assert_eq!(info.text, " one two");
}

#[test]
fn audio_request_is_a_multipart_upload_of_a_generated_wav() {
    let t = target("openai-audio", |t| {
        t.continuous_usage_stats = Some(true);
        t.audio_seconds = Some(0.5);
    });
    let spec = audio::Transcriptions.request(&t, &prompt(5));
    assert!(matches!(spec.body, RequestBody::Multipart(_)));
    let wav = wav::generate(0.5, 440.0);
    assert_eq!(wav.len(), 44 + 16_000);
    assert_eq!(wav::seconds(&wav), Some(0.5));
    assert_eq!(&wav[..4], b"RIFF");
    let silence = wav::generate(0.1, 0.0);
    assert!(silence[44..].iter().all(|&b| b == 0));
}

#[test]
fn mii_reads_every_response_shape() {
    let t = target("deepspeed-mii", |_| {});
    let parse = |body: &str| {
        let mut info = ResponseInfo::default();
        let whole = mii::DeepSpeedMii.parse_body(body.as_bytes(), &t, &mut info);
        (whole, info)
    };
    let (whole, info) = parse(
        r#"{"model":"m","choices":[{"index":0,"text":" out put","finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
    );
    let whole = whole.unwrap();
    assert!(whole.has_output);
    assert_eq!(
        (whole.output_tokens, whole.prompt_tokens),
        (Some(2), Some(3))
    );
    assert_eq!(
        (info.text.as_str(), info.finish_reason.as_deref()),
        (" out put", Some("length"))
    );
    let (whole, info) = parse(r#"{"text":["generated"]}"#);
    assert!(whole.unwrap().has_output && info.text == "generated");
    let (whole, _) = parse(
        r#"[{"generated_text":"g","prompt_length":4,"generated_length":7,"finish_reason":"stop"}]"#,
    );
    assert_eq!(whole.unwrap().output_tokens, Some(7));
    let (whole, _) = parse(r#"{"object":"error","message":"Model x not found.","code":40301}"#);
    assert_eq!(
        whole.unwrap_err().category(),
        ErrorCategory::StreamErrorEvent
    );
    let (whole, _) = parse(r#"{"unexpected":true}"#);
    assert_eq!(
        whole.unwrap_err().category(),
        ErrorCategory::InvalidResponse
    );
    let (whole, _) = parse(r#"{"text":[""]}"#);
    assert!(
        !whole.unwrap().has_output,
        "empty text is an empty response"
    );
}

#[test]
fn embeddings_require_a_numeric_vector_of_the_configured_size() {
    let t = target("openai-embeddings", |t| t.embedding_dimensions = Some(3));
    let body = json_body(embeddings::Embeddings.request(&t, &prompt(1)));
    assert_eq!(
        (body["input"].as_str(), body["encoding_format"].as_str()),
        (Some("hello there"), Some("float"))
    );
    let parse = |body: &str| {
        embeddings::Embeddings.parse_body(body.as_bytes(), &t, &mut ResponseInfo::default())
    };
    let ok = parse(
        r#"{"data":[{"embedding":[0.1,-0.2,0.3]}],"usage":{"prompt_tokens":2,"total_tokens":2}}"#,
    )
    .unwrap();
    assert!(ok.has_output);
    assert_eq!((ok.prompt_tokens, ok.output_tokens), (Some(2), None));
    // base64 little-endian float32: [1.0, 2.0, 3.0]
    let b64 = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        [1.0f32, 2.0, 3.0]
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect::<Vec<_>>(),
    );
    assert!(parse(&format!(r#"{{"data":[{{"embedding":"{b64}"}}]}}"#)).is_ok());
    let wrong = parse(r#"{"data":[{"embedding":[0.1,0.2]}]}"#).unwrap_err();
    assert_eq!(wrong.category(), ErrorCategory::Validation);
    let bad = parse(r#"{"data":[{"embedding":[0.1,"x",0.3]}]}"#).unwrap_err();
    assert_eq!(bad.category(), ErrorCategory::InvalidResponse);
    let missing = parse(r#"{"data":[]}"#).unwrap_err();
    assert_eq!(missing.category(), ErrorCategory::InvalidResponse);
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

mod dialects;
