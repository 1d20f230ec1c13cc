//! A session's history (`crate::prompt::conversation`) in each chat dialect's spelling,
//! side by side so their rules are read together: chat sends a call's result as one
//! `tool` message per `tool_call_id`; the Messages API sends every result of a reply in
//! one user message of `tool_result` blocks, one per `tool_use` id, its signed thinking
//! blocks before the `tool_use` they led to, and caches only up to a `cache_control`
//! breakpoint; Responses sends `function_call` items and a `function_call_output` per
//! `call_id`. Reasoning goes back only where the dialect asks for it (Anthropic's signed
//! blocks): chat templates drop it, and Responses needs its encrypted items, which a
//! probe that stores nothing does not get.

use serde_json::{Map, Value, json};

use crate::prompt::conversation::{Conversation, Message, Reply};

/// Chat completions' `messages`.
pub fn chat(conversation: &Conversation) -> Value {
    // No system prompt, no system message: the prefix-cache check's next turn must begin
    // exactly as its first request did.
    let mut messages = Vec::new();
    if !conversation.system.is_empty() {
        messages.push(json!({ "role": "system", "content": conversation.system }));
    }
    for message in &conversation.messages {
        match message {
            Message::User(text) => messages.push(json!({ "role": "user", "content": text })),
            Message::Assistant(reply) => messages.push(chat_reply(reply)),
            Message::ToolResults(results) => {
                messages.extend(results.iter().map(
                    |r| json!({ "role": "tool", "tool_call_id": r.call_id, "content": r.content }),
                ));
            }
        }
    }
    Value::Array(messages)
}

fn chat_reply(reply: &Reply) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), "assistant".into());
    // `content` may be null only beside tool calls.
    let content = match reply.text.is_empty() && !reply.calls.is_empty() {
        true => Value::Null,
        false => Value::from(reply.text.as_str()),
    };
    message.insert("content".into(), content);
    if !reply.calls.is_empty() {
        // Only beside calls: DeepSeek wants its reasoning back within a tool-call loop,
        // and ignores (the first reasoner refused) it elsewhere.
        if let Some((field, text)) = &reply.reasoning {
            message.insert((*field).into(), Value::from(text.as_str()));
        }
        let calls = reply.calls.iter().map(|c| {
            json!({ "id": c.id, "type": "function",
                    "function": { "name": c.name, "arguments": c.arguments } })
        });
        message.insert("tool_calls".into(), calls.collect());
    }
    Value::Object(message)
}

/// The Messages API's `system` and `messages`, with a cache breakpoint on the last block
/// of the message `cache_through` ends at (the history an agent's next turn re-sends).
pub fn anthropic(conversation: &Conversation) -> (Value, Value) {
    let mut messages: Vec<Value> = conversation
        .messages
        .iter()
        .map(|message| match message {
            Message::User(text) => {
                json!({ "role": "user", "content": [{ "type": "text", "text": text }] })
            }
            Message::Assistant(reply) => json!({ "role": "assistant", "content": blocks(reply) }),
            Message::ToolResults(results) => {
                let blocks = results.iter().map(|r| {
                    json!({ "type": "tool_result", "tool_use_id": r.call_id, "content": r.content })
                });
                json!({ "role": "user", "content": blocks.collect::<Vec<_>>() })
            }
        })
        .collect();
    let marked = conversation
        .cache_through
        .and_then(|n| n.checked_sub(1))
        .and_then(|at| messages.get_mut(at))
        .and_then(|m| m.get_mut("content"))
        .and_then(Value::as_array_mut)
        .and_then(|blocks| blocks.last_mut());
    if let Some(Value::Object(block)) = marked {
        block.insert("cache_control".into(), json!({ "type": "ephemeral" }));
    }
    (
        Value::from(conversation.system.as_str()),
        Value::Array(std::mem::take(&mut messages)),
    )
}

