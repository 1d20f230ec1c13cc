//! The verdict on one turn of a session (docs/sessions.md, "Reasons"), apart from the
//! session's I/O so every rule is a unit test: what the turn expected (a call, two calls,
//! an answer that uses the results it was just given, any answer), what came back.
//!
//! `history_rejected` is a refusal (an HTTP 400 or 422 that is not about the window or the
//! tool parser, or a 500 naming the chat template) of a turn after the first, whose own
//! first turn the same server accepted, confirmed by a control request (the session's
//! question alone, with the same tools) the server then accepts: the history the session
//! added (the model's own tool calls, their results) is what it refused.
//! The grounding reasons judge a model, not a server: the alerts on them stay quiet on a
//! model that has never grounded an answer (a random-weight test model).

use crate::canary::structured::{call_as_text, judge_calls};
use crate::error::{ErrorCategory, ProbeError};
use crate::metrics::InvalidReason;
pub use crate::metrics::{SessionReason as Reason, SessionTurn as Turn};
use crate::record::ResponseInfo;
use crate::structure::Structure;

/// What a turn's answer must be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Tool calls: this many at least (2 for the parallel turn), each a declared function
    /// with arguments that validate.
    Calls(usize),
    /// Text that quotes each of these secrets: the tool results the turn carried.
    Grounded(Vec<String>),
    /// Any answer.
    Answer,
}

/// A turn's verdict: `None` is `ok`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub reason: Option<Reason>,
    /// What the log line and the status page say (quotes cut).
    pub note: Option<String>,
}

impl Verdict {
    fn ok() -> Self {
        Self {
            reason: None,
            note: None,
        }
    }

    fn failed(reason: Reason, note: impl Into<String>) -> Self {
        Self {
            reason: Some(reason),
            note: Some(note.into()),
        }
    }

    /// The `result` label.
    pub fn result(&self) -> &'static str {
        self.reason.map_or("ok", Reason::as_str)
    }

    /// The session cannot go on from this turn: the server refused it or failed. A reply
    /// it judged (a wrong call, broken arguments) still goes back into the history, its
    /// arguments as `{}` where they are no JSON object, so the later turns still test what
    /// the server owns: a random-weight model's forced calls carry junk arguments, and its
    /// history must render all the same.
    pub fn ends_session(&self) -> bool {
        matches!(
            self.reason,
            Some(Reason::HistoryRejected | Reason::ContextLength | Reason::Error(_))
        )
    }
}

/// Judge turn `index` (from 0) of kind `turn`.
pub fn judge(
    turn: Turn,
    index: usize,
    result: Result<&ResponseInfo, &ProbeError>,
    structure: &Structure,
    expect: &Expect,
) -> Verdict {
    let response = match result {
        Ok(response) => response,
        Err(e) => return judge_error(turn, index, e),
    };
    match expect {
        Expect::Answer => Verdict::ok(),
        Expect::Calls(wanted) => judge_calls_turn(structure, response, *wanted),
        Expect::Grounded(secrets) => {
            let missing: Vec<&str> = secrets
                .iter()
                .filter(|s| !response.text.contains(s.as_str()))
                .map(String::as_str)
                .collect();
            match missing.as_slice() {
                [] => Verdict::ok(),
                _ if response.text.is_empty() && !response.tool_calls.is_empty() => {
                    Verdict::failed(
                        Reason::ToolResultIgnored,
                        format!(
                            "the model called `{}` again instead of answering with its result",
                            crate::error::snippet(&response.tool_calls[0].name)
                        ),
                    )
                }
                _ => Verdict::failed(
                    Reason::ToolResultIgnored,
                    format!(
                        "the answer lacks {} of the tool results it was given: {:?}",
                        missing.join(", "),
                        crate::error::snippet(&response.text)
                    ),
                ),
            }
        }
    }
}

fn judge_error(turn: Turn, index: usize, e: &ProbeError) -> Verdict {
    let category = e.category();
    if category == ErrorCategory::ContextLength {
        return Verdict::failed(Reason::ContextLength, e.to_string());
    }
    if index > 0 && turn != Turn::Depth && refuses_history(e) {
        return Verdict::failed(
            Reason::HistoryRejected,
            format!(
                "turn {} refused after the first was accepted: {e}",
                index + 1
            ),
        );
    }
    Verdict::failed(Reason::Error(category), e.to_string())
}

/// Whether a later turn's failure can be the history refused (the session then sends a
/// control request to tell): a 400 or 422 (a chat template's error, a validation of the
/// messages), not one about `tool_choice` or the tool parser (a server set up without it:
/// a configuration, not the history); or a 500 naming the template (llama-server answers a
/// template's exception with 500). A 404 (a model unloaded), 408, 413 (an ingress), 401,
/// 403 and 429 are never the history.
fn refuses_history(e: &ProbeError) -> bool {
    let ProbeError::Status { status, body } = e else {
        return false;
    };
    let body = body.to_ascii_lowercase();
    match status.as_u16() {
        400 | 422 => ![
            "tool_choice",
            "tool choice",
            "tool-call-parser",
            "tool_call_parser",
        ]
        .iter()
        .any(|w| body.contains(w)),
        500 => ["template", "jinja", "raise_exception"]
            .iter()
            .any(|w| body.contains(w)),
        _ => false,
    }
}

fn judge_calls_turn(structure: &Structure, response: &ResponseInfo, wanted: usize) -> Verdict {
    if !response.refusal.is_empty() || response.finish_reason.as_deref() == Some("refusal") {
        return Verdict::failed(Reason::Refused, "the model refused");
    }
    let cut = matches!(
        response.finish_reason.as_deref(),
        Some("length" | "max_tokens" | "max_output_tokens")
    );
    if response.tool_calls.is_empty() {
        if cut {
            return Verdict::failed(
                Reason::Truncated,
                "the answer hit its length limit before a tool call came",
            );
        }
        let why = call_as_text(structure, &response.text).unwrap_or("no tool call arrived");
        return Verdict::failed(
            Reason::NoToolCall,
            format!("{why}: {:?}", crate::error::snippet(&response.text)),
        );
    }
    if let Err(check) = judge_calls(structure, response) {
        // A call the length limit cut is the budget's doing (`max_tokens`), not the
        // parser's: its arguments never closed.
        if cut {
            return Verdict::failed(
                Reason::Truncated,
                format!(
                    "the length limit cut the tool call before its arguments closed (raise session.max_tokens): {}",
                    check.note.unwrap_or_default()
                ),
            );
        }
        let reason = match check.invalid {
            Some(InvalidReason::WrongTool) => Reason::WrongTool,
            Some(InvalidReason::NotJson) => Reason::NotJson,
            Some(InvalidReason::Truncated) => Reason::Truncated,
            Some(InvalidReason::Refused) => Reason::Refused,
            _ => Reason::BadArguments,
        };
        return Verdict::failed(reason, check.note.unwrap_or_default());
    }
    if response.tool_calls.len() < wanted {
        return Verdict::failed(
            Reason::ParallelCallsMissing,
            format!(
                "asked for {wanted} lookups at once, received {} call",
                response.tool_calls.len()
            ),
        );
    }
    Verdict::ok()
}

#[cfg(test)]
mod tests;
