//! A target's validated session check (docs/sessions.md): how often a conversation runs,
//! how long it waits between turns (a tool's latency, a human's think time, an optional
//! long gap), whether it asks for parallel calls and how it forces a call, the depth turn,
//! the affinity headers it sends and the headers that name the backend; and what a
//! session costs, printed by `inferprobe check` before it runs.

use std::time::Duration;

use http::HeaderName;

#[derive(Clone, Debug, PartialEq)]
pub struct SessionSpec {
    /// One session per interval.
    pub interval: Duration,
    /// Before a turn that carries tool results: uniform between these (a tool's latency).
    pub tool_gap: (Duration, Duration),
    /// Before a user's turn: the human reading and typing.
    pub human_gap: Duration,
    /// A last turn this long after the one before, to reach offload tiers and hosted
    /// caches' lifetimes; none: no such turn.
    pub long_gap: Option<Duration>,
    /// Ask for two lookups at once and expect two calls in one reply.
    pub parallel: bool,
    /// `tool_choice` on the turns that need a call: `auto` (what agents send) or
    /// `required` (a call forced by the server's grammar: what a random-weight test model
    /// needs to produce one).
    pub force_calls: bool,
    /// Output tokens each turn may use.
    pub max_tokens: u32,
    pub depth: Option<Depth>,
    /// Sent with every turn of every other session, the session's id as the value.
    pub affinity_headers: Vec<HeaderName>,
    /// Response headers that name the backend that served a turn.
    pub served_by: Vec<HeaderName>,
    /// A later turn hit when the server read at least this share of the previous turn's
    /// prompt (its whole blocks) from its cache.
    pub hit_share: f64,
    pub block_tokens: Option<u32>,
    /// A hosted API caches no prompt shorter than this (`prefix_cache::known_cache`:
    /// OpenAI's 1,024, Claude's 1,024 to 4,096); 0 where none is known. A later turn whose
    /// previous prompt was shorter is not judged.
    pub min_cacheable: u32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Depth {
    pub to: DepthTo,
    /// The depth turn ends one session in this many.
    pub every: u32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DepthTo {
    /// A prompt of this many tokens: what the users need.
    Tokens(u32),
    /// The window the server advertises (`/v1/models` `max_model_len`), less this share
    /// of it and the turn's output: what the server says it serves.
    Served { margin: f64 },
}

/// Prompt tokens of the system prompt, the tool's definition and the template around
/// them, as words count them (`crate::session::script`).
pub const BASE_TOKENS: u64 = 160;
/// What each turn adds to the history besides the model's output: a question or a
/// tool result.
pub const TURN_TOKENS: u64 = 40;

impl SessionSpec {
    /// Turns of an ordinary session (the depth turn aside): five, the second lookup and
    /// its result whether or not they are asked for at once, and the long gap's.
    pub fn turns(&self) -> u64 {
        5 + u64::from(self.long_gap.is_some())
    }

    pub fn sessions_per_hour(&self) -> f64 {
        3600.0 / self.interval.as_secs_f64()
    }

    /// Prompt tokens an hour, every turn re-sending the history (output at its most),
    /// the depth turns included at their configured depth.
    pub fn prompt_tokens_per_hour(&self) -> u64 {
        let step = TURN_TOKENS + u64::from(self.max_tokens);
        let turns = self.turns();
        // Turn k (from 0) sends the base and k steps of history and its own question.
        let per_session: u64 = (0..turns)
            .map(|k| BASE_TOKENS + TURN_TOKENS + k * step)
            .sum();
        let depth = match self.depth {
            Some(Depth {
                to: DepthTo::Tokens(tokens),
                every,
            }) => f64::from(tokens) / f64::from(every.max(1)),
            _ => 0.0,
        };
        (self.sessions_per_hour() * (per_session as f64 + depth)).round() as u64
    }

    /// Of those, what a healthy prefix cache serves: each later turn's history.
    pub fn cached_tokens_per_hour(&self) -> u64 {
        let step = TURN_TOKENS + u64::from(self.max_tokens);
        let per_session: u64 = (1..self.turns())
            .map(|k| BASE_TOKENS + TURN_TOKENS + (k - 1) * step)
            .sum();
        (self.sessions_per_hour() * per_session as f64).round() as u64
    }

    pub fn output_tokens_per_hour(&self) -> u64 {
        let turns = self.turns() as f64 + self.depth.map_or(0.0, |d| 1.0 / f64::from(d.every));
        (self.sessions_per_hour() * turns * f64::from(self.max_tokens)).round() as u64
    }

    /// One line for `inferprobe check`.
    pub fn describe(&self) -> String {
        let long = match self.long_gap {
            Some(gap) => format!(", a last turn after {}", humantime::format_duration(gap)),
            None => String::new(),
        };
        let depth = match self.depth {
            Some(Depth {
                to: DepthTo::Tokens(tokens),
                every,
            }) => format!(", a depth turn of {tokens} tokens every {every} sessions"),
            Some(Depth {
                to: DepthTo::Served { margin },
                every,
            }) => format!(
                ", a depth turn to the served window less {}% every {every} sessions (its tokens not counted here)",
                margin * 100.0
            ),
            None => String::new(),
        };
        format!(
            "session check every {}: {} turns{long}{depth}; about {} prompt tokens an hour ({} of them cached on a healthy cache), {} output tokens at most",
            humantime::format_duration(self.interval),
            self.turns(),
            self.prompt_tokens_per_hour(),
            self.cached_tokens_per_hour(),
            self.output_tokens_per_hour(),
        )
    }

    /// What `inferprobe check` warns about: a cache judged without its block size.
    pub fn warnings(&self) -> Vec<String> {
        match self.block_tokens {
            None => vec![
                "session: block_tokens is unset, so the cache's block is inferred from the cached-token counts the server reports (their greatest common divisor: a whole-block cache such as vLLM's, 16 tokens on GPU, 128 on CPU, 512 or more for hybrid models, reports multiples of its block); until a few counts came, it is a multiple of the block and fewer turns are judged: set block_tokens to the server's".to_owned(),
            ],
            Some(_) => Vec::new(),
        }
    }

    /// The least time a session takes: every gap at its shortest.
    pub fn least_duration(&self) -> Duration {
        self.human_gap * 2 + self.tool_gap.0 * 2 + self.long_gap.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SessionSpec {
        SessionSpec {
            interval: Duration::from_secs(600),
            tool_gap: (Duration::ZERO, Duration::from_secs(2)),
            human_gap: Duration::from_secs(30),
            long_gap: None,
            parallel: true,
            force_calls: false,
            max_tokens: 64,
            depth: None,
            affinity_headers: Vec::new(),
            served_by: Vec::new(),
            hit_share: 0.5,
            block_tokens: None,
            min_cacheable: 0,
        }
    }

    #[test]
    fn the_defaults_cost_what_the_docs_say() {
        let spec = spec();
        assert_eq!(spec.turns(), 5);
        // 6 sessions × (5 × 200 + 104 × (0+1+2+3+4)) = 6 × 2,040.
        assert_eq!(spec.prompt_tokens_per_hour(), 12_240);
        // 6 × (200 + 304 + 408 + 512) = 8,544.
        assert_eq!(spec.cached_tokens_per_hour(), 8_544);
        assert_eq!(spec.output_tokens_per_hour(), 1_920);
        let deep = SessionSpec {
            depth: Some(Depth {
                to: DepthTo::Tokens(16_000),
                every: 6,
            }),
            long_gap: Some(Duration::from_secs(300)),
            ..spec
        };
        assert_eq!(deep.turns(), 6);
        assert!(
            deep.describe()
                .contains("a depth turn of 16000 tokens every 6 sessions")
        );
        assert!(deep.prompt_tokens_per_hour() > 16_000);
        // One lookup at a time is as many turns: the second lookup and its result.
        let single = SessionSpec {
            parallel: false,
            ..self::tests::spec()
        };
        assert_eq!(single.turns(), 5);
        assert_eq!(single.least_duration(), Duration::from_secs(60));
    }
}
