//! Faults the simulator injects, chosen per request by probability or forced with the
//! `x-inferprobe-fault` request header. Each one exists to land in exactly one of the
//! probe's error categories (the tests check that mapping), or, for the structured faults
//! (which touch only a request that asks for JSON or declares tools), in one of the
//! canary's invalid-output reasons.

use std::fmt;
use std::str::FromStr;

use rand::{Rng, RngExt};

/// Anthropic's error object for a provider shedding load (`http_529`, `overloaded_event`).
pub const OVERLOADED: &str =
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;

/// Request header that forces a fault for one request (e.g. a target's `headers`).
pub const FAULT_HEADER: &str = "x-inferprobe-fault";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// HTTP 429 with `Retry-After`.
    Http429,
    /// HTTP 500 with a JSON error.
    Http500,
    /// HTTP 401 with a JSON error.
    Http401,
    /// HTTP 529 with Anthropic's `overloaded_error`: the provider shedding load.
    Http529,
    /// Anthropic's `overloaded_error` halfway through a 200 stream (an `event: error` in
    /// its dialect, an `{"error": …}` of that type in the others).
    OverloadedEvent,
    /// HTTP 400 in the dialect's error shape, worded as vLLM refuses a prompt longer than
    /// its window (`--max-model-len`, or `auto` shrunk to fit memory).
    ContextLength,
    /// `data: {"error": …}` halfway through a 200 stream, then `[DONE]`.
    ErrorEvent,
    /// The connection is dropped halfway through the stream.
    Reset,
    /// The stream pauses halfway for the configured stall duration.
    Stall,
    /// The first token is delayed by the stall duration.
    TtftStall,
    /// A truncated JSON chunk halfway through the stream.
    MalformedJson,
    /// The platform's content filter stops the answer halfway: chat's `finish_reason:
    /// content_filter` (OpenAI, Azure), Gemini's `SAFETY`, Bedrock's `guardrail_intervened`.
    ContentFilter,
    /// Corrupted bytes halfway through the stream: invalid UTF-8 in SSE, a frame whose
    /// CRC fails in the AWS event stream (Bedrock).
    CorruptFrame,
    /// Every token, but no `finish_reason`, no usage and no `[DONE]`: a truncated stream
    /// that still ends cleanly at the HTTP level.
    NoDone,
    /// A well-formed stream that ends properly (finish reason, usage, end marker) without
    /// a single token: what `empty_response` means. (A stream that just stops is `no_done`.)
    Empty,
    /// Tokens forever, one every ITL (bounded only by the client).
    Endless,
    /// The normal response, one byte per drip interval.
    Drip,
    /// Structured: a tool call's arguments (or a JSON answer) are `false`, not the object
    /// the schema declares (vLLM, a named `tool_choice`).
    WrongArgumentType,
    /// Structured: the call is written as `<tool_call>…</tool_call>` text in `content`.
    ToolCallAsText,
    /// Structured: `{` then whitespace until the length limit (`finish_reason: length`).
    WhitespaceLoop,
    /// Structured: HTTP 400 naming a JSON Schema keyword the server does not support.
    SchemaRejected,
    /// Structured: the valid answer, one character per chunk (it must still validate).
    SplitArguments,
    /// The prefix cache is not used for this request: nothing served from it, nothing
    /// added (prefix caching turned off, as `--no-enable-prefix-caching`).
    CacheDisabled,
    /// The prefix cache is emptied before this request (memory pressure, a restart).
    CacheEvicts,
    /// Conversation: HTTP 400 for a request whose history holds an assistant's tool call,
    /// as vLLM refuses when a model's chat template cannot render tool-call history.
    HistoryReject,
    /// Conversation: after tool results, filler text that quotes none of them.
    IgnoreToolResults,
    /// Conversation: at most one tool call per reply (the first order id only).
    NoParallelCalls,
}

impl Fault {
    pub const ALL: [Fault; 24] = [
        Self::Http429,
        Self::Http500,
        Self::Http401,
        Self::Http529,
        Self::OverloadedEvent,
        Self::ContextLength,
        Self::ErrorEvent,
        Self::Reset,
        Self::Stall,
        Self::TtftStall,
        Self::MalformedJson,
        Self::CorruptFrame,
        Self::ContentFilter,
        Self::NoDone,
        Self::Empty,
        Self::Endless,
        Self::Drip,
        Self::WrongArgumentType,
        Self::ToolCallAsText,
        Self::WhitespaceLoop,
        Self::SchemaRejected,
        Self::SplitArguments,
        Self::CacheDisabled,
        Self::CacheEvicts,
    ];

    /// The faults that touch only a multi-turn conversation (the session check's): a
    /// request with no tool history or results gets the normal answer. Apart from
    /// [`Self::ALL`], whose every fault lands a single probe in an error category.
    pub const SESSION: [Fault; 3] = [
        Self::HistoryReject,
        Self::IgnoreToolResults,
        Self::NoParallelCalls,
    ];

