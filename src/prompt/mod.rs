//! What each probe asks for: the prompt text, `max_tokens`, and the model (or LoRA adapter).
//!
//! A target's [`PromptSource`] is built once at configuration time (datasets and the
//! tokenizer are loaded then, so a bad file fails `inferprobe check`) and draws one
//! [`Prompt`] per probe from the target's seeded RNG.

pub mod conversation;
pub mod dataset;
pub mod sampled;
pub mod synthetic;
pub mod tokenizer;

use std::sync::Arc;

use rand::{Rng, RngExt};

pub use dataset::{Dataset, DatasetFormat, Entry};
pub use tokenizer::TokenCounter;

use crate::media::{MediaPart, MediaSource};
use crate::structure::Structure;

/// One probe's request content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    pub text: String,
    /// The prompt's length in tokens as the client counts it: exact when a tokenizer
    /// built or measured it (`input_exact`), else the documented approximation (one filler
    /// word per token and 8 for the nonce; a dataset's text at 4 tokens per 3 words).
    pub input_tokens: u32,
    pub input_exact: bool,
    /// `max_tokens` for this request.
    pub max_tokens: u32,
    /// The model name to send (a LoRA adapter when several are configured).
    pub model: String,
    /// Images and videos to send with the text; an error when they could not be made (a
    /// media file gone since the configuration was checked): the probe then fails.
    pub media: Result<Vec<MediaPart>, String>,
    /// A correctness canary's request: greedy and reproducible, with logprobs.
    pub greedy: Option<Greedy>,
    /// A sampler check's request: its sampling settings, sent over the target's.
    pub sampled: Option<sampled::Sampled>,
    /// A JSON answer or tools asked for (a canary's structured check, or a latency
    /// target's agent workload).
    pub structure: Option<Arc<Structure>>,
    /// Where the text's shared part ends (a byte offset): an API that caches only at
    /// explicit breakpoints (Anthropic's `cache_control`) is asked to cache up to it. The
    /// prefix-cache check's pairs set it.
    pub cache_breakpoint: Option<usize>,
    /// A session's turn: the whole history, sent instead of `text` by the chat dialects
    /// (`text` then holds the last user message, for the log).
    pub conversation: Option<Arc<conversation::Conversation>>,
    /// Fields set in the JSON body last, over everything else: the adapter check's
    /// llama.cpp `lora` list (an adapter chosen per request, not by `model`).
    pub extra: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
}

/// How a canary asks: greedy decoding (temperature 0), a fixed seed, and this many
/// alternatives per token's logprob (0: no logprobs). Never the workload's ignore-EOS or
/// minimum length: a canary reads the model's own answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Greedy {
    pub top_logprobs: u32,
    pub seed: u64,
    /// Temperature 0 and the seed are sent, over any the target sets: a text prompt's
    /// answer is compared token by token. `false` for a structured prompt, judged by its
    /// schema alone: it sends what the target's `sampling` and `extra_body` say and
    /// nothing more, since OpenAI's reasoning models refuse `temperature: 0` and Claude's
    /// extended thinking requires temperature 1.
    pub pinned: bool,
}

impl Prompt {
    /// The text split at its cache breakpoint (the shared prefix, then the rest), for the
    /// APIs that cache only up to a marked block (Anthropic's `cache_control`, Bedrock's
    /// `cachePoint`); `None` without one.
    pub fn at_breakpoint(&self) -> Option<(&str, &str)> {
        let at = self.cache_breakpoint?;
        Some((self.text.get(..at)?, self.text.get(at..)?))
    }

    /// The media parts to send (none when they could not be made).
    pub fn media(&self) -> &[MediaPart] {
        self.media.as_deref().unwrap_or(&[])
    }
}

/// The random choices behind one prompt, drawn from the target's seeded RNG where the
/// arrivals are drawn. Cheap; the text is built from it by [`PromptSource::build`], which
/// is where a tokenizer works, so that work can run off the threads that time streams.
#[derive(Clone, Debug)]
pub struct Draw {
    pub model: String,
    pub max_tokens: u32,
    input: Drawn,
    nonce: u64,
    /// Per media source, the first of its parts this probe gets (files go in order).
    media: Vec<u64>,
}

#[derive(Clone, Debug)]
enum Drawn {
    /// A synthetic prompt of this many tokens.
    Length(u32),
    /// An entry of a dataset.
    Entry(Arc<Dataset>, usize),
}

#[derive(Debug)]
pub enum Input {
    /// `input_tokens` ± `range_ratio`, after an optional shared prefix.
    Synthetic {
        input_tokens: u32,
        shared_prefix: String,
        exact: Option<synthetic::ExactFiller>,
    },
    Dataset {
        dataset: Arc<Dataset>,
        /// Use the dataset's output lengths where it has them.
        output_from_dataset: bool,
    },
}

