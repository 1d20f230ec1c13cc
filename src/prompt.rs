//! Synthetic prompts: a unique nonce first, then filler words up to the target length.
//!
//! The nonce leads so no two probes share a prefix: a prefix cache would otherwise serve
//! every probe's prefill from cache and flatter TTFT compared with what real users see.
//!
//! Length is approximate without a tokenizer: the filler words are common short English
//! words, each a single token (with its leading space) in the Llama, Mistral, Qwen and
//! GPT BPE vocabularies, so one word ≈ one token; the 16-hex-digit nonce is counted as
//! [`NONCE_TOKENS`] tokens. Chat templates add their own few tokens on top.

use rand::{Rng, RngExt};

/// Tokens the nonce is assumed to take (a 16-digit hex string is 6–16 tokens depending on
/// the vocabulary).
pub const NONCE_TOKENS: u32 = 8;

const FILLER: &[&str] = &[
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "then", "runs",
    "back", "to", "its", "home", "in", "the", "old", "town", "where", "people", "make", "bread",
    "every", "day", "for", "their", "friends", "who", "work", "on", "farms", "near", "river",
];

/// A prompt of about `input_tokens` tokens that starts with a fresh nonce.
pub fn synthetic(input_tokens: u32, rng: &mut impl Rng) -> String {
    let words = input_tokens.saturating_sub(NONCE_TOKENS) as usize;
    let nonce: u64 = rng.random();
    let mut prompt = String::with_capacity(20 + words * 6);
    prompt.push_str(&format!("{nonce:016x}"));
    for word in FILLER.iter().cycle().take(words) {
        prompt.push(' ');
        prompt.push_str(word);
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn prompts_start_with_distinct_nonces_and_have_the_requested_words() {
        let mut rng = StdRng::seed_from_u64(7);
        let a = synthetic(128, &mut rng);
        let b = synthetic(128, &mut rng);
        assert_ne!(a[..16], b[..16], "each prompt has its own prefix");
        assert_eq!(
            a.split_whitespace().count(),
            1 + 128 - NONCE_TOKENS as usize
        );
        assert_eq!(synthetic(3, &mut rng).split_whitespace().count(), 1);
    }
}