    /// Every fault: [`Self::ALL`], then [`Self::SESSION`].
    pub fn every() -> impl Iterator<Item = Fault> {
        Self::ALL.into_iter().chain(Self::SESSION)
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::Http429 => "http_429",
            Self::Http500 => "http_500",
            Self::Http401 => "http_401",
            Self::Http529 => "http_529",
            Self::OverloadedEvent => "overloaded_event",
            Self::ContextLength => "context_length",
            Self::ErrorEvent => "error_event",
            Self::Reset => "reset",
            Self::Stall => "stall",
            Self::TtftStall => "ttft_stall",
            Self::MalformedJson => "malformed_json",
            Self::CorruptFrame => "corrupt_frame",
            Self::ContentFilter => "content_filter",
            Self::NoDone => "no_done",
            Self::Empty => "empty",
            Self::Endless => "endless",
            Self::Drip => "drip",
            Self::WrongArgumentType => "wrong_argument_type",
            Self::ToolCallAsText => "tool_call_as_text",
            Self::WhitespaceLoop => "whitespace_loop",
            Self::SchemaRejected => "schema_rejected",
            Self::SplitArguments => "split_arguments",
            Self::CacheDisabled => "cache_disabled",
            Self::CacheEvicts => "cache_evicts",
            Self::HistoryReject => "history_reject",
            Self::IgnoreToolResults => "ignore_tool_results",
            Self::NoParallelCalls => "no_parallel_calls",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::every().find(|f| f.name() == s).ok_or_else(|| {
            let names: Vec<_> = Self::every().map(Fault::name).collect();
            format!(
                "unknown fault `{s}` (expected one of: {})",
                names.join(", ")
            )
        })
    }
}

/// `--fault`'s help: every fault's name.
pub fn help() -> String {
    let names: Vec<&str> = Fault::every().map(Fault::name).collect();
    format!(
        "Inject a fault with a probability, e.g. `--fault reset=0.05` (repeatable). Faults: {}",
        names.join(" ")
    )
}

/// `name=probability`, as given to `--fault`.
pub fn parse_fault_spec(spec: &str) -> Result<(Fault, f64), String> {
    let (name, p) = spec
        .split_once('=')
        .ok_or_else(|| format!("`{spec}`: expected name=probability, e.g. reset=0.05"))?;
    let fault = name.trim().parse()?;
    let p: f64 = p
        .trim()
        .parse()
        .map_err(|_| format!("`{spec}`: probability must be a number"))?;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("`{spec}`: probability must be between 0 and 1"));
    }
    Ok((fault, p))
}

/// `REPLICA=NAME` (the fault on every request that replica serves) or
/// `REPLICA=NAME=P`, as given to `--replica-fault`; replicas count from 0.
pub fn parse_replica_fault(spec: &str) -> Result<(u16, Fault, f64), String> {
    let (replica, fault) = spec.split_once('=').ok_or_else(|| {
        format!(
            "`{spec}`: expected replica=name or replica=name=probability, e.g. 1=history_reject"
        )
    })?;
    let replica = replica
        .trim()
        .parse()
        .map_err(|_| format!("`{spec}`: the replica must be a number from 0"))?;
    let (fault, p) = match fault.contains('=') {
        true => parse_fault_spec(fault)?,
        false => (fault.trim().parse()?, 1.0),
    };
    Ok((replica, fault, p))
}

/// Check that the probabilities can be drawn from one uniform sample.
pub fn validate(faults: &[(Fault, f64)]) -> Result<(), String> {
    let total: f64 = faults.iter().map(|&(_, p)| p).sum();
    if total > 1.0 + 1e-9 {
        return Err(format!(
            "fault probabilities add up to {total}, more than 1"
        ));
    }
    Ok(())
}

/// Draw at most one fault: each with its own probability, mutually exclusive.
pub fn pick(faults: &[(Fault, f64)], rng: &mut impl Rng) -> Option<Fault> {
    let mut u: f64 = rng.random();
    for &(fault, p) in faults {
        if u < p {
            return Some(fault);
        }
        u -= p;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn names_round_trip() {
        for fault in Fault::every() {
            assert_eq!(fault.name().parse::<Fault>(), Ok(fault));
        }
        assert!("nope".parse::<Fault>().is_err());
    }

    #[test]
    fn specs_are_checked() {
        assert_eq!(parse_fault_spec("reset=0.25"), Ok((Fault::Reset, 0.25)));
        assert!(parse_fault_spec("reset").is_err());
        assert!(parse_fault_spec("reset=2").is_err());
        assert!(validate(&[(Fault::Reset, 0.6), (Fault::Stall, 0.6)]).is_err());
        assert_eq!(
            parse_replica_fault("1=history_reject"),
            Ok((1, Fault::HistoryReject, 1.0))
        );
        assert_eq!(
            parse_replica_fault("0=reset=0.5"),
            Ok((0, Fault::Reset, 0.5))
        );
        for bad in ["history_reject", "x=reset", "1=nope", "1=reset=2"] {
            assert!(parse_replica_fault(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn picks_follow_the_probabilities() {
        let faults = [(Fault::Reset, 0.2), (Fault::Http429, 0.3)];
        let mut rng = StdRng::seed_from_u64(1);
        let n = 20_000;
        let mut counts = [0usize; 3];
        for _ in 0..n {
            match pick(&faults, &mut rng) {
                Some(Fault::Reset) => counts[0] += 1,
                Some(Fault::Http429) => counts[1] += 1,
                _ => counts[2] += 1,
            }
        }
        let share = |c: usize| c as f64 / n as f64;
        assert!((share(counts[0]) - 0.2).abs() < 0.015);
        assert!((share(counts[1]) - 0.3).abs() < 0.015);
        assert!((share(counts[2]) - 0.5).abs() < 0.015);
    }
}