#[derive(Debug)]
pub struct PromptSource {
    pub input: Input,
    pub output_tokens: u32,
    /// vLLM's random-dataset ratio: lengths uniform in [L·(1−r), L·(1+r)].
    pub range_ratio: f64,
    /// Drawn uniformly per probe.
    pub models: Vec<String>,
    pub tokenizer: Option<Arc<TokenCounter>>,
    /// Images, then videos, for every request.
    pub media: Vec<Arc<MediaSource>>,
    /// `response_format` / `tools` sent with every request (an agent's workload).
    pub structure: Option<Arc<Structure>>,
}

/// Uniform in `[floor(len·(1−r)), ceil(len·(1+r))]`, at least `min`.
fn sample_len(len: u32, ratio: f64, min: u32, rng: &mut impl Rng) -> u32 {
    if ratio <= 0.0 {
        return len.max(min);
    }
    let low = ((f64::from(len) * (1.0 - ratio)).floor() as u32).max(min);
    let high = ((f64::from(len) * (1.0 + ratio)).ceil() as u32).max(low);
    rng.random_range(low..=high)
}

impl PromptSource {
    /// Draw and build one prompt.
    pub fn next(&self, rng: &mut impl Rng) -> Prompt {
        self.build(self.draw(rng))
    }

    /// Whether a tokenizer counts tokens (seconds of CPU for long prompts or answers).
    pub fn tokenizes(&self) -> bool {
        self.tokenizer.is_some()
    }

    /// Whether [`Self::build`] is heavy: a tokenizer, or images to generate and encode.
    /// Heavy builds run on the blocking pool.
    pub fn is_heavy(&self) -> bool {
        self.tokenizes() || !self.media.is_empty()
    }

    /// The random parts of one prompt.
    pub fn draw(&self, rng: &mut impl Rng) -> Draw {
        let model = match self.models.len() {
            0 | 1 => self.models.first().cloned().unwrap_or_default(),
            n => self.models[rng.random_range(0..n)].clone(),
        };
        let mut max_tokens = sample_len(self.output_tokens, self.range_ratio, 1, rng);
        let input = match &self.input {
            Input::Synthetic { input_tokens, .. } => {
                Drawn::Length(sample_len(*input_tokens, self.range_ratio, 1, rng))
            }
            Input::Dataset {
                dataset,
                output_from_dataset,
            } => {
                let index = rng.random_range(0..dataset.entries.len());
                if *output_from_dataset {
                    max_tokens = dataset.entries[index].output_tokens.unwrap_or(max_tokens);
                }
                Drawn::Entry(Arc::clone(dataset), index)
            }
        };
        Draw {
            model,
            max_tokens,
            input,
            nonce: rng.random(),
            media: self.media.iter().map(|m| m.draw()).collect(),
        }
    }

    /// The prompt text of `draw`: no randomness left, only string building and, with a
    /// tokenizer, encoding.
    pub fn build(&self, draw: Draw) -> Prompt {
        let (text, input_tokens, input_exact) = match draw.input {
            Drawn::Length(len) => {
                let (prefix, filler) = match &self.input {
                    Input::Synthetic {
                        shared_prefix,
                        exact,
                        ..
                    } => (shared_prefix.as_str(), exact.as_ref()),
                    Input::Dataset { .. } => ("", None),
                };
                let built = match (filler, &self.tokenizer) {
                    (Some(filler), Some(counter)) => {
                        filler.prompt(counter, prefix, len, draw.nonce).ok()
                    }
                    _ => None,
                };
                match built {
                    Some((text, count)) => (text, count, true),
                    // Tokenizers do not fail on UTF-8 text; keep probing if one does.
                    None => (approximate(prefix, len, draw.nonce), len, false),
                }
            }
            Drawn::Entry(dataset, index) => {
                // Every prompt leads with a nonce so prefix caches cannot serve a repeat.
                let entry = &dataset.entries[index];
                let text = format!("{} {}", synthetic::nonce(draw.nonce), entry.prompt);
                match self.tokenizer.as_ref().and_then(|t| t.count(&text)) {
                    Some(count) => (text, count as u32, true),
                    None => {
                        let body = dataset::estimate_tokens(&entry.prompt, None) as u32;
                        (text, synthetic::NONCE_TOKENS + body, false)
                    }
                }
            }
        };
        let mut media = Ok(Vec::new());
        for (source, first) in self.media.iter().zip(&draw.media) {
            if let Ok(parts) = &mut media {
                match source.build(*first, draw.nonce) {
                    Ok(built) => parts.extend(built),
                    Err(e) => media = Err(e),
                }
            }
        }
        Prompt {
            text,
            input_tokens,
            input_exact,
            max_tokens: draw.max_tokens,
            model: draw.model,
            media,
            greedy: None,
            sampled: None,
            structure: self.structure.clone(),
            cache_breakpoint: None,
            conversation: None,
            extra: None,
        }
    }
}

/// `prefix` (may be empty) and a synthetic prompt of about `len` tokens in all.
fn approximate(prefix: &str, len: u32, nonce: u64) -> String {
    if prefix.is_empty() {
        return synthetic::approximate(len, nonce);
    }
    let prefix_words = prefix.split_whitespace().count() as u32;
    format!(
        "{prefix} {}",
        synthetic::approximate(len.saturating_sub(prefix_words), nonce)
    )
}

#[cfg(test)]
mod tests;
