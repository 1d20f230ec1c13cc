//! A target's validated sampling check (docs/sampling.md): how often a round is asked, the
//! sampling settings it rotates through, how the server's logprobs are read, and the
//! calibration window.

use std::time::Duration;

pub use crate::prompt::sampled::{Params, Semantics, Server};

#[derive(Clone, Debug, PartialEq)]
pub struct SamplingSpec {
    /// One round per interval.
    pub interval: Duration,
    /// Round `r` asks `settings[r % len]`: each truncation is exercised in turn, so each
    /// one a sampler ignores is seen.
    pub settings: Vec<Params>,
    /// Output tokens a round asks for.
    pub max_tokens: u32,
    /// Alternatives listed per token (20: OpenAI's and vLLM's default maximum).
    pub top_logprobs: u32,
    /// How the server's sampling is asked and its logprobs read; `Auto` from its
    /// `/v1/models` (`owned_by`).
    pub server: Server,
    /// PITs per calibration window, and the χ² test's false-alarm rate per window.
    pub window: u32,
    pub alpha: f64,
    /// Without logprobs: answers per round at temperature 1, all identical meaning the
    /// sampling settings were ignored.
    pub samples: u32,
    /// Every this many rounds (0: never), a seeded pair too: the same request twice with one
    /// seed, its answers compared. Reported, never paged on.
    pub seed_every: u32,
}

/// A prompt's overhead in tokens beyond its nonce (the instruction).
const PROMPT_TOKENS: u64 = 40;

impl SamplingSpec {
    fn rounds_per_hour(&self) -> f64 {
        3600.0 / self.interval.as_secs_f64()
    }

    /// Requests a round sends: one with logprobs, or `samples` without.
    fn requests_per_round(&self) -> f64 {
        let round = match self.server.semantics() {
            Some(_) => 1.0,
            None => f64::from(self.samples),
        };
        match self.seed_every {
            0 => round,
            n => round + 2.0 / f64::from(n),
        }
    }

    /// Prompt and output tokens an hour, at most (`Auto` priced as the round without
    /// logprobs, the dearer: it is not known which the server gets until it answers).
    pub fn tokens_per_hour(&self) -> (u64, u64) {
        let requests = self.rounds_per_hour() * self.requests_per_round();
        (
            (requests * PROMPT_TOKENS as f64).round() as u64,
            (requests * f64::from(self.max_tokens)).round() as u64,
        )
    }

    /// One line for `inferprobe check`.
    pub fn describe(&self) -> String {
        let how = match self.server {
            Server::Auto => "the server's logprobs read as /v1/models's owned_by says (vllm, llamacpp; otherwise answers compared without logprobs)".to_owned(),
            Server::Unknown => format!(
                "{} answers a round at temperature 1 compared (no logprobs: the diversity test only)",
                self.samples
            ),
            s => format!("{}'s logprobs, {} listed per token", s.as_str(), self.top_logprobs),
        };
        format!(
            "sampler check every {}, {} output tokens a round, {} settings in turn; {how}; calibration over {} tokens (false alarm {} a window, two in a row to warn)",
            humantime::format_duration(self.interval),
            self.max_tokens,
            self.settings.len(),
            self.window,
            self.alpha
        )
    }
}
