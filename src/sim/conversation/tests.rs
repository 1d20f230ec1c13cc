use serde_json::{Value, json};

use super::*;
use crate::sim::structured::{FormatAt, parse};

const RESULT: &str = r#"{"order_id":"A-4821","status":"shipped","tracking_code":"TRK-9F2C41AB"}"#;

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_order_status", "parameters":
        {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}])
}

/// A request's conversation and structure, and how the model answers it.
struct Request {
    conversation: Conversation,
    structure: Option<SimStructure>,
    prefix: &'static str,
}

impl Request {
    fn reply(&self, fault: Option<Fault>) -> Option<Turn> {
        self.conversation
            .reply(self.structure.as_ref(), self.prefix, 64, fault)
    }
}

fn chat_of(body: Value) -> Request {
    Request {
        conversation: chat(&body),
        structure: parse(FormatAt::ResponseFormat, &body),
        prefix: "call_",
    }
}

fn chat_request(messages: Value) -> Request {
    chat_of(json!({"tools": tools(), "tool_choice": "auto", "messages": messages}))
}

fn calls(turn: Option<Turn>) -> Vec<String> {
    let Some(Turn::Answer(answer)) = turn else {
        panic!("expected an answer, got {turn:?}");
    };
    answer
        .runs(0, answer.pieces().len())
        .into_iter()
        .filter(|(_, open, _)| *open)
        .map(|(i, _, _)| {
            let (from, to) = match &answer {
                Answer::Calls { starts, pieces, .. } => (
                    starts[i],
                    starts.get(i + 1).copied().unwrap_or(pieces.len()),
                ),
                Answer::Text(_) => panic!("expected calls"),
            };
            answer.pieces()[from..to].concat()
        })
        .collect()
}

fn text(turn: Option<Turn>) -> String {
    match turn {
        Some(Turn::Answer(Answer::Text(pieces))) => pieces.concat(),
        other => panic!("expected text, got {other:?}"),
    }
}

#[test]
fn ids_and_codes_are_found_as_whole_words() {
    assert_eq!(
        order_ids("Look up B-1234 and C-5678, then B-1234 again."),
        ["B-1234", "C-5678"]
    );
    assert!(order_ids("AB-1234 A-12345 a-1234 A-123 XA-1234").is_empty());
    assert_eq!(order_ids("A-4821"), ["A-4821"]);
    assert_eq!(tracking_codes(RESULT), ["TRK-9F2C41AB"]);
    assert!(tracking_codes("TRK-9F2C41A TRK-9f2c41ab XTRK-9F2C41AB TRK-9F2C41ABC").is_empty());
}

