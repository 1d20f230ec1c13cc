//! Dialects of the OpenAI wire and error framings that servers really send: declared
//! aborts, llama.cpp's error lines, Mistral's content arrays, refusals, tool calls, `n > 1`.

use super::*;

fn chat(delta: &str, finish: &str) -> String {
    format!(
        "data: {{\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

fn stream(chunks: &[String]) -> String {
    let mut sse: String = chunks.concat();
    sse.push_str("data: [DONE]\n\n");
    sse
}

#[test]
fn a_declared_abort_fails_the_probe_even_with_done() {
    for reason in ["abort", "error"] {
        let sse = stream(&[
            chat(r#"{"role":"assistant","content":""}"#, "null"),
            chat(r#"{"content":"Hel"}"#, "null"),
            chat(r#"{"content":""}"#, &format!("\"{reason}\"")),
        ]);
        let (result, _) = run(BackendKind::OpenAiChat, &sse, false);
        assert_eq!(
            category(&result),
            ErrorCategory::StreamErrorEvent,
            "{reason}"
        );
        let message = result.unwrap_err().to_string();
        assert!(message.contains(&format!("\"{reason}\"")), "{message}");
    }
    // SGLang, completions endpoint.
    let sse = "data: {\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":null}]}\n\n\
               data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"abort\"}]}\n\n\
               data: [DONE]\n\n";
    let (result, _) = run(BackendKind::OpenAi, sse, false);
    assert_eq!(category(&result), ErrorCategory::StreamErrorEvent);
}

#[test]
fn llama_cpp_error_lines_are_stream_error_events_with_their_message() {
    // Before mid-2025: `error: {…}` with no `data:` prefix, then [DONE].
    let old = "data: {\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":null}]}\n\n\
               error: {\"code\":500,\"message\":\"failed to decode the batch\",\"type\":\"server_error\"}\n\n\
               data: [DONE]\n\n";
    // Since: `data: {"error": {…}}` and the stream just ends.
    let new = "data: {\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":null}]}\n\n\
               data: {\"error\":{\"code\":500,\"message\":\"failed to decode the batch\",\"type\":\"server_error\"}}\n\n";
    for sse in [old, new] {
        let (result, _) = run(BackendKind::OpenAi, sse, true);
        assert_eq!(category(&result), ErrorCategory::StreamErrorEvent);
        let message = result.unwrap_err().to_string();
        assert!(message.contains("failed to decode the batch"), "{message}");
    }
    // Before the first token too: the server's message, not "empty response".
    let (result, _) = run(
        BackendKind::OpenAiChat,
        "error: {\"code\":400,\"message\":\"the request exceeds the available context size\"}\n\n",
        true,
    );
    assert!(result.unwrap_err().to_string().contains("context size"));
}

#[test]
fn an_error_event_whose_data_is_not_json_is_still_the_servers_error() {
    for kind in [
        BackendKind::Anthropic,
        BackendKind::OpenAiChat,
        BackendKind::OpenAiResponses,
    ] {
        let sse = "event: error\ndata: upstream connect error or disconnect/reset\n\n";
        let (result, _) = run(kind, sse, true);
        assert_eq!(category(&result), ErrorCategory::StreamErrorEvent, "{kind}");
        assert!(
            result
                .unwrap_err()
                .to_string()
                .contains("upstream connect error"),
            "{kind}"
        );
    }
}

#[test]
fn mistral_content_arrays_are_output_thinking_and_text() {
    let thinking = |text: &str| {
        chat(
            &format!(
                r#"{{"content":[{{"type":"thinking","thinking":[{{"type":"text","text":"{text}"}}]}}]}}"#
            ),
            "null",
        )
    };
    let sse = stream(&[
        chat(r#"{"role":"assistant","content":""}"#, "null"),
        thinking("Let me"),
        thinking(" think."),
        // The turn from thinking to answer can come in one chunk.
        chat(
            r#"{"content":[{"type":"thinking","thinking":[{"type":"text","text":" Done."}],"closed":true},{"type":"text","text":"The"}]}"#,
            "null",
        ),
        chat(r#"{"content":" answer"}"#, r#""stop""#),
    ]);
    let (result, info) = run(BackendKind::OpenAiChat, &sse, false);
    let m = result.expect("a healthy Mistral stream is a success");
    assert_eq!(
        m.ttft,
        Some(Duration::from_millis(20)),
        "the first thinking chunk"
    );
    assert_eq!(m.output_tokens, Some(TokenCount::Events(4)));
    assert_eq!(info.text, "The answer");
    assert_eq!(info.other_text, "Let me think. Done.");
}

#[test]
fn refusals_and_tool_calls_are_generated_output() {
    let sse = stream(&[
        chat(
            r#"{"role":"assistant","content":null,"refusal":""}"#,
            "null",
        ),
        chat(r#"{"refusal":"I can't"}"#, "null"),
        chat(r#"{"refusal":" help with that."}"#, r#""stop""#),
    ]);
    let (result, info) = run(BackendKind::OpenAiChat, &sse, false);
    let m = result.expect("a refusal is an answer");
    assert_eq!(m.ttft, Some(Duration::from_millis(20)));
    assert_eq!(info.other_text, "I can't help with that.");
    assert_eq!(info.text, "");

    let call = |f: &str| {
        chat(
            &format!(r#"{{"tool_calls":[{{"index":0,"function":{f}}}]}}"#),
            "null",
        )
    };
    let sse = stream(&[
        chat(r#"{"role":"assistant","content":null}"#, "null"),
        call(r#"{"name":"get_weather","arguments":""}"#),
        call(r#"{"arguments":"{\"city\":"}"#),
        call(r#"{"arguments":" \"Paris\"}"}"#),
        chat("{}", r#""tool_calls""#),
    ]);
    let (result, info) = run(BackendKind::OpenAiChat, &sse, false);
    let m = result.expect("a tool-only answer is a success");
    assert_eq!(m.ttft, Some(Duration::from_millis(20)));
    assert_eq!(m.itl_observations(), 2);
    assert_eq!(info.other_text, r#"get_weather{"city": "Paris"}"#);
}

#[test]
fn with_n_greater_than_one_only_choice_zero_is_measured() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/vllm/completions-n2.sse");
    let sse = std::fs::read_to_string(path).unwrap();
    let choice0: String = sse
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            let choice = v["choices"].get(0)?.clone();
            (choice["index"] == 0).then(|| choice["text"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    let (result, info) = run(BackendKind::OpenAi, &sse, false);
    result.unwrap();
    assert_eq!(info.text, choice0);
    assert_eq!(info.finish_reason.as_deref(), Some("length"));
}

#[test]
fn chat_sends_the_output_limit_under_the_configured_name() {
    let t = target("openai-chat", |_| {});
    let body = json_body(openai_chat::OpenAiChat.request(&t, &prompt(7)));
    assert_eq!(body["max_tokens"], 7);
    assert!(body.get("max_completion_tokens").is_none());
    let t = target("openai-chat", |t| {
        t.max_tokens_field = Some("max_completion_tokens".into());
    });
    let body = json_body(openai_chat::OpenAiChat.request(&t, &prompt(7)));
    assert_eq!(body["max_completion_tokens"], 7);
    assert!(body.get("max_tokens").is_none(), "OpenAI rejects both");
}
