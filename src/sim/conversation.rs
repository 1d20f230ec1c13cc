//! An agent's conversation, as the session check sends it every turn with its whole
//! history (chat `messages`, Anthropic `messages`, Responses `input` items), and how the
//! simulated model plays it: a tool-following model looks at the last message. Tool
//! results: it answers text quoting every tracking code (`TRK-` and 8 hex digits) they
//! hold. A user message naming order ids (`A-4821`: a capital, `-`, 4 digits) with tools
//! declared: it calls the order tool once per id, in one reply. A later plain question in
//! a conversation: text. Anything else is answered as a single request always was.

use serde_json::Value;

use super::faults::Fault;
use super::parts::prompt_text;
use super::structured::{self, Answer, Call, Choice, SimStructure};

/// What the simulated model reads of a request's history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conversation {
    /// The first message's text, as a router keyed on `messages[0]` hashes it: chat's first
    /// message (often the system prompt), Anthropic's `system`, Responses' `instructions`,
    /// else the first message.
    pub first: String,
    /// An assistant message of the history called a tool (chat `tool_calls`, a `tool_use`
    /// block, a `function_call` item).
    pub has_calls: bool,
    /// The history holds an assistant turn or tool results: not a single-turn request.
    pub multi_turn: bool,
    pub last: Last,
}

/// The conversation's last message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Last {
    #[default]
    Other,
    /// A user message's text.
    User(String),
    /// The results of the last round of tool calls, in order.
    ToolResults(Vec<String>),
}

/// How the conversation has the model answer, where it decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Turn {
    Answer(Answer),
    /// Plain filler text (or the toy model's, for a greedy request).
    Filler,
}

/// The tool the model calls for an order id, and the argument it is passed in.
const ORDER_TOOL: &str = "get_order_status";
const ORDER_ARGUMENT: &str = "order_id";
/// Characters of a call's arguments per token, as a structured answer's.
const CHARS_PER_TOKEN: usize = 4;

