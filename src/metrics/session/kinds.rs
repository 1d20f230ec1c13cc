//! The session check's label values: the turn kinds, the results, the cache verdicts and
//! the refusals the pages are about; closed sets, so every label stays bounded.

use crate::error::ErrorCategory;

/// A session's turn kinds (the `turn` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionTurn {
    /// The system prompt, the tools and a question that needs one.
    First,
    /// The call's result: the answer must use it.
    ToolResult,
    /// A plain question after a human's think time.
    FollowUp,
    /// Two lookups asked at once.
    Parallel,
    /// Their results.
    ParallelResult,
    /// A question after the long gap.
    LongGap,
    /// A question padded to the configured depth.
    Depth,
}

impl SessionTurn {
    pub const ALL: [Self; 7] = [
        Self::First,
        Self::ToolResult,
        Self::FollowUp,
        Self::Parallel,
        Self::ParallelResult,
        Self::LongGap,
        Self::Depth,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::First => "first",
            Self::ToolResult => "tool_result",
            Self::FollowUp => "follow_up",
            Self::Parallel => "parallel",
            Self::ParallelResult => "parallel_result",
            Self::LongGap => "long_gap",
            Self::Depth => "depth",
        }
    }

    /// Turns judged for the cache: every turn that re-sends a history, but the depth
    /// turn's padding is new.
    pub const fn cached(self) -> bool {
        !matches!(self, Self::First | Self::Depth)
    }
}

/// Why a turn failed (the `result` label, beside `ok`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionReason {
    HistoryRejected,
    ContextLength,
    ToolResultIgnored,
    ParallelCallsMissing,
    NoToolCall,
    WrongTool,
    BadArguments,
    NotJson,
    Refused,
    Truncated,
    /// Any other failure, by the probes' category.
    Error(ErrorCategory),
}

impl SessionReason {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::HistoryRejected => "history_rejected",
            Self::ContextLength => "context_length",
            Self::ToolResultIgnored => "tool_result_ignored",
            Self::ParallelCallsMissing => "parallel_calls_missing",
            Self::NoToolCall => "no_tool_call",
            Self::WrongTool => "wrong_tool",
            Self::BadArguments => "bad_arguments",
            Self::NotJson => "not_json",
            Self::Refused => "refused",
            Self::Truncated => "truncated",
            // The category's own name; `context_length` never reaches here (its own
            // reason), so the names never collide.
            Self::Error(category) => category.as_str(),
        }
    }
}

/// The (turn, result) series made at 0 from the start, so an alert's `increase()` sees
/// the first failure: `ok` of every turn, and the reasons the alerts read.
pub(super) fn preset(turn: SessionTurn) -> Vec<&'static str> {
    use SessionReason as R;
    use SessionTurn as T;
    let mut results = vec!["ok"];
    match turn {
        // A first turn refused: the tools, not the history (InferprobeSessionToolsRejected).
        T::First => results.push(R::Error(ErrorCategory::Http4xx).as_str()),
        T::Depth => {}
        T::ToolResult | T::ParallelResult => {
            results.extend([R::HistoryRejected.as_str(), R::ToolResultIgnored.as_str()]);
        }
        T::Parallel => results.extend([
            R::HistoryRejected.as_str(),
            R::ParallelCallsMissing.as_str(),
        ]),
        T::FollowUp | T::LongGap => results.push(R::HistoryRejected.as_str()),
    }
    // Any turn can outgrow the window: a normal turn (InferprobeSessionWindowExceeded) or
    // the depth turn (InferprobeSessionDepthRejected).
    results.push(R::ContextLength.as_str());
    results
}

/// What the session pages are about (the `refusal` label of
/// `inferprobe_session_refusal_open`): a refusal that stops agents, and what
/// passing it again means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The first turn (the tools and a question) refused with an HTTP 4xx; passed by a
    /// first turn accepted.
    Tools,
    /// A later turn's history refused (`history_rejected`); passed by a session whose
    /// every turn before the depth turn was sent and accepted.
    History,
    /// A turn before the depth turn refused as longer than the window; passed as
    /// `History` is.
    Window,
    /// The depth turn refused as longer than the window; passed by a depth turn accepted.
    Depth,
}

impl Refusal {
    pub const ALL: [Self; 4] = [Self::Tools, Self::History, Self::Window, Self::Depth];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::History => "history",
            Self::Window => "window",
            Self::Depth => "depth",
        }
    }
}

/// A later turn's cache verdict (the `result` of `inferprobe_session_turn_cache_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnCache {
    Hit,
    Miss,
    Unreported,
}

impl TurnCache {
    pub const ALL: [Self; 3] = [Self::Hit, Self::Miss, Self::Unreported];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Hit => "hit",
            Self::Miss => "miss",
            Self::Unreported => "unreported",
        }
    }
}
