//! Structured checks: the answer judged as an agent would use it. The request must be
//! accepted, the answer must finish, a JSON answer must parse and validate against its
//! schema, and a tool call must arrive as a call (not as text), name a declared function
//! (the named one, when `tool_choice` names it), and carry arguments that parse and
//! validate against that function's `parameters`. Then `expect_json` is the known answer:
//! a valid structure whose values are wrong is a `wrong_answer`, as a text `expect` is.
//!
//! The verdict quotes the offending output (cut) and the schema path that failed, for the
//! log line and the status page; only the closed [`InvalidReason`] is a label.

use serde_json::Value;

use super::Check;
use crate::endpoint::canary::CanaryPrompt;
use crate::error::{ProbeError, snippet};
use crate::metrics::{CheckResult, InvalidReason};
use crate::probe::{Outcome, ProbeReport};
use crate::record::ResponseInfo;
use crate::structure::{Format, Structure, ToolChoice};

/// Finish reasons that mean the length limit cut the answer (chat and TGI `length`,
/// Anthropic `max_tokens`, Responses `max_output_tokens`).
const CUT: [&str; 3] = ["length", "max_tokens", "max_output_tokens"];

/// Markers of a tool call written as text by a server whose tool parser missed it
/// (Hermes `<tool_call>`, Llama 3's `<|python_tag|>`, Mistral's `[TOOL_CALLS]`).
const CALL_AS_TEXT: [&str; 3] = ["<tool_call>", "<|python_tag|>", "[TOOL_CALLS]"];

fn invalid(reason: InvalidReason, note: String) -> Check {
    Check {
        result: CheckResult::InvalidOutput,
        divergence: None,
        drift: None,
        note: Some(format!("{}: {note}", reason.as_str())),
        invalid: Some(reason),
        structured: true,
    }
}

fn valid(result: CheckResult, note: Option<String>) -> Check {
    Check {
        result,
        divergence: None,
        drift: None,
        note,
        invalid: None,
        structured: true,
    }
}

/// Judge the answer to `prompt` (whose `structure` is `structure`).
pub fn judge(prompt: &CanaryPrompt, structure: &Structure, report: &ProbeReport) -> Check {
    let Outcome::Finished(result) = &report.outcome else {
        return Check::unscored("cut by shutdown");
    };
    match result {
        Err(ProbeError::Status { status, body })
            if matches!(status.as_u16(), 400 | 422) && crate::error::over_context(body) =>
        {
            // The budget, not the structure: a server with a short context refuses
            // `structured_max_tokens` on every check, healthy as it is. A ticket
            // (InferprobeCanaryBlind), not a page.
            return Check::unscored(format!(
                "the server refused the length asked for (lower canary.structured_max_tokens to fit its context): HTTP {}: {body}",
                status.as_u16()
            ));
        }
        Err(ProbeError::Status { status, body }) if matches!(status.as_u16(), 400 | 422) => {
            return invalid(
                InvalidReason::Rejected,
                format!("the request was refused: HTTP {}: {body}", status.as_u16()),
            );
        }
        Err(e) => return Check::unscored(format!("the request failed ({})", e.category())),
        Ok(_) => {}
    }
    let response = &report.record.response;
    let calls = &response.tool_calls;
    let output = || quote(response);
    if !response.refusal.is_empty() || response.finish_reason.as_deref() == Some("refusal") {
        return invalid(
            InvalidReason::Refused,
            format!(
                "the model refused: {}",
                quote_str(if response.refusal.is_empty() {
                    &response.text
                } else {
                    &response.refusal
                })
            ),
        );
    }
    if let Some(reason) = response
        .finish_reason
        .as_deref()
        .filter(|r| CUT.contains(r))
    {
        return invalid(
            InvalidReason::Truncated,
            format!(
                "the answer hit its length limit (finish reason {reason:?}{}) before the structure closed: {}",
                spent(report),
                output()
            ),
        );
    }
    let value = if structure.allows_tool_call() && !calls.is_empty() {
        match judge_calls(structure, response) {
            Ok(value) => value,
            Err(check) => return check,
        }
    } else if structure.requires_tool_call() {
        let why = call_as_text(structure, &response.text).unwrap_or("no tool call arrived");
        return invalid(InvalidReason::NoToolCall, format!("{why}: {}", output()));
    } else if let Some(format) = &structure.response_format {
        match judge_text(format, &response.text) {
            Ok(value) => value,
            Err(check) => return check,
        }
    } else if let Some(why) = call_as_text(structure, &response.text) {
        // `auto`: text is allowed, a call spelt out as text is not.
        return invalid(InvalidReason::NoToolCall, format!("{why}: {}", output()));
    } else {
        // `auto` or `none`, answered in text: only a text `expect` can judge it.
        return match &prompt.expect {
            Some(expect) if !expect.is_match(&response.text) => valid(
                CheckResult::WrongAnswer,
                Some(format!(
                    "expected /{}/, received {:?}",
                    expect.as_str(),
                    snippet(&response.text)
                )),
            ),
            _ => valid(CheckResult::Match, None),
        };
    };
    for (pointer, expect) in &prompt.expect_json {
        let found = value.pointer(pointer);
        let text = match found {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        if found.is_none() || !expect.is_match(&text) {
            return valid(
                CheckResult::WrongAnswer,
                Some(format!(
                    "expected {pointer} to match /{}/, received {}: {}",
                    expect.as_str(),
                    found.map_or_else(|| "nothing".into(), |v| snippet(&v.to_string())),
                    snippet(&value.to_string())
                )),
            );
        }
    }
    valid(CheckResult::Match, None)
}

/// Why `text` is a tool call written as text, if it is one: a tool parser's marker, or
/// (Llama 3.x's custom-tool format, which has no marker) the whole content a JSON object
/// naming a declared function with its `parameters` or `arguments`. The server's tool
/// parser missed it, and an agent receives prose, not a call.
pub(crate) fn call_as_text(structure: &Structure, text: &str) -> Option<&'static str> {
    if structure.tools.is_empty() {
        return None;
    }
    if CALL_AS_TEXT.iter().any(|m| text.contains(m)) {
        return Some("the call came as text in `content`, not as a tool call");
    }
    let value: Value = serde_json::from_str(text.trim()).ok()?;
    let name = value.get("name").and_then(Value::as_str)?;
    let arguments = ["parameters", "arguments"]
        .iter()
        .any(|key| value.get(key).is_some_and(Value::is_object));
    (arguments && structure.function(name).is_some()).then_some(
        "the call came as plain JSON in `content` (Llama 3's custom-tool format), not as a tool call",
    )
}

