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

/// Output tokens of a round's twin (the same request again, without logprobs): enough
/// that two draws agreeing is rare on a high-entropy prompt, few enough to cost a quarter
/// of a round.
pub const TWIN_TOKENS: u32 = 16;

impl SamplingSpec {
    fn rounds_per_hour(&self) -> f64 {
        3600.0 / self.interval.as_secs_f64()
    }

    /// Requests a round sends and the output tokens they ask for, at most: one with
    /// logprobs and its twin, or `samples` without; a seeded pair every `seed_every`.
    fn per_round(&self) -> (f64, f64) {
        let max = f64::from(self.max_tokens);
        let logprobs: (f64, f64) = (2.0, max + f64::from(self.twin_tokens()));
        let answers = (f64::from(self.samples), f64::from(self.samples) * max);
        let (requests, output) = match self.server {
            // Not known until the server answers: the dearer.
            Server::Auto => (logprobs.0.max(answers.0), logprobs.1.max(answers.1)),
            s if s.semantics().is_some() => logprobs,
            _ => answers,
        };
        match self.seed_every {
            0 => (requests, output),
            n => (
                requests + 2.0 / f64::from(n),
                output + 2.0 * max / f64::from(n),
            ),
        }
    }

    /// The twin's output tokens.
    pub fn twin_tokens(&self) -> u32 {
        TWIN_TOKENS.min(self.max_tokens)
    }

    /// Prompt and output tokens an hour, at most.
    pub fn tokens_per_hour(&self) -> (u64, u64) {
        let (requests, output) = self.per_round();
        let rounds = self.rounds_per_hour();
        (
            (rounds * requests * PROMPT_TOKENS as f64).round() as u64,
            (rounds * output).round() as u64,
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
            s => format!(
                "{}'s logprobs, {} listed per token, and a {}-token twin without (longer past a preamble listed alone; a third, seeded, when the two repeat)",
                s.as_str(),
                self.top_logprobs,
                self.twin_tokens()
            ),
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
