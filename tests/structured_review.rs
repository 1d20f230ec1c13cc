//! Structured checks that paged on a healthy server, and spellings that were wrong (issue
//! 32): each item's wire shape replayed to the daemon's canary, as real servers and hosted
//! APIs send it, and judged from its exported series and status page.

use crate::common;

use std::time::Duration;

use common::replay::{Capture, serve};
use common::structured::{
    TIME, WEATHER, checks, invalid, json_line, line, named_weather, prompts, target,
};
use common::{Scrape, start_daemon};
use inferprobe::structure::Structure;
use serde_json::{Value, json};

fn sse(data: &Value) -> String {
    format!("data: {data}\n\n")
}

/// A chat stream: a role chunk, then one chunk per delta, then `finish` and `[DONE]`.
fn chat_stream(deltas: &[Value], finish: &str) -> Capture {
    let chunk = |delta: &Value, finish: Value| {
        sse(&json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))
    };
    let mut body = chunk(&json!({"role": "assistant", "content": ""}), Value::Null);
    for delta in deltas {
        body += &chunk(delta, Value::Null);
    }
    body += &chunk(&json!({}), Value::from(finish));
    Capture::stream(&(body + "data: [DONE]\n\n"))
}

/// Run one canary target per `(name, backend, stream, prompts)` until each has `enough`
/// scored checks; the last scrape and the status page.
async fn judged(cases: Vec<(&str, &str, Capture, String)>, enough: f64) -> (Scrape, String) {
    let mut toml = String::new();
    let mut names = Vec::new();
    for (name, backend, capture, file) in cases {
        let addr = serve(capture, Duration::ZERO).await;
        toml += &target(name, backend, &format!("http://{addr}"), &file, "");
        names.push(name);
    }
    let daemon = start_daemon(&toml).await;
    let scored = |s: &Scrape, name: &str| {
        checks(s, name, "match")
            + checks(s, name, "invalid_output")
            + checks(s, name, "wrong_answer")
    };
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            names.iter().all(|n| scored(s, n) >= enough)
        })
        .await;
    let page = daemon.get("/", None).await.text().await.unwrap();
    daemon.stop().await;
    (s, page)
}