/// Every call: a declared function (the named one), with arguments that validate. The
/// first call's arguments are what `expect_json` reads.
pub(crate) fn judge_calls(structure: &Structure, response: &ResponseInfo) -> Result<Value, Check> {
    let mut first = None;
    for call in &response.tool_calls {
        let at = |what: &str| format!("tool call `{}` {what}", snippet(&call.name));
        let named = match &structure.tool_choice {
            Some(ToolChoice::Named(name)) => Some(name.as_str()),
            _ => None,
        };
        let function = match structure.function(&call.name) {
            Some(f) if named.is_none_or(|n| n == f.name) => f,
            _ => {
                let wanted = match named {
                    Some(name) => format!("`tool_choice` named `{name}`"),
                    None => "not a declared function".into(),
                };
                return Err(invalid(
                    InvalidReason::WrongTool,
                    at(&format!(
                        "({wanted}), arguments {}",
                        quote_str(&call.arguments)
                    )),
                ));
            }
        };
        if call.object_arguments {
            return Err(invalid(
                InvalidReason::NotJson,
                at(&format!(
                    "has arguments sent as a JSON value, not the string of JSON the API defines (an agent's SDK cannot read them): {}",
                    quote_str(&call.arguments)
                )),
            ));
        }
        let value: Value = serde_json::from_str(&call.arguments).map_err(|e| {
            invalid(
                InvalidReason::NotJson,
                at(&format!(
                    "has arguments that are not JSON ({e}): {}",
                    quote_str(&call.arguments)
                )),
            )
        })?;
        if let Err(e) = function.parameters.check(&value) {
            return Err(invalid(
                InvalidReason::Schema,
                at(&format!(
                    "breaks its parameters at schema path {} (value at {:?}: {}): {}",
                    e.schema_path,
                    e.instance_path,
                    e.message,
                    quote_str(&call.arguments)
                )),
            ));
        }
        first.get_or_insert(value);
    }
    Ok(first.unwrap_or(Value::Null))
}

fn judge_text(format: &Format, text: &str) -> Result<Value, Check> {
    let value: Value = serde_json::from_str(text.trim()).map_err(|e| {
        invalid(
            InvalidReason::NotJson,
            format!("the answer is not JSON ({e}): {}", quote_str(text)),
        )
    })?;
    match format {
        Format::JsonObject if !value.is_object() => Err(invalid(
            InvalidReason::Schema,
            format!(
                "`json_object` asked for an object, received {}",
                quote_str(text)
            ),
        )),
        Format::JsonObject => Ok(value),
        Format::JsonSchema { schema, name, .. } => match schema.check(&value) {
            Ok(()) => Ok(value),
            Err(e) => Err(invalid(
                InvalidReason::Schema,
                format!(
                    "the answer breaks schema `{name}` at schema path {} (value at {:?}: {}): {}",
                    e.schema_path,
                    e.instance_path,
                    e.message,
                    quote_str(text)
                ),
            )),
        },
    }
}

/// Where the budget went, reasoning apart from the answer: a reasoning model that thinks
/// past `structured_max_tokens` is told from one whose answer never closes.
fn spent(report: &ProbeReport) -> String {
    let response = &report.record.response;
    match report.record.spent() {
        (Some(billed), Some(reasoning)) if reasoning > 0 => format!(
            ", {reasoning} of its {billed} tokens reasoning, {} the answer",
            billed.saturating_sub(reasoning)
        ),
        (billed, _) if !response.reasoning_streamed => {
            billed.map(|b| format!(", {b} tokens")).unwrap_or_default()
        }
        (billed, _) => format!(
            "{}, reasoning streamed ({} bytes of output besides the answer)",
            billed.map(|b| format!(", {b} tokens")).unwrap_or_default(),
            response.other_text.len()
        ),
    }
}

/// The answer as an agent received it: its text, then its calls.
fn quote(response: &ResponseInfo) -> String {
    let mut parts = Vec::new();
    if !response.text.is_empty() {
        parts.push(format!("content {}", quote_str(&response.text)));
    }
    for call in &response.tool_calls {
        parts.push(format!(
            "call `{}` {}",
            snippet(&call.name),
            quote_str(&call.arguments)
        ));
    }
    if parts.is_empty() {
        return "(no output)".into();
    }
    parts.join("; ")
}

fn quote_str(text: &str) -> String {
    format!("{:?}", snippet(text))
}
