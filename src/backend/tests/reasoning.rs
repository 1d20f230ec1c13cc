//! Reasoning as the servers stream it: counted once, not from a 0 that every model
//! reports, never from tool-call events; the answer's first visible token; and answers
//! that were reasoning alone, streamed or hidden, cut at their budget.

use super::*;

fn chat(delta: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or("null".to_owned(), |f| format!("\"{f}\""));
    format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

fn usage(completion: u64, reasoning: u64) -> String {
    format!(
        "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":5,\"completion_tokens\":{completion},\"completion_tokens_details\":{{\"reasoning_tokens\":{reasoning}}}}}}}\n\n"
    )
}

/// vLLM 0.11 to 0.14 send each reasoning delta in both fields: it is one text.
#[test]
fn reasoning_in_both_fields_is_counted_once() {
    let both = r#"{"reasoning_content":"think ","reasoning":"think "}"#;
    let sse = [
        chat(both, None),
        chat(both, None),
        chat(r#"{"content":"Paris"}"#, Some("stop")),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let (result, record) = run_record(BackendKind::OpenAiChat, &sse, false);
    let measured = result.unwrap();
    assert_eq!(record.response.other_text, "think think ");
    assert_eq!(
        record.response.reasoning,
        Some(("reasoning_content", "think think ".into()))
    );
    assert_eq!(
        measured.answer.reasoning_tokens,
        Some(2),
        "two reasoning events"
    );
    assert!(measured.answer.reasoned);
    // The answer's first token is the third event's: 30 ms.
    assert_eq!(measured.answer.ttft, Some(Duration::from_millis(30)));
    assert_eq!(measured.ttft, Some(Duration::from_millis(10)));
}

/// OpenAI reports `reasoning_tokens: 0` for every chat model: no reasoning, nothing to count.
#[test]
fn a_zero_from_usage_is_no_reasoning() {
    let sse = [
        chat(r#"{"content":"ok"}"#, Some("stop")),
        usage(1, 0),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let (result, _) = run_record(BackendKind::OpenAiChat, &sse, false);
    let measured = result.unwrap();
    assert_eq!(measured.answer.reasoning_tokens, None);
    assert!(!measured.answer.reasoned);
}

/// Without usage, events carrying a tool call's arguments are not reasoning.
#[test]
fn tool_call_events_are_not_counted_as_reasoning() {
    let call = |args: &str| {
        format!(
            r#"{{"tool_calls":[{{"index":0,"id":"c1","type":"function","function":{{"name":"f","arguments":"{args}"}}}}]}}"#
        )
    };
    let sse = [
        chat(r#"{"reasoning_content":"hmm"}"#, None),
        chat(&call("{"), None),
        chat(&call("}"), Some("tool_calls")),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let (result, _) = run_record(BackendKind::OpenAiChat, &sse, false);
    let measured = result.unwrap();
    assert_ne!(measured.answer.reasoning_tokens, Some(3));
    assert!(measured.answer.reasoned);
    assert_eq!(
        measured.answer.ttft, None,
        "a call alone has no answer text"
    );
}

/// R1's blank line after `</think>` is not the answer's first token.
#[test]
fn the_answer_starts_at_its_first_visible_character() {
    let sse = [
        chat(r#"{"reasoning_content":"so"}"#, None),
        chat(r#"{"content":"\n\n"}"#, None),
        chat(r#"{"content":"Paris"}"#, Some("stop")),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let (result, _) = run_record(BackendKind::OpenAiChat, &sse, false);
    assert_eq!(result.unwrap().answer.ttft, Some(Duration::from_millis(30)));
}

/// Streamed reasoning up to the limit, no answer: exhausted. With an answer: not.
#[test]
fn reasoning_alone_at_the_limit_is_exhausted() {
    let thinking = [
        chat(r#"{"reasoning_content":"a"}"#, None),
        chat(r#"{"reasoning_content":"b"}"#, Some("length")),
        usage(2, 2),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let (result, record) = run_record(BackendKind::OpenAiChat, &thinking, false);
    let measured = result.unwrap();
    let exhausted = record.reasoning_exhausted(&measured).expect("exhausted");
    assert_eq!(exhausted.category(), ErrorCategory::ReasoningExhausted);

    let answered = [
        chat(r#"{"reasoning_content":"a"}"#, None),
        chat(r#"{"content":"b"}"#, Some("length")),
        usage(2, 1),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let (result, record) = run_record(BackendKind::OpenAiChat, &answered, false);
    assert!(record.reasoning_exhausted(&result.unwrap()).is_none());
}

/// Hidden reasoning (o-series, gpt-5) that took the whole budget: nothing streamed but
/// the role, usage all reasoning. Exhausted, not "empty"; without reasoning, empty.
#[test]
fn hidden_reasoning_at_the_limit_is_exhausted_not_empty() {
    let hidden = [
        chat(r#"{"role":"assistant","content":""}"#, None),
        chat("{}", Some("length")),
        usage(16, 16),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let (result, _) = run_record(BackendKind::OpenAiChat, &hidden, false);
    assert_eq!(category(&result), ErrorCategory::ReasoningExhausted);

    let empty = [
        chat(r#"{"role":"assistant","content":""}"#, None),
        chat("{}", Some("length")),
        usage(16, 0),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let (result, _) = run_record(BackendKind::OpenAiChat, &empty, false);
    assert_eq!(category(&result), ErrorCategory::EmptyResponse);
}

/// A count beyond what was billed is clamped to it.
#[test]
fn reasoning_is_never_more_than_the_answer_billed() {
    let sse = [
        chat(r#"{"reasoning_content":"a"}"#, None),
        chat(r#"{"content":"b"}"#, Some("stop")),
        usage(2, 9_223_372_036_854_775_807),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let (result, _) = run_record(BackendKind::OpenAiChat, &sse, false);
    assert_eq!(result.unwrap().answer.reasoning_tokens, Some(2));
}