#[test]
fn a_chat_session_calls_then_quotes_then_talks() {
    let system = json!({"role": "system", "content": "You are a support agent."});
    let ask = json!({"role": "user", "content": "What is the tracking code of order A-4821?"});
    let turn1 = chat_request(json!([system, ask]));
    assert_eq!(turn1.conversation.first, "You are a support agent.");
    assert!(!turn1.conversation.multi_turn);
    assert_eq!(calls(turn1.reply(None)), [r#"{"order_id":"A-4821"}"#]);
    let call = json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_x",
        "type": "function", "function": {"name": "get_order_status", "arguments": "{\"order_id\":\"A-4821\"}"}}]});
    let result = json!({"role": "tool", "tool_call_id": "call_x", "content": RESULT});
    let turn2 = chat_request(json!([system, ask, call, result]));
    assert!(turn2.conversation.has_calls);
    assert_eq!(
        text(turn2.reply(None)),
        "The tracking code is TRK-9F2C41AB."
    );
    assert_eq!(
        turn2.reply(Some(Fault::IgnoreToolResults)),
        Some(Turn::Filler)
    );
    let answer = json!({"role": "assistant", "content": "The tracking code is TRK-9F2C41AB."});
    let follow = json!({"role": "user", "content": "Thanks. When will it arrive?"});
    let turn3 = chat_request(json!([system, ask, call, result, answer, follow]));
    assert_eq!(turn3.reply(None), Some(Turn::Filler));
    let both = json!({"role": "user", "content": "Look up B-1234 and C-5678 at once."});
    let turn4 = chat_request(json!([
        system, ask, call, result, answer, follow, answer, both
    ]));
    assert_eq!(
        calls(turn4.reply(None)),
        [r#"{"order_id":"B-1234"}"#, r#"{"order_id":"C-5678"}"#]
    );
    assert_eq!(calls(turn4.reply(Some(Fault::NoParallelCalls))).len(), 1);
    // The structured faults break a conversation's calls as a single one's.
    assert_eq!(
        calls(turn4.reply(Some(Fault::WrongArgumentType))),
        ["false", "false"]
    );
    let Some(Turn::Answer(split)) = turn4.reply(Some(Fault::SplitArguments)) else {
        panic!("expected calls");
    };
    assert_eq!(split.pieces().len(), 2 * r#"{"order_id":"B-1234"}"#.len());
    assert!(text(turn4.reply(Some(Fault::ToolCallAsText))).starts_with("<tool_call>"));
}

#[test]
fn a_single_request_is_answered_as_before() {
    // No order id, no history: the structured answer decides (a call), as it always did.
    let plain = chat_request(json!([{"role": "user", "content": "What is the status?"}]));
    assert_eq!(plain.reply(None), None);
    // No tools, or `tool_choice: none`: as ever, even naming an id.
    let untooled = chat_of(json!({"messages": [{"role": "user", "content": "order A-4821?"}]}));
    assert_eq!(untooled.reply(None), None);
    let none = chat_of(json!({"tools": tools(), "tool_choice": "none",
        "messages": [{"role": "user", "content": "order A-4821?"}]}));
    assert_eq!(none.reply(None), None);
}

#[test]
fn anthropic_results_come_in_a_user_message_of_blocks() {
    let body = json!({"model": "m", "max_tokens": 64, "system": "Be brief.",
        "tools": [{"name": "get_order_status", "input_schema": {"type": "object",
            "properties": {"order_id": {"type": "string"}}}}],
        "tool_choice": {"type": "any"},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Look up B-1234 and C-5678."}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "get_order_status", "input": {"order_id": "B-1234"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_order_status", "input": {"order_id": "C-5678"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "TRK-00000001"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "TRK-0000000F"}],
                 "cache_control": {"type": "ephemeral"}}]}]});
    let req = Request {
        conversation: anthropic(&body),
        structure: parse(FormatAt::None, &body),
        prefix: "toolu_",
    };
    assert_eq!(req.conversation.first, "Be brief.");
    assert!(req.conversation.has_calls && req.conversation.multi_turn);
    assert_eq!(
        text(req.reply(None)),
        "The tracking codes are TRK-00000001 and TRK-0000000F."
    );
}

#[test]
fn responses_items_carry_calls_and_outputs() {
    let responses_of = |body: &Value| Request {
        conversation: responses(body),
        structure: parse(FormatAt::TextFormat, body),
        prefix: "call_",
    };
    let body = json!({"model": "m", "instructions": "Be brief.", "tools": [{"type": "function",
        "name": "get_order_status", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}],
        "input": [
            {"role": "user", "content": "Order A-4821?"},
            {"type": "function_call", "call_id": "call_1", "name": "get_order_status", "arguments": "{\"order_id\":\"A-4821\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": RESULT}]});
    let req = responses_of(&body);
    assert_eq!(req.conversation.first, "Be brief.");
    assert!(req.conversation.has_calls && req.conversation.multi_turn);
    assert!(text(req.reply(None)).contains("TRK-9F2C41AB"));
    let first = responses_of(
        &json!({"input": "Order A-4821?", "tools": [{"type": "function", "name": "get_order_status"}]}),
    );
    assert_eq!(calls(first.reply(None)), [r#"{"order_id":"A-4821"}"#]);
}