/// Item 1: Anthropic streams a tool without parameters as `input: {}` and one empty
/// `partial_json`; `{}` is the answer (every check was `not_json`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_call_without_arguments_is_an_empty_object() {
    let dir = tempfile::tempdir().unwrap();
    let now = r#"{"type": "function", "function": {"name": "get_now", "parameters": {"type": "object", "properties": {}}}}"#;
    let file = prompts(
        dir.path(),
        "now.jsonl",
        &[line("What time is it?", &[now], json!("required"))],
    );
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let body = [
        event("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}})),
        event("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "get_now", "input": {}}})),
        event("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ""}})),
        event("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 8}})),
        event("message_stop", json!({"type": "message_stop"})),
    ]
    .concat();
    let (s, _) = judged(
        vec![("now", "anthropic", Capture::stream(&body), file)],
        3.0,
    )
    .await;
    assert_eq!(invalid(&s, "now", "not_json"), 0.0);
    assert!(checks(&s, "now", "match") >= 3.0);
}

/// Item 4: Gemini sends each parallel call whole, with its own `id` and no `index`: two
/// calls, not one `get_weatherget_time` with both argument objects run together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_without_an_index_are_told_apart_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let file = prompts(
        dir.path(),
        "both.jsonl",
        &[line(
            "Weather and time in Paris?",
            &[WEATHER, TIME],
            json!("required"),
        )],
    );
    let call = |id: &str, name: &str, args: &str| json!({"tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": args}}]});
    let stream = chat_stream(
        &[
            call("c1", "get_weather", r#"{"city":"Paris"}"#),
            call("c2", "get_time", r#"{"timezone":"Europe/Paris"}"#),
        ],
        "tool_calls",
    );
    let (s, page) = judged(vec![("gemini", "openai-chat", stream, file)], 3.0).await;
    assert_eq!(invalid(&s, "gemini", "wrong_tool"), 0.0, "{page}");
    assert!(checks(&s, "gemini", "match") >= 3.0);
}

/// Item 7, 8, 10: a call written as plain JSON under `auto` (Llama 3's custom-tool format)
/// is `no_tool_call`; arguments sent as a JSON object are `not_json` and say so; a refusal
/// is `refused`, quoted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_json_calls_object_arguments_and_refusals_are_findings() {
    let dir = tempfile::tempdir().unwrap();
    let auto = prompts(
        dir.path(),
        "auto.jsonl",
        &[format!(
            r#"{{"prompt": "Weather in Lyon?", "tools": [{WEATHER}], "tool_choice": "auto", "expect_json": {{"/city": "^Lyon$"}}}}"#
        )],
    );
    let named = prompts(dir.path(), "named.jsonl", &[named_weather()]);
    let json = prompts(dir.path(), "json.jsonl", &[json_line()]);
    let plain = chat_stream(
        &[json!({"content": r#"{"name":"get_weather","parameters":{"city":"Paris"}}"#})],
        "stop",
    );
    let object = chat_stream(
        &[
            json!({"tool_calls": [{"index": 0, "id": "c", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}),
        ],
        "tool_calls",
    );
    let refusal = chat_stream(&[json!({"refusal": "I can't help with that."})], "stop");
    let (s, page) = judged(
        vec![
            ("plain", "openai-chat", plain, auto),
            ("object", "openai-chat", object, named),
            ("refusal", "openai-chat", refusal, json),
        ],
        3.0,
    )
    .await;
    assert!(invalid(&s, "plain", "no_tool_call") >= 3.0);
    assert!(page.contains("plain JSON in `content`"), "{page}");
    assert!(invalid(&s, "object", "not_json") >= 3.0);
    assert!(
        page.contains("not the string of JSON the API defines"),
        "{page}"
    );
    assert!(invalid(&s, "refusal", "refused") >= 3.0);
    assert!(page.contains("refused: &quot;I can&#39;t help"), "{page}");
    for name in ["plain", "object", "refusal"] {
        assert_eq!(checks(&s, name, "match"), 0.0, "{name}");
    }
    // Item 5: each finding is counted under the capability its prompt exercised, and its
    // structured checks too (the alert's denominator per capability).
    for (name, capability, reason) in [
        ("plain", "auto_tool", "no_tool_call"),
        ("object", "named_tool", "not_json"),
        ("refusal", "json", "refused"),
    ] {
        let labels = [("target", name), ("capability", capability)];
        let structured = s.sum("inferprobe_canary_structured_checks_total", &labels);
        let broken = s.sum(
            "inferprobe_canary_invalid_outputs_total",
            &[labels[0], labels[1], ("reason", reason)],
        );
        assert!(
            structured >= 3.0 && broken == structured,
            "{name}: {broken} of {structured}"
        );
    }
}

/// Item 8, the latency side: a target whose probes carry tools times a stream whose
/// arguments are an object (it failed every probe as `invalid_response`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_arguments_are_timed_not_failed() {
    let object = chat_stream(
        &[
            json!({"tool_calls": [{"index": 0, "id": "c", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}),
        ],
        "tool_calls",
    );
    let addr = serve(object, Duration::ZERO).await;
    let toml = format!(
        r#"
        [[targets]]
        name = "agent"
        backend = "openai-chat"
        url = "http://{addr}"
        model = "m"
        rate = 20
        tools = [{{ type = "function", function = {{ name = "get_weather", parameters = {{ type = "object", properties = {{ city = {{ type = "string" }} }} }} }} }}]
        "#
    );
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(20), |s| {
            s.sum("inferprobe_requests_total", &[("target", "agent")]) >= 5.0
        })
        .await;
    daemon.stop().await;
    assert_eq!(
        s.sum("inferprobe_request_errors_total", &[("target", "agent")]),
        0.0
    );
    assert!(
        s.sum(
            "inferprobe_time_to_first_token_seconds_count",
            &[("target", "agent")]
        ) >= 5.0
    );
}

fn schema(json_schema: Value) -> Structure {
    let format =
        json!({"type": "json_schema", "json_schema": {"name": "s", "schema": json_schema}});
    Structure::parse(Some(&format), None, None)
        .unwrap()
        .unwrap()
}

fn passes(structure: &Structure, value: Value) -> bool {
    match &structure.response_format {
        Some(inferprobe::structure::Format::JsonSchema { schema, .. }) => {
            schema.check(&value).is_ok()
        }
        _ => unreachable!(),
    }
}

/// Item 10: `format` is asserted, as strict mode and the agents' validators assert it; a
/// declared draft-07 is honoured (its tuple `items` was refused as 2020-12); an unknown
/// `$schema` is refused by name.
#[test]
fn formats_are_asserted_and_the_declared_draft_honoured() {
    let email = schema(
        json!({"type": "object", "properties": {"to": {"type": "string", "format": "email"}}}),
    );
    assert!(passes(&email, json!({"to": "ops@example.com"})));
    assert!(!passes(&email, json!({"to": "not an email"})));
    let when = schema(json!({"type": "string", "format": "date-time"}));
    assert!(!passes(&when, json!("yesterday")));
    let tuple = schema(json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "string"}, {"type": "number"}]
    }));
    assert!(passes(&tuple, json!(["a", 1])));
    assert!(!passes(&tuple, json!(["a", "b"])));
    let unknown = json!({"type": "json_schema", "json_schema": {"name": "s", "schema": {"$schema": "https://example.com/my-draft", "type": "object"}}});
    let (field, why) = Structure::parse(Some(&unknown), None, None).unwrap_err();
    assert_eq!(field, "response_format");
    assert!(why.contains("https://example.com/my-draft"), "{why}");
}

/// Item 3's other edge: a server whose context cannot hold the structured budget refuses
/// every check with a 400 (vLLM: "maximum context length"). That is the configuration, not
/// a broken structure: unscored (a ticket when it lasts), never `rejected` (a page).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_over_the_context_is_unscored_not_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let json = prompts(dir.path(), "json.jsonl", &[json_line()]);
    let refusal = Capture {
        status_line: "HTTP/1.1 400 Bad Request".into(),
        headers: vec!["content-type: application/json".into()],
        body: br#"{"object":"error","message":"This model's maximum context length is 512 tokens. However, you requested 560 tokens (48 in the messages, 512 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#.to_vec(),
    };
    let addr = serve(refusal, Duration::ZERO).await;
    let daemon = start_daemon(&target(
        "ctx",
        "openai-chat",
        &format!("http://{addr}"),
        &json,
        "",
    ))
    .await;
    let s = daemon
        .wait_for(Duration::from_secs(20), |s| {
            checks(s, "ctx", "unscored") >= 3.0
        })
        .await;
    let page = daemon.get("/", None).await.text().await.unwrap();
    daemon.stop().await;
    assert_eq!(checks(&s, "ctx", "invalid_output"), 0.0);
    assert_eq!(invalid(&s, "ctx", "rejected"), 0.0);
    assert!(page.contains("structured_max_tokens"), "{page}");
}

/// Item 3: a reasoning model that thinks past the budget is told from an answer that never
/// closes: the `truncated` note counts the reasoning tokens apart from the answer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_note_counts_reasoning_apart() {
    let dir = tempfile::tempdir().unwrap();
    let json = prompts(dir.path(), "json.jsonl", &[json_line()]);
    let chunk = |delta: Value, finish: Value, usage: Value| {
        sse(
            &json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": usage}),
        )
    };
    let body = chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
        Value::Null,
    ) + &chunk(
        json!({"reasoning_content": "Let me think about France"}),
        Value::Null,
        Value::Null,
    ) + &chunk(json!({"content": "{\"coun"}), Value::Null, Value::Null)
        + &chunk(
            json!({}),
            Value::from("length"),
            json!({"prompt_tokens": 9, "completion_tokens": 512, "completion_tokens_details": {"reasoning_tokens": 509}}),
        )
        + "data: [DONE]\n\n";
    let (s, page) = judged(
        vec![("thinker", "openai-chat", Capture::stream(&body), json)],
        3.0,
    )
    .await;
    assert!(invalid(&s, "thinker", "truncated") >= 3.0);
    assert!(
        page.contains("509 of its 512 tokens reasoning, 3 the answer"),
        "{page}"
    );
}
