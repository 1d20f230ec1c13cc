use super::*;
use crate::endpoint::Timeouts;
use crate::error::ErrorCategory;
use crate::record::Chunk;

const SECOND: Duration = Duration::from_secs(1);

fn timeouts() -> Timeouts {
    Timeouts {
        connect: SECOND,
        ttft: SECOND * 5,
        stall: SECOND * 2,
        request: SECOND * 10,
    }
}

#[test]
fn deadline_is_ttft_before_the_first_token_then_stall_capped_by_total() {
    let t0 = Instant::now();
    let deadlines = Deadlines::new(t0, timeouts(), true);
    let mut record = RequestRecord::new(t0);
    let (at, err) = deadlines.next(&record, t0 + SECOND * 4);
    assert_eq!(
        (at, err.category()),
        (t0 + SECOND * 5, ErrorCategory::TtftTimeout)
    );

    let token = Chunk {
        has_output: true,
        ..Chunk::default()
    };
    record.on_chunk(t0 + SECOND, token);
    let (at, err) = deadlines.next(&record, t0 + SECOND);
    assert_eq!(
        (at, err.category()),
        (t0 + SECOND * 3, ErrorCategory::StallTimeout)
    );
    let (at, err) = deadlines.next(&record, t0 + SECOND * 9);
    assert_eq!(
        (at, err.category()),
        (t0 + SECOND * 10, ErrorCategory::RequestTimeout)
    );
}

#[test]
fn error_bodies_are_summarized_by_their_message() {
    let vllm = include_bytes!("../../tests/fixtures/vllm/completions-model-not-found.sse");
    assert_eq!(
        describe_body(vllm),
        "The model `nope` does not exist. Valid aliases: tiny."
    );
    let llama =
        include_bytes!("../../tests/fixtures/llama-server/completions-context-overflow.sse");
    assert!(describe_body(llama).starts_with("request (5002 tokens) exceeds"));
    assert_eq!(describe_body(b"<html>oops</html>"), "<html>oops</html>");
    let long = "x".repeat(1000);
    assert_eq!(describe_body(long.as_bytes()).chars().count(), 201);
}

#[test]
fn a_2xx_that_is_not_a_stream() {
    let err = non_stream_error(
        "text/event-stream",
        "application/json",
        br#"{"error":{"message":"overloaded"}}"#,
    );
    assert_eq!(err.category(), ErrorCategory::StreamErrorEvent);
    assert_eq!(err.to_string(), "error event in a 2xx stream: overloaded");
    // A gateway's OpenAI-shaped body carrying Anthropic's class.
    let body = br#"{"error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let err = non_stream_error("text/event-stream", "application/json", body);
    assert_eq!(err.category(), ErrorCategory::Overloaded);
    let err = non_stream_error("text/event-stream", "text/html", b"<html></html>");
    assert_eq!(err.category(), ErrorCategory::InvalidResponse);
    let nonstream = include_bytes!("../../tests/fixtures/vllm/chat-nonstream.sse");
    let err = non_stream_error("text/event-stream", "application/json", nonstream);
    assert_eq!(err.category(), ErrorCategory::InvalidResponse);
}

#[test]
fn the_models_list_is_beside_the_targets_v1_path() {
    let at = |url: &str| models_url(&url.parse().unwrap()).to_string();
    assert_eq!(
        at("http://vllm:8000/v1/chat/completions"),
        "http://vllm:8000/v1/models"
    );
    assert_eq!(
        at("https://gw/team/llm/v1/completions?api-version=2"),
        "https://gw/team/llm/v1/models"
    );
    // A path without /v1/ (a custom `endpoint`): the server's root.
    assert_eq!(at("http://tgi/generate"), "http://tgi/v1/models");
}

#[test]
fn the_models_entry_is_the_targets_model_else_the_first() {
    let list = serde_json::json!({"data": [
        {"id": "other", "owned_by": "a"},
        {"id": "m", "owned_by": "b"},
    ]});
    let owner = |entry: Option<serde_json::Value>| entry.map(|e| e["owned_by"].clone());
    assert_eq!(owner(model_entry(list.clone(), "m")), Some("b".into()));
    assert_eq!(owner(model_entry(list, "served-as")), Some("a".into()));
    for empty in [
        serde_json::json!({"data": []}),
        serde_json::json!({"object": "list"}),
        serde_json::json!([{"id": "m"}]),
    ] {
        assert_eq!(model_entry(empty.clone(), "m"), None, "{empty}");
    }
}
