use http::StatusCode;

use super::*;
use crate::record::ToolCall;
use crate::session::script::structure;

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        name: name.into(),
        arguments: arguments.into(),
        ..ToolCall::default()
    }
}

fn calls(calls: Vec<ToolCall>) -> ResponseInfo {
    ResponseInfo {
        tool_calls: calls,
        ..ResponseInfo::default()
    }
}

fn text(text: &str) -> ResponseInfo {
    ResponseInfo {
        text: text.into(),
        ..ResponseInfo::default()
    }
}

fn status(code: u16, body: &str) -> ProbeError {
    ProbeError::Status {
        status: StatusCode::from_u16(code).unwrap(),
        body: body.into(),
    }
}

fn verdict(
    turn: Turn,
    index: usize,
    result: Result<&ResponseInfo, &ProbeError>,
    expect: Expect,
) -> &'static str {
    let (_, call) = structure(false);
    judge(turn, index, result, &call, &expect).result()
}

#[test]
fn a_refusal_after_the_first_turn_is_the_history_rejected() {
    let refused = status(400, "Expected 'tool_call_id' in the message");
    assert_eq!(
        verdict(Turn::ToolResult, 1, Err(&refused), Expect::Answer),
        "history_rejected"
    );
    assert_eq!(
        verdict(Turn::LongGap, 5, Err(&refused), Expect::Answer),
        "history_rejected"
    );
    // The first turn has no history: the probes' category.
    assert_eq!(
        verdict(Turn::First, 0, Err(&refused), Expect::Calls(1)),
        "http_4xx"
    );
    // Never the history: a model unloaded, a proxy's timeout or size limit, a server set
    // up without a tool parser; a template's 500 is (llama-server).
    for (code, body) in [
        (404, "The model `m` does not exist."),
        (408, "Request Timeout"),
        (413, "Request Entity Too Large"),
        (
            400,
            "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
        ),
    ] {
        assert_eq!(
            verdict(Turn::FollowUp, 2, Err(&status(code, body)), Expect::Answer),
            "http_4xx",
            "{code} {body}"
        );
    }
    let template = status(
        500,
        "Jinja Exception: Conversation roles must alternate user/assistant",
    );
    assert_eq!(
        verdict(Turn::ToolResult, 1, Err(&template), Expect::Answer),
        "history_rejected"
    );
    assert_eq!(
        verdict(
            Turn::ToolResult,
            1,
            Err(&status(500, "busy")),
            Expect::Answer
        ),
        "http_5xx"
    );
    // A rate limit, a key refused, a window exceeded, a server error: their own.
    assert_eq!(
        verdict(
            Turn::FollowUp,
            2,
            Err(&status(429, "slow down")),
            Expect::Answer
        ),
        "rate_limited"
    );
    assert_eq!(
        verdict(
            Turn::FollowUp,
            2,
            Err(&status(401, "bad key")),
            Expect::Answer
        ),
        "auth"
    );
    let window = status(
        400,
        "This model's maximum context length is 2048 tokens. However, you requested 4000 tokens",
    );
    assert_eq!(
        verdict(Turn::Depth, 5, Err(&window), Expect::Answer),
        "context_length"
    );
    assert_eq!(
        verdict(Turn::FollowUp, 2, Err(&window), Expect::Answer),
        "context_length"
    );
    assert_eq!(
        verdict(Turn::FollowUp, 2, Err(&status(503, "busy")), Expect::Answer),
        "http_5xx"
    );
    // A depth turn's other 4xx is no history's fault.
    assert_eq!(
        verdict(Turn::Depth, 5, Err(&refused), Expect::Answer),
        "http_4xx"
    );
    let (_, call) = structure(false);
    assert!(judge(Turn::ToolResult, 1, Err(&refused), &call, &Expect::Answer).ends_session());
}

#[test]
fn calls_are_judged_as_an_agent_uses_them() {
    let good = call("get_order_status", r#"{"order_id":"A-1234"}"#);
    let one = calls(vec![good.clone()]);
    assert_eq!(verdict(Turn::First, 0, Ok(&one), Expect::Calls(1)), "ok");
    assert_eq!(
        verdict(Turn::Parallel, 3, Ok(&one), Expect::Calls(2)),
        "parallel_calls_missing"
    );
    let two = calls(vec![
        good.clone(),
        ToolCall {
            slot: 1,
            ..good.clone()
        },
    ]);
    assert_eq!(verdict(Turn::Parallel, 3, Ok(&two), Expect::Calls(2)), "ok");
    let wrong = calls(vec![call("delete_order", r#"{"order_id":"A-1"}"#)]);
    assert_eq!(
        verdict(Turn::First, 0, Ok(&wrong), Expect::Calls(1)),
        "wrong_tool"
    );
    let bad = calls(vec![call("get_order_status", r#"{"order":"A-1"}"#)]);
    assert_eq!(
        verdict(Turn::First, 0, Ok(&bad), Expect::Calls(1)),
        "bad_arguments"
    );
    let broken = calls(vec![call("get_order_status", r#"{"order_id":"#)]);
    assert_eq!(
        verdict(Turn::First, 0, Ok(&broken), Expect::Calls(1)),
        "not_json"
    );
    assert_eq!(
        verdict(Turn::First, 0, Ok(&text("It is TRK-1")), Expect::Calls(1)),
        "no_tool_call"
    );
    let as_text = text(
        r#"<tool_call>{"name":"get_order_status","arguments":{"order_id":"A-1"}}</tool_call>"#,
    );
    let (_, forced) = structure(false);
    let v = judge(Turn::First, 0, Ok(&as_text), &forced, &Expect::Calls(1));
    assert_eq!(v.result(), "no_tool_call");
    assert!(v.note.unwrap().contains("as text"));
    let cut = ResponseInfo {
        finish_reason: Some("length".into()),
        ..text("Let me")
    };
    assert_eq!(
        verdict(Turn::First, 0, Ok(&cut), Expect::Calls(1)),
        "truncated"
    );
    // Only a refusal or a failure ends the session: a judged reply goes back.
    let (_, call) = structure(false);
    assert!(!judge(Turn::First, 0, Ok(&broken), &call, &Expect::Calls(1)).ends_session());
    assert!(!judge(Turn::Parallel, 3, Ok(&one), &call, &Expect::Calls(2)).ends_session());
}

#[test]
fn an_answer_after_results_must_quote_every_secret() {
    let secrets = || Expect::Grounded(vec!["TRK-0A1B2C3D".into(), "TRK-99999999".into()]);
    let both = text("B is TRK-0A1B2C3D and C is TRK-99999999.");
    assert_eq!(verdict(Turn::ParallelResult, 4, Ok(&both), secrets()), "ok");
    let one = text("B is TRK-0A1B2C3D.");
    assert_eq!(
        verdict(Turn::ParallelResult, 4, Ok(&one), secrets()),
        "tool_result_ignored"
    );
    let again = calls(vec![call("get_order_status", r#"{"order_id":"B-1"}"#)]);
    let (_, call) = structure(false);
    let v = judge(Turn::ParallelResult, 4, Ok(&again), &call, &secrets());
    assert_eq!(v.result(), "tool_result_ignored");
    assert!(v.note.unwrap().contains("again"));
    assert!(!judge(Turn::ParallelResult, 4, Ok(&one), &call, &secrets()).ends_session());
}