fn text(value: Option<&Value>) -> String {
    prompt_text(value)
}

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn items(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The conversation of a chat completions request.
pub fn chat(body: &Value) -> Conversation {
    let messages = items(body.get("messages"));
    let role = |m: &Value| str_of(m, "role").to_owned();
    let mut results: Vec<String> = messages
        .iter()
        .rev()
        .take_while(|m| role(m) == "tool")
        .map(|m| text(m.get("content")))
        .collect();
    results.reverse();
    let last = match messages.last() {
        _ if !results.is_empty() => Last::ToolResults(results),
        Some(m) if role(m) == "user" => Last::User(text(m.get("content"))),
        _ => Last::Other,
    };
    Conversation {
        first: text(messages.first().and_then(|m| m.get("content"))),
        has_calls: messages
            .iter()
            .any(|m| role(m) == "assistant" && !items(m.get("tool_calls")).is_empty()),
        multi_turn: messages
            .iter()
            .any(|m| matches!(role(m).as_str(), "assistant" | "tool")),
        last,
    }
}

/// The conversation of a Messages request.
pub fn anthropic(body: &Value) -> Conversation {
    let messages = items(body.get("messages"));
    let blocks = |m: &Value| items(m.get("content")).to_vec();
    let of_type = |m: &Value, kind: &str| {
        blocks(m)
            .into_iter()
            .filter(|b| str_of(b, "type") == kind)
            .collect::<Vec<_>>()
    };
    let mut first = text(body.get("system"));
    if first.is_empty() {
        first = text(messages.first().and_then(|m| m.get("content")));
    }
    let last = match messages.last() {
        Some(m) if str_of(m, "role") == "user" => {
            let results = of_type(m, "tool_result");
            match results.is_empty() {
                true => Last::User(text(m.get("content"))),
                false => {
                    Last::ToolResults(results.iter().map(|b| text(b.get("content"))).collect())
                }
            }
        }
        _ => Last::Other,
    };
    Conversation {
        first,
        has_calls: messages
            .iter()
            .any(|m| str_of(m, "role") == "assistant" && !of_type(m, "tool_use").is_empty()),
        multi_turn: messages
            .iter()
            .any(|m| str_of(m, "role") == "assistant" || !of_type(m, "tool_result").is_empty()),
        last,
    }
}

/// The conversation of a Responses request.
pub fn responses(body: &Value) -> Conversation {
    let instructions = text(body.get("instructions"));
    let input = match body.get("input") {
        Some(Value::String(s)) => {
            return Conversation {
                first: if instructions.is_empty() {
                    s.clone()
                } else {
                    instructions
                },
                last: Last::User(s.clone()),
                ..Conversation::default()
            };
        }
        other => items(other),
    };
    // An item without a type is a message.
    let kind = |item: &Value| match str_of(item, "type") {
        "" => "message".to_owned(),
        kind => kind.to_owned(),
    };
    let mut results: Vec<String> = input
        .iter()
        .rev()
        .take_while(|i| {
            matches!(
                kind(i).as_str(),
                "function_call_output" | "function_call" | "reasoning"
            )
        })
        .filter(|i| kind(i) == "function_call_output")
        .map(|i| text(i.get("output")))
        .collect();
    results.reverse();
    let last = match input.last() {
        _ if !results.is_empty() => Last::ToolResults(results),
        Some(i) if kind(i) == "message" && str_of(i, "role") == "user" => {
            Last::User(text(i.get("content")))
        }
        _ => Last::Other,
    };
    let first = match instructions.is_empty() {
        true => text(input.first().and_then(|i| i.get("content"))),
        false => instructions,
    };
    Conversation {
        first,
        has_calls: input.iter().any(|i| kind(i) == "function_call"),
        multi_turn: input.iter().any(|i| {
            matches!(kind(i).as_str(), "function_call" | "function_call_output")
                || str_of(i, "role") == "assistant"
        }),
        last,
    }
}

impl Conversation {
    /// How the conversation has the model answer a request with `structure` (its JSON
    /// answer and tools), at most `max_tokens`, with `fault`; its calls' ids begin with
    /// `id_prefix`. `None`: as a single request (its structure, the toy model or filler).
    pub fn reply(
        &self,
        structure: Option<&SimStructure>,
        id_prefix: &str,
        max_tokens: u64,
        fault: Option<Fault>,
    ) -> Option<Turn> {
        let limit = usize::try_from(max_tokens).unwrap_or(usize::MAX).max(1);
        match &self.last {
            Last::ToolResults(_) if fault == Some(Fault::IgnoreToolResults) => Some(Turn::Filler),
            Last::ToolResults(results) => {
                let codes = unique(results.iter().flat_map(|r| tracking_codes(r)));
                let words: Vec<String> = sentence(&codes).split(' ').map(str::to_owned).collect();
                let pieces = words
                    .iter()
                    .enumerate()
                    .map(|(i, w)| if i == 0 { w.clone() } else { format!(" {w}") })
                    .take(limit)
                    .collect();
                Some(Turn::Answer(Answer::Text(pieces)))
            }
            Last::User(text) => {
                let structure = structure?;
                if structure.tools.is_empty() || structure.choice == Choice::None {
                    return None;
                }
                let mut ids = order_ids(text);
                if ids.is_empty() {
                    // A question later in a conversation, with the tools left to the model.
                    let plain = self.multi_turn
                        && structure.choice == Choice::Auto
                        && structure.schema.is_none();
                    return plain.then_some(Turn::Filler);
                }
                if fault == Some(Fault::NoParallelCalls) {
                    ids.truncate(1);
                }
                let (name, key) = order_tool(structure)?;
                Some(Turn::Answer(calls(
                    id_prefix, &name, &key, &ids, limit, fault,
                )))
            }
            Last::Other => None,
        }
    }
}

/// The tool an order id is looked up with, and its argument: the tool `tool_choice`
/// names, else `get_order_status`, else the first taking an `order_id`.
fn order_tool(s: &SimStructure) -> Option<(String, String)> {
    let tool = match &s.choice {
        Choice::Named(name) => s.tools.iter().find(|(n, _)| n == name),
        _ => s
            .tools
            .iter()
            .find(|(n, _)| n == ORDER_TOOL)
            .or_else(|| s.tools.iter().find(|(_, p)| property(p, ORDER_ARGUMENT))),
    }?;
    let properties = tool.1.get("properties").and_then(Value::as_object);
    let key = match properties {
        Some(p) if !p.contains_key(ORDER_ARGUMENT) => {
            let required = items(tool.1.get("required"))
                .first()
                .and_then(Value::as_str);
            required
                .or_else(|| p.keys().next().map(String::as_str))
                .unwrap_or(ORDER_ARGUMENT)
        }
        _ => ORDER_ARGUMENT,
    };
    Some((tool.0.clone(), key.to_owned()))
}

fn property(parameters: &Value, name: &str) -> bool {
    parameters
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| p.contains_key(name))
}

