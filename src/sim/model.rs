//! The simulator's toy language model: what a greedy request is answered with, so the
//! correctness canary can be tested without a GPU.
//!
//! Greedy tokens and their top-k logprobs are a pure function of (weights seed, prompt,
//! prefix): two simulators with the same `--weights-seed` answer every prompt identically,
//! token for token and logprob for logprob, like two healthy replicas of one model. Like a
//! trained model it is usually sure (85% of positions: top-1 leads top-2 by 1.5–6 nats),
//! sometimes less (10%: 0.05–1 nats) and now and then at a near-tie (5%: below 0.05). The faults a canary must
//! tell apart:
//!
//! - **benign noise** (`--near-tie-flips P`): at a near-tie, with probability P, the two
//!   leaders swap (as batch-size-dependent GPU kernels do), and every logprob moves by up to
//!   1e-4; nothing else changes, though everything after a flip follows the new prefix;
//! - **corruption** (`--corrupt-rate P`): at a sure position, with probability P, the token
//!   is replaced by another, reported as confidently as the right one would have been;
//! - **other weights** (`--weights-seed`): another model;
//! - **garbled text** (`--garble`): random characters from other scripts, reported sure.
//!
//! Known-answer prompts: "What is A + B?" is answered " A+B" (the sum) first, unless garbled.

use rand::{Rng, RngExt};

/// The toy model's flags.
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct ModelFlags {
    /// Seed of the toy model's weights: simulators with the same seed answer alike.
    #[arg(long, default_value_t = 0)]
    pub weights_seed: u64,
    /// Probability that a near-tie (top-1 ahead by < 0.05 nats) flips: benign noise.
    #[arg(long, default_value_t = 0.0)]
    pub near_tie_flips: f64,
    /// Probability that a sure token is replaced by a wrong one, reported as sure.
    #[arg(long, default_value_t = 0.0)]
    pub corrupt_rate: f64,
    /// Answer with random characters of other scripts.
    #[arg(long)]
    pub garble: bool,
    /// What the sampler gets wrong, for sampled requests asking for random words
    /// (`super::sampler`).
    #[arg(long, value_enum, default_value_t)]
    pub sampler_fault: SamplerFault,
    /// With `--sampler-fault outside-nucleus`: the share of tokens drawn from outside the
    /// allowed set.
    #[arg(long, default_value_t = 0.05)]
    pub outside_rate: f64,
    /// What a sampled request's logprobs are: `raw` (vLLM's default) or `processed`
    /// (llama.cpp's `post_sampling_probs`).
    #[arg(long, value_enum, default_value_t)]
    pub logprobs_mode: LogprobsMode,
}

/// As the command line's defaults (`sim::config`'s tests hold them equal).
impl Default for ModelFlags {
    fn default() -> Self {
        Self {
            weights_seed: 0,
            near_tie_flips: 0.0,
            corrupt_rate: 0.0,
            garble: false,
            sampler_fault: SamplerFault::None,
            outside_rate: 0.05,
            logprobs_mode: LogprobsMode::Raw,
        }
    }
}

const VOCAB: &[&str] = &[
    " the", " a", " river", " stone", " light", " cloud", " field", " north", " quiet", " green",
    " paper", " model", " server", " token", " stream", " probe", " metric", " latency", " blue",
    " moon", " iron", " salt", " bread", " winter", " garden", " bridge", " window", " tower",
    " copper", " signal", " harbor", " forest", ".", ",", " and", " of", " in", " to", " is",
    " was", " on", " with", " under", " over", " near", " far", " old", " new",
];

/// What the sampler gets wrong.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SamplerFault {
    #[default]
    None,
    TopKIgnored,
    TopPIgnored,
    MinPIgnored,
    /// The temperature applied is twice the one asked.
    Temperature,
    /// Every token the likeliest, whatever the temperature.
    Greedy,
    /// Every draw the same uniform number (inverse CDF).
    StuckRng,
    /// One exponential noise vector for every draw (vLLM's race, argmax p / q): each
    /// token looks well drawn, and every answer to a prompt is the same.
    StuckRace,
    /// `--outside-rate` of the tokens drawn from outside the allowed set.
    OutsideNucleus,
    /// Each sampled token listed with a logprob above 0 (broken numerics).
    InvalidLogprobs,
}

/// What the listed logprobs are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogprobsMode {
    #[default]
    Raw,
    Processed,
}

/// A near-tie: the leaders this close may swap between batch sizes.
pub const NEAR_TIE: f64 = 0.05;

/// One generated token with its logprob and the top-k alternatives (including itself).
#[derive(Clone, Debug, PartialEq)]
pub struct ToyToken {
    pub text: String,
    pub logprob: f64,
    pub top: Vec<(String, f64)>,
}

