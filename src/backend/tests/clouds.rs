//! The clouds' doors: Bedrock's Converse and InvokeModel streams, Gemini's, Anthropic's
//! through Vertex AI, Azure's chat; their request bodies and their outcomes.

use super::*;

fn converse(events: &[(&str, &str)]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

const TEXT: (&str, &str) = (
    "contentBlockDelta",
    r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#,
);
const USAGE: (&str, &str) = (
    "metadata",
    r#"{"usage":{"inputTokens":5,"outputTokens":2,"totalTokens":107,"cacheReadInputTokens":100},"metrics":{"latencyMs":9}}"#,
);

#[test]
fn converse_reads_text_reasoning_and_usage_after_the_stop() {
    let sse = converse(&[
        ("messageStart", r#"{"role":"assistant"}"#),
        (
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"think"}}}"#,
        ),
        TEXT,
        ("contentBlockStop", r#"{"contentBlockIndex":0}"#),
        ("messageStop", r#"{"stopReason":"end_turn"}"#),
        USAGE,
    ]);
    let (result, info) = run(BackendKind::Bedrock, &sse, false);
    let m = result.unwrap();
    assert_eq!(info.text, "Hi");
    assert_eq!(info.thinking[0].text, "think");
    assert_eq!(m.output_tokens, Some(TokenCount::Usage(2)));
    assert_eq!(m.prompt_tokens, Some(105), "input plus the cache's");
    // Stopped, then cut before its usage: the generation ended.
    let cut = converse(&[TEXT, ("messageStop", r#"{"stopReason":"end_turn"}"#)]);
    assert!(run(BackendKind::Bedrock, &cut, true).0.is_ok());
    assert!(
        run(BackendKind::Bedrock, &converse(&[TEXT]), true)
            .0
            .is_err()
    );
}

#[test]
fn converse_stop_reasons_and_exceptions_land_in_their_categories() {
    let stopped = |reason: &str| {
        let sse = converse(&[
            TEXT,
            ("messageStop", &format!(r#"{{"stopReason":"{reason}"}}"#)),
            USAGE,
        ]);
        run(BackendKind::Bedrock, &sse, false).0
    };
    for (reason, want) in [
        ("guardrail_intervened", ErrorCategory::ContentFiltered),
        ("content_filtered", ErrorCategory::ContentFiltered),
        ("malformed_model_output", ErrorCategory::InvalidResponse),
        ("malformed_tool_use", ErrorCategory::InvalidResponse),
        (
            "model_context_window_exceeded",
            ErrorCategory::ContextLength,
        ),
    ] {
        assert_eq!(category(&stopped(reason)), want, "{reason}");
    }
    assert!(stopped("max_tokens").is_ok() && stopped("stop_sequence").is_ok());
    let thrown = |kind: &str, message: &str| {
        let sse = converse(&[
            TEXT,
            (
                &format!("exception/{kind}"),
                &format!(r#"{{"message":"{message}"}}"#),
            ),
        ]);
        category(&run(BackendKind::Bedrock, &sse, false).0)
    };
    assert_eq!(
        thrown("throttlingException", "slow down"),
        ErrorCategory::RateLimited
    );
    assert_eq!(
        thrown("serviceUnavailableException", "busy"),
        ErrorCategory::Overloaded
    );
    assert_eq!(
        thrown("modelStreamErrorException", "x"),
        ErrorCategory::StreamErrorEvent
    );
    assert_eq!(
        thrown(
            "validationException",
            "Input is too long for requested model."
        ),
        ErrorCategory::ContextLength
    );
    assert_eq!(
        thrown("validationException", "bad field"),
        ErrorCategory::StreamErrorEvent
    );
}

#[test]
fn bedrock_http_errors_go_by_their_error_type() {
    let mut headers = http::HeaderMap::new();
    let of = |headers: &http::HeaderMap| {
        BackendKind::Bedrock
            .backend()
            .status_error(headers, "said")
            .map(|e| e.category())
    };
    assert_eq!(of(&headers), None, "no type: the status decides");
    for (kind, want) in [
        ("ServiceUnavailableException", ErrorCategory::Overloaded),
        (
            "ModelNotReadyException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            ErrorCategory::Overloaded,
        ),
        ("ServiceQuotaExceededException", ErrorCategory::RateLimited),
        ("ModelErrorException", ErrorCategory::Http5xx),
        ("ModelTimeoutException", ErrorCategory::Http5xx),
    ] {
        headers.insert("x-amzn-errortype", kind.parse().unwrap());
        assert_eq!(of(&headers), Some(want), "{kind}");
    }
    headers.insert("x-amzn-errortype", "AccessDeniedException".parse().unwrap());
    assert_eq!(of(&headers), None, "a 403 is auth by its status");
}

#[test]
fn bedrock_requests_carry_their_own_shapes() {
    let t = target("bedrock", |t| {
        t.region = Some("us-east-1".into());
        t.temperature = Some(0.7);
        t.top_k = Some(5);
    });
    let mut p = prompt(16);
    p.cache_breakpoint = Some(6);
    let body = json_body(t.backend.backend().request(&t, &p));
    assert_eq!(body["inferenceConfig"]["maxTokens"], 16);
    assert_eq!(body["inferenceConfig"]["temperature"], 0.7);
    assert_eq!(body["additionalModelRequestFields"]["top_k"], 5);
    let content = &body["messages"][0]["content"];
    assert_eq!(content[0]["text"], "hello ");
    assert_eq!(content[1]["cachePoint"]["type"], "default");
    assert_eq!(content[2]["text"], "there");
    assert!(body.get("model").is_none() && body.get("stream").is_none());

    let t = target("anthropic-bedrock", |t| t.region = Some("us-east-1".into()));
    let spec = t.backend.backend().request(&t, &prompt(16));
    assert!(spec.headers.is_empty(), "the version is in the body");
    let body = json_body(spec);
    assert_eq!(body["anthropic_version"], "bedrock-2023-05-31");
    assert!(body.get("model").is_none() && body.get("stream").is_none());
    // A Bedrock API key is a Bearer token.
    let key = crate::endpoint::Secret::new("ABSK-key".into());
    let headers = t.backend.backend().authorize(&key);
    assert_eq!(headers[0].0, http::header::AUTHORIZATION);
    assert_eq!(headers[0].1, "Bearer ABSK-key");
}

#[test]
fn anthropic_through_bedrock_reads_the_messages_events_inside_its_chunks() {
    use base64::Engine;
    let chunk = |event: &str| {
        let bytes = base64::engine::general_purpose::STANDARD.encode(event);
        format!("event: chunk\ndata: {{\"bytes\":\"{bytes}\"}}\n\n")
    };
    let sse = [
        r#"{"type":"message_start","message":{"model":"claude","usage":{"input_tokens":7,"output_tokens":1}}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#,
        r#"{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":7,"outputTokenCount":3}}"#,
    ]
    .map(chunk)
    .concat();
    let (result, info) = run(BackendKind::AnthropicBedrock, &sse, false);
    let m = result.unwrap();
    assert_eq!((info.text.as_str(), m.prompt_tokens), ("Hi", Some(7)));
    assert_eq!(m.output_tokens, Some(TokenCount::Usage(3)));
    let bad = "event: chunk\ndata: {\"bytes\":\"not base64!\"}\n\n";
    assert_eq!(
        category(&run(BackendKind::AnthropicBedrock, bad, false).0),
        ErrorCategory::InvalidResponse
    );
    // Claude's safety classifiers, through any door.
    let refused = [
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"refusal"},"usage":{"output_tokens":3}}"#,
    ]
    .map(chunk)
    .concat();
    assert_eq!(
        category(&run(BackendKind::AnthropicBedrock, &refused, false).0),
        ErrorCategory::ContentFiltered
    );
}

fn gemini(chunks: &[&str]) -> String {
    chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect()
}

#[test]
fn gemini_counts_cumulative_usage_thoughts_and_ends_on_its_finish_reason() {
    let sse = gemini(&[
        r#"{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true}],"role":"model"}}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":0,"thoughtsTokenCount":2}}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"}}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":3,"thoughtsTokenCount":2}}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":" you"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":5,"thoughtsTokenCount":2,"cachedContentTokenCount":1},"modelVersion":"gemini-2.5-flash"}"#,
    ]);
    let (result, info) = run(BackendKind::Gemini, &sse, true);
    let m = result.unwrap();
    assert_eq!(info.text, "Hello you");
    assert_eq!(info.thinking[0].text, "hmm");
    assert_eq!(
        m.output_tokens,
        Some(TokenCount::Usage(7)),
        "answer and thoughts billed"
    );
    assert_eq!(m.prompt_tokens, Some(4));
    assert_eq!(info.model.as_deref(), Some("gemini-2.5-flash"));
    // No finish reason: cut.
    let cut = gemini(&[r#"{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}]}"#]);
    assert_eq!(
        category(&run(BackendKind::Gemini, &cut, true).0),
        ErrorCategory::StreamInterrupted
    );
}

#[test]
fn gemini_safety_blocks_and_errors_land_in_their_categories() {
    let outcome = |chunk: &str| category(&run(BackendKind::Gemini, &gemini(&[chunk]), true).0);
    assert_eq!(
        outcome(r#"{"candidates":[{"finishReason":"SAFETY"}]}"#),
        ErrorCategory::ContentFiltered
    );
    assert_eq!(
        outcome(r#"{"candidates":[{"finishReason":"PROHIBITED_CONTENT"}]}"#),
        ErrorCategory::ContentFiltered
    );
    assert_eq!(
        outcome(r#"{"promptFeedback":{"blockReason":"SAFETY"}}"#),
        ErrorCategory::ContentFiltered
    );
    assert_eq!(
        outcome(r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"quota"}}"#),
        ErrorCategory::RateLimited
    );
    assert_eq!(
        outcome(
            r#"{"error":{"code":503,"status":"UNAVAILABLE","message":"The model is overloaded."}}"#
        ),
        ErrorCategory::Overloaded
    );
    assert_eq!(
        outcome(r#"{"error":{"code":500,"status":"INTERNAL","message":"x"}}"#),
        ErrorCategory::StreamErrorEvent
    );
}

#[test]
fn gemini_and_vertex_requests() {
    let t = target("gemini", |t| {
        t.api_key_env = Some("HOME".into());
        t.top_p = Some(0.9);
        t.stop = Some(vec!["END".into()]);
    });
    let mut body = json_body(t.backend.backend().request(&t, &prompt(12)));
    assert_eq!(body["contents"][0]["parts"][0]["text"], "hello there");
    assert_eq!(body["generationConfig"]["maxOutputTokens"], 12);
    assert_eq!(body["generationConfig"]["topP"], 0.9);
    assert_eq!(body["generationConfig"]["stopSequences"][0], "END");
    let greedy = crate::prompt::Greedy {
        top_logprobs: 0,
        seed: 7,
        pinned: true,
    };
    t.backend
        .backend()
        .greedy(body.as_object_mut().unwrap(), &greedy);
    assert_eq!(body["generationConfig"]["temperature"], 0);
    assert_eq!(body["generationConfig"]["seed"], 7);
    assert!(body["generationConfig"].get("topP").is_none());
    let key = crate::endpoint::Secret::new("AIza-key".into());
    assert_eq!(t.backend.backend().authorize(&key)[0].0, "x-goog-api-key");
    assert_eq!(t.url.path(), "/v1beta/models/m:streamGenerateContent");
    assert_eq!(t.url.query(), Some("alt=sse"));

    let v = target("vertex-gemini", |t| {
        t.project = Some("proj-1".into());
        t.region = Some("europe-west4".into());
    });
    assert_eq!(
        v.url.path(),
        "/v1/projects/proj-1/locations/europe-west4/publishers/google/models/m:streamGenerateContent"
    );
    assert_eq!(v.credentials, Some(crate::auth::CloudCredentials::Google));

    let a = target("anthropic-vertex", |t| {
        t.project = Some("proj-1".into());
        t.region = Some("us-east5".into());
    });
    assert!(
        a.url
            .path()
            .ends_with("/publishers/anthropic/models/m:streamRawPredict")
    );
    let spec = a.backend.backend().request(&a, &prompt(8));
    assert!(spec.headers.is_empty());
    let body = json_body(spec);
    assert_eq!(body["anthropic_version"], "vertex-2023-10-16");
    assert_eq!(body["stream"], true);
    assert!(body.get("model").is_none());
}

#[test]
fn azure_sends_its_key_header_and_no_vllm_extension_and_filters_are_their_own_outcome() {
    let t = target("azure-openai", |t| t.api_key_env = Some("HOME".into()));
    assert_eq!(t.url.path(), "/openai/deployments/m/chat/completions");
    assert_eq!(t.url.query(), Some("api-version=2024-10-21"));
    let body = json_body(t.backend.backend().request(&t, &prompt(8)));
    assert!(body.get("ignore_eos").is_none());
    let key = crate::endpoint::Secret::new("azure-key".into());
    assert_eq!(t.backend.backend().authorize(&key)[0].0, "api-key");
    let sse = concat!(
        "data: {\"choices\":[],\"prompt_filter_results\":[{\"prompt_index\":0,\"content_filter_results\":{}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"content_filter_results\":{}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"content_filter\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    assert_eq!(
        category(&run(BackendKind::AzureOpenAi, sse, false).0),
        ErrorCategory::ContentFiltered
    );
}

#[test]
fn a_bedrock_region_must_agree_with_its_url() {
    let config = |region: &str| {
        let raw = RawTarget {
            name: Some("t".into()),
            backend: Some("bedrock".into()),
            url: Some("https://bedrock-runtime.us-west-2.amazonaws.com".into()),
            model: Some("m".into()),
            region: Some(region.into()),
            ..RawTarget::default()
        };
        validate(&RawConfig {
            targets: vec![raw],
            ..RawConfig::default()
        })
        .map(|_| ())
    };
    assert!(config("us-west-2").is_ok());
    let err = config("us-east-1").unwrap_err().to_string();
    assert!(err.contains("us-west-2"), "{err}");
    assert!(config("useast1").is_err());
}