fn blocks(reply: &Reply) -> Vec<Value> {
    let mut blocks: Vec<Value> = reply
        .thinking
        .iter()
        .map(|t| match &t.redacted {
            Some(data) => json!({ "type": "redacted_thinking", "data": data }),
            None => json!({ "type": "thinking", "thinking": t.text, "signature": t.signature }),
        })
        .collect();
    // Claude may answer "\n\n" before a `tool_use`; the API refuses a text block of
    // whitespace sent back ("text content blocks must contain non-whitespace text").
    if !reply.text.trim().is_empty() {
        blocks.push(json!({ "type": "text", "text": reply.text }));
    }
    blocks.extend(reply.calls.iter().map(|c| {
        // Arguments that are not a JSON object end the session before they are sent
        // back (`not_json`); an object is what `input` must be.
        let input = serde_json::from_str::<Value>(&c.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        json!({ "type": "tool_use", "id": c.id, "name": c.name, "input": input })
    }));
    blocks
}

/// The Responses API's `instructions` and `input` items.
pub fn responses(conversation: &Conversation) -> (Value, Value) {
    let mut input = Vec::new();
    for message in &conversation.messages {
        match message {
            Message::User(text) => input.push(json!({ "role": "user", "content": text })),
            Message::Assistant(reply) => {
                if !reply.text.trim().is_empty() {
                    input.push(json!({ "role": "assistant", "content": reply.text }));
                }
                input.extend(reply.calls.iter().map(|c| {
                    json!({ "type": "function_call", "call_id": c.id, "name": c.name,
                            "arguments": c.arguments })
                }));
            }
            Message::ToolResults(results) => input.extend(results.iter().map(|r| {
                json!({ "type": "function_call_output", "call_id": r.call_id, "output": r.content })
            })),
        }
    }
    (
        Value::from(conversation.system.as_str()),
        Value::Array(input),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::conversation::{Call, ToolResult};
    use crate::record::Thinking;

    fn conversation() -> Conversation {
        let call = |id: &str, order: &str| Call {
            id: id.into(),
            name: "get_order_status".into(),
            arguments: format!(r#"{{"order_id":"{order}"}}"#),
        };
        let result = |id: &str| ToolResult {
            call_id: id.into(),
            content: format!("result of {id}"),
        };
        Conversation {
            system: "be brief".into(),
            messages: vec![
                Message::User("look up A-1".into()),
                Message::Assistant(Reply {
                    text: String::new(),
                    thinking: vec![Thinking {
                        slot: 0,
                        text: "I should call".into(),
                        signature: "sig".into(),
                        redacted: None,
                    }],
                    reasoning: None,
                    calls: vec![call("c1", "A-1")],
                }),
                Message::ToolResults(vec![result("c1")]),
                Message::Assistant(Reply {
                    text: "done".into(),
                    ..Reply::default()
                }),
                Message::User("look up B-2 and C-3".into()),
                Message::Assistant(Reply {
                    calls: vec![call("c2", "B-2"), call("c3", "C-3")],
                    reasoning: Some(("reasoning_content", "two lookups".into())),
                    ..Reply::default()
                }),
                Message::ToolResults(vec![result("c2"), result("c3")]),
            ],
            cache_through: Some(7),
            headers: Vec::new(),
            parallel_calls: None,
        }
    }

    #[test]
    fn chat_sends_one_tool_message_per_call_id() {
        let messages = chat(&conversation());
        let roles: Vec<&str> = messages
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            [
                "system",
                "user",
                "assistant",
                "tool",
                "assistant",
                "user",
                "assistant",
                "tool",
                "tool"
            ]
        );
        assert_eq!(messages[2]["content"], Value::Null);
        assert_eq!(messages[2]["tool_calls"][0]["id"], "c1");
        assert_eq!(
            messages[2]["tool_calls"][0]["function"]["arguments"],
            r#"{"order_id":"A-1"}"#
        );
        assert_eq!(messages[8]["tool_call_id"], "c3");
        // The chat server's reasoning goes back beside its calls, under its own name.
        assert_eq!(messages[6]["reasoning_content"], "two lookups");
        // No reasoning goes back in chat.
        assert!(!messages.to_string().contains("I should call"));
    }

    #[test]
    fn anthropic_keeps_thinking_before_tool_use_and_one_message_of_results() {
        let (system, messages) = anthropic(&conversation());
        assert_eq!(system, "be brief");
        let m = messages.as_array().unwrap();
        assert_eq!(m.len(), 7);
        let types: Vec<&str> = m[1]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["thinking", "tool_use"]);
        assert_eq!(m[1]["content"][0]["signature"], "sig");
        assert_eq!(m[1]["content"][1]["input"]["order_id"], "A-1");
        assert_eq!(m[6]["role"], "user");
        let ids: Vec<&str> = m[6]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["tool_use_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["c2", "c3"]);
        // The breakpoint on the last block of the last message, and nowhere else.
        assert_eq!(m[6]["content"][1]["cache_control"]["type"], "ephemeral");
        assert_eq!(messages.to_string().matches("cache_control").count(), 1);
    }

    #[test]
    fn responses_pairs_each_function_call_with_its_output() {
        let (instructions, input) = responses(&conversation());
        assert_eq!(instructions, "be brief");
        let kinds: Vec<String> = input
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                i.get("type")
                    .or_else(|| i.get("role"))
                    .and_then(Value::as_str)
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "user",
                "function_call",
                "function_call_output",
                "assistant",
                "user",
                "function_call",
                "function_call",
                "function_call_output",
                "function_call_output"
            ]
        );
        assert_eq!(input[1]["call_id"], "c1");
        assert_eq!(input[8]["call_id"], "c3");
    }
}
