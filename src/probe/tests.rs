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
    let err = non_stream_error("application/json", br#"{"error":{"message":"overloaded"}}"#);
    assert_eq!(err.category(), ErrorCategory::StreamErrorEvent);
    assert_eq!(err.to_string(), "error event in a 2xx stream: overloaded");
    let err = non_stream_error("text/html", b"<html></html>");
    assert_eq!(err.category(), ErrorCategory::InvalidResponse);
    let nonstream = include_bytes!("../../tests/fixtures/vllm/chat-nonstream.sse");
    let err = non_stream_error("application/json", nonstream);
    assert_eq!(err.category(), ErrorCategory::InvalidResponse);
}
