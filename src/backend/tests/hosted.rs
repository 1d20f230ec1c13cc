//! The hosted APIs' own formats: Anthropic's messages and OpenAI's Responses.

use super::*;

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
    // Load shed by the provider: its own category, not the server's error event.
    assert_eq!(err.category(), crate::error::ErrorCategory::Overloaded);
    assert_eq!(
        err.to_string(),
        "the provider is overloaded (in a 2xx stream): Overloaded"
    );
    let other = error.replace("overloaded_error", "api_error");
    let (result, _) = run(
        BackendKind::Anthropic,
        &format!("{first_four}{other}"),
        true,
    );
    let err = result.unwrap_err();
    assert_eq!(
        err.category(),
        crate::error::ErrorCategory::StreamErrorEvent
    );
    assert_eq!(
        err.to_string(),
        "error event in a 2xx stream: api_error: Overloaded"
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

/// Issue 43, item 2: Anthropic caches only up to a block marked `cache_control`. A prompt
/// with a breakpoint (a prefix-cache pair's) is two text blocks, the shared one marked;
/// automatic caching from `extra_body` is dropped for it, since it would mark the last
/// block, which differs between a pair's requests.
#[test]
fn anthropic_marks_the_shared_part_for_its_cache() {
    let t = target("anthropic", |t| {
        t.extra_body =
            Some(serde_json::from_str(r#"{"cache_control": {"type": "ephemeral"}}"#).unwrap());
    });
    let mut shared = prompt(3);
    shared.text = "nonce prefix words Question one".into();
    shared.cache_breakpoint = Some("nonce prefix words".len());
    let body = json_body(anthropic::Anthropic.request(&t, &shared));
    assert_eq!(
        body["messages"][0]["content"],
        serde_json::json!([
            { "type": "text", "text": "nonce prefix words", "cache_control": { "type": "ephemeral" } },
            { "type": "text", "text": " Question one" },
        ])
    );
    assert!(body.get("cache_control").is_none(), "{body}");
    // Without a breakpoint: one string, and the user's automatic caching kept.
    let body = json_body(anthropic::Anthropic.request(&t, &prompt(3)));
    assert_eq!(body["messages"][0]["content"], "hello there");
    assert_eq!(body["cache_control"]["type"], "ephemeral");
    // A breakpoint inside a character is no breakpoint.
    let mut odd = prompt(3);
    odd.text = "héllo".into();
    odd.cache_breakpoint = Some(2);
    let body = json_body(anthropic::Anthropic.request(&t, &odd));
    assert_eq!(body["messages"][0]["content"], "héllo");
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
    // Overloaded, as the error's type or code, flat, nested or failed: load shed.
    let overloaded = [
        responses_event(
            "error",
            ",\"code\":\"overloaded_error\",\"message\":\"Overloaded\",\"param\":null",
        ),
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n".to_owned(),
        responses_event(
            "response.failed",
            ",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
        ),
    ];
    for error in overloaded {
        let (result, _) = run(
            BackendKind::OpenAiResponses,
            &format!("{deltas}{error}"),
            true,
        );
        assert_eq!(category(&result), ErrorCategory::Overloaded, "{error}");
    }
}
