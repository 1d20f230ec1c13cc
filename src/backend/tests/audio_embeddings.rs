//! Endpoints that answer with something other than streamed text: transcriptions (audio
//! in, text out) and embeddings.

use super::*;

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