/// One call of `name` per id, each with a fresh id, the structured faults applied as to a
/// single call: `wrong_argument_type` (`false`), `split_arguments` (a character a piece),
/// `tool_call_as_text` (the calls as `<tool_call>` text).
fn calls(
    prefix: &str,
    name: &str,
    key: &str,
    ids: &[String],
    limit: usize,
    fault: Option<Fault>,
) -> Answer {
    let arguments = |id: &str| match fault {
        Some(Fault::WrongArgumentType) => "false".to_owned(),
        _ => serde_json::json!({ key: id }).to_string(),
    };
    if fault == Some(Fault::ToolCallAsText) {
        let text: String = ids
            .iter()
            .map(|id| {
                let call = serde_json::json!({ "name": name, "arguments": { key: id } });
                format!("<tool_call>\n{call}\n</tool_call>\n")
            })
            .collect();
        let pieces = structured::chunk_chars(&text, CHARS_PER_TOKEN);
        return Answer::Text(pieces.into_iter().take(limit).collect());
    }
    let per_piece = match fault {
        Some(Fault::SplitArguments) => 1,
        _ => CHARS_PER_TOKEN,
    };
    let calls = ids
        .iter()
        .map(|id| {
            let call = Call {
                id: Some(format!("{prefix}{:016x}", rand::random::<u64>())),
                name: name.to_owned(),
            };
            (call, structured::chunk_chars(&arguments(id), per_piece))
        })
        .collect();
    Answer::calls(calls, limit)
}

/// The answer quoting `codes`.
fn sentence(codes: &[String]) -> String {
    match codes {
        [] => "The lookup returned no tracking code.".into(),
        [one] => format!("The tracking code is {one}."),
        [rest @ .., last] => format!("The tracking codes are {} and {last}.", rest.join(", ")),
    }
}

fn unique(all: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = Vec::new();
    for item in all {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}

/// Whether `text[at]` begins a word: the text's start or a byte that is not part of one.
fn starts_word(text: &[u8], at: usize) -> bool {
    at == 0 || !(text[at - 1].is_ascii_alphanumeric() || text[at - 1] == b'-')
}

fn ends_word(text: &[u8], end: usize) -> bool {
    text.get(end).is_none_or(|b| !b.is_ascii_alphanumeric())
}

/// Order ids in `text` (`A-4821`: a capital letter, `-`, four digits), each once, in order.
pub fn order_ids(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let found = b.windows(6).enumerate().filter_map(|(at, w)| {
        let id = w[0].is_ascii_uppercase()
            && w[1] == b'-'
            && w[2..].iter().all(u8::is_ascii_digit)
            && starts_word(b, at)
            && ends_word(b, at + 6);
        id.then(|| text[at..at + 6].to_owned())
    });
    unique(found)
}

/// Tracking codes in `text` (`TRK-9F2C41AB`: `TRK-` and 8 uppercase hex digits), in order.
pub fn tracking_codes(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let found = b.windows(12).enumerate().filter_map(|(at, w)| {
        let code = w.starts_with(b"TRK-")
            && w[4..]
                .iter()
                .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(c))
            && starts_word(b, at)
            && ends_word(b, at + 12);
        code.then(|| text[at..at + 12].to_owned())
    });
    unique(found)
}

#[cfg(test)]
mod tests;
