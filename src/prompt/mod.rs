//! What each probe asks for: the prompt text, `max_tokens`, and the model (or LoRA adapter).
//!
//! A target's [`PromptSource`] is built once at configuration time (datasets and the
//! tokenizer are loaded then, so a bad file fails `inferprobe check`) and draws one
//! [`Prompt`] per probe from the target's seeded RNG.

pub mod dataset;
pub mod synthetic;
pub mod tokenizer;

use std::sync::Arc;

use rand::{Rng, RngExt};

pub use dataset::{Dataset, DatasetFormat, Entry};
pub use tokenizer::TokenCounter;

/// One probe's request content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    pub text: String,
    /// Exact prompt tokens when a tokenizer built or measured the prompt.
    pub tokens: Option<u32>,
    /// `max_tokens` for this request.
    pub max_tokens: u32,
    /// The model name to send (a LoRA adapter when several are configured).
    pub model: String,
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
    pub fn next(&self, rng: &mut impl Rng) -> Prompt {
        let model = match self.models.len() {
            0 | 1 => self.models.first().cloned().unwrap_or_default(),
            n => self.models[rng.random_range(0..n)].clone(),
        };
        let mut max_tokens = sample_len(self.output_tokens, self.range_ratio, 1, rng);
        let (text, tokens) = match &self.input {
            Input::Synthetic {
                input_tokens,
                shared_prefix,
                exact,
            } => {
                let len = sample_len(*input_tokens, self.range_ratio, 1, rng);
                match (exact, &self.tokenizer) {
                    (Some(filler), Some(counter)) => {
                        match filler.prompt(counter, shared_prefix, len, rng) {
                            Ok((text, count)) => (text, Some(count)),
                            // Tokenizers do not fail on UTF-8 text; keep probing if one does.
                            Err(_) => (self.approximate(shared_prefix, len, rng), None),
                        }
                    }
                    _ => (self.approximate(shared_prefix, len, rng), None),
                }
            }
            Input::Dataset {
                dataset,
                output_from_dataset,
            } => {
                let entry = &dataset.entries[rng.random_range(0..dataset.entries.len())];
                if *output_from_dataset {
                    max_tokens = entry.output_tokens.unwrap_or(max_tokens);
                }
                // Every prompt leads with a nonce so prefix caches cannot serve a repeat.
                let text = format!("{:016x} {}", rng.random::<u64>(), entry.prompt);
                let tokens = self
                    .tokenizer
                    .as_ref()
                    .and_then(|t| t.count(&text))
                    .map(|n| n as u32);
                (text, tokens)
            }
        };
        Prompt {
            text,
            tokens,
            max_tokens,
            model,
        }
    }

    fn approximate(&self, prefix: &str, len: u32, rng: &mut impl Rng) -> String {
        if prefix.is_empty() {
            return synthetic::approximate(len, rng);
        }
        let prefix_words = prefix.split_whitespace().count() as u32;
        format!(
            "{prefix} {}",
            synthetic::approximate(len.saturating_sub(prefix_words), rng)
        )
    }
}

#[cfg(test)]
mod tests;