/// splitmix64: a stable, platform-independent mix for the model's pure functions.
pub(super) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub(super) fn hash(seed: u64, bytes: &[u8]) -> u64 {
    bytes.chunks(8).fold(mix(seed), |h, c| {
        let mut word = [0u8; 8];
        word[..c.len()].copy_from_slice(c);
        mix(h ^ u64::from_le_bytes(word))
    })
}

/// A deterministic stream of uniform numbers from one position's hash.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = mix(self.0);
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn between(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }
}

/// The model's logits at one position: `(token index, logit)`, best first.
fn logits(seed: u64, prompt: u64, prefix: u64) -> Vec<(usize, f64)> {
    let mut d = Draws(mix(seed ^ mix(prompt ^ mix(prefix))));
    let n = VOCAB.len();
    let mut order: Vec<usize> = (0..n).collect();
    // A seeded shuffle: which tokens lead here.
    for i in (1..n).rev() {
        order.swap(i, (d.next() % (i as u64 + 1)) as usize);
    }
    let kind = d.unit();
    let margin = match kind {
        k if k < 0.05 => d.between(0.0005, NEAR_TIE),
        k if k < 0.15 => d.between(NEAR_TIE, 1.0),
        _ => d.between(1.5, 6.0),
    };
    let mut logit = -margin;
    let mut out = vec![(order[0], 0.0), (order[1], logit)];
    for &token in &order[2..] {
        logit -= d.between(0.05, 1.5);
        out.push((token, logit));
    }
    out
}

fn log_sum_exp(logits: &[(usize, f64)]) -> f64 {
    let max = logits.iter().map(|&(_, l)| l).fold(f64::MIN, f64::max);
    max + logits
        .iter()
        .map(|&(_, l)| (l - max).exp())
        .sum::<f64>()
        .ln()
}

/// "What is 17 + 25?" → 42.
fn known_answer(prompt: &str) -> Option<u64> {
    let rest = &prompt[prompt.find("What is ")? + "What is ".len()..];
    let (a, rest) = rest.split_once('+')?;
    let b: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    a.trim().parse::<u64>().ok()?.checked_add(b.parse().ok()?)
}

const SCRIPTS: &[(u32, u32)] = &[
    (0x0400, 0x04FF),
    (0x0E01, 0x0E3A),
    (0x4E00, 0x4FFF),
    (0x0621, 0x064A),
];

impl ModelFlags {
    /// The greedy answer to `prompt`: `n` tokens with `top_k` alternatives each.
    pub fn generate(
        &self,
        prompt: &str,
        n: usize,
        top_k: usize,
        rng: &mut impl Rng,
    ) -> Vec<ToyToken> {
        let prompt_hash = hash(0, prompt.as_bytes());
        let mut prefix = mix(prompt_hash);
        let mut forced = match known_answer(prompt) {
            Some(sum) if !self.garble => Some(format!(" {sum}")),
            _ => None,
        };
        let noisy = self.near_tie_flips > 0.0;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let mut l = logits(self.weights_seed, prompt_hash, prefix);
            let margin = l[0].1 - l[1].1;
            if noisy && margin < NEAR_TIE && rng.random::<f64>() < self.near_tie_flips {
                (l[0].0, l[1].0) = (l[1].0, l[0].0);
            }
            let lse = log_sum_exp(&l);
            let mut ranked: Vec<(String, f64)> = l
                .iter()
                .map(|&(t, logit)| {
                    let noise = if noisy {
                        (rng.random::<f64>() * 2.0 - 1.0) * 1e-4
                    } else {
                        0.0
                    };
                    (VOCAB[t].to_owned(), logit - lse + noise)
                })
                .collect();
            // The noise must not make the greedy token look second.
            ranked[1].1 = ranked[1].1.min(ranked[0].1);
            let replacement = if let Some(answer) = forced.take() {
                Some(answer)
            } else if self.garble {
                Some(garbled(rng))
            } else if margin >= 1.5 && rng.random::<f64>() < self.corrupt_rate {
                let other = 1 + rng.random_range(0..VOCAB.len() - 1);
                Some(ranked[other].0.clone())
            } else {
                None
            };
            if let Some(text) = replacement {
                // Reported as sure as the right token was: it takes the top logprob.
                ranked.retain(|(t, _)| *t != text);
                ranked[0].0 = text;
            }
            ranked.truncate(top_k.max(1));
            let (text, logprob) = ranked[0].clone();
            prefix = hash(prefix, text.as_bytes());
            ranked.truncate(top_k);
            out.push(ToyToken {
                text,
                logprob,
                top: ranked,
            });
        }
        out
    }
}

/// Two characters of a random other script (Cyrillic, Thai, CJK, Arabic).
fn garbled(rng: &mut impl Rng) -> String {
    (0..2)
        .map(|_| {
            let (low, high) = SCRIPTS[rng.random_range(0..SCRIPTS.len())];
            char::from_u32(rng.random_range(low..=high)).unwrap_or('?')
        })
        .collect()
}

#[cfg(test)]
mod tests;
