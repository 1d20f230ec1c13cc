//! Synthetic prompts: a unique nonce first, then filler words up to the target length.
//!
//! The nonce leads so no two probes share a prefix: a prefix cache would otherwise serve
//! every probe's prefill from cache and flatter TTFT compared with what real users see.
//! (A configured shared prefix goes before the nonce on purpose, to measure cache hits.)
//!
//! Without a tokenizer, length is approximate: the filler words are common short English
//! words, each a single token (with its leading space) in the Llama, Mistral, Qwen and GPT
//! BPE vocabularies, so one word ≈ one token; the 16-hex-digit nonce counts as
//! [`NONCE_TOKENS`]. With a tokenizer the filler is cut at the exact token count.

use super::tokenizer::TokenCounter;

/// Tokens the nonce is assumed to take without a tokenizer (a 16-digit hex string is 6–16
/// tokens depending on the vocabulary).
pub const NONCE_TOKENS: u32 = 8;

const FILLER: &[&str] = &[
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "then", "runs",
    "back", "to", "its", "home", "in", "the", "old", "town", "where", "people", "make", "bread",
    "every", "day", "for", "their", "friends", "who", "work", "on", "farms", "near", "river",
];

/// Different words for shared prefixes, so a prefix never looks like the filler after it.
const PREFIX_WORDS: &[&str] = &[
    "you",
    "are",
    "a",
    "helpful",
    "assistant",
    "answer",
    "each",
    "question",
    "with",
    "care",
    "and",
    "keep",
    "your",
    "reply",
    "short",
    "clear",
    "polite",
    "true",
];

fn words(list: &[&str], count: usize) -> String {
    let mut text = String::with_capacity(count * 6);
    for word in list.iter().cycle().take(count) {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(word);
    }
    text
}

/// The nonce as it appears in a prompt: 16 hex digits.
pub fn nonce(value: u64) -> String {
    format!("{value:016x}")
}

/// A prompt of about `input_tokens` words-as-tokens that starts with the nonce.
pub fn approximate(input_tokens: u32, nonce_value: u64) -> String {
    let filler = input_tokens.saturating_sub(NONCE_TOKENS) as usize;
    let nonce = nonce(nonce_value);
    match filler {
        0 => nonce,
        n => format!("{nonce} {}", words(FILLER, n)),
    }
}

/// A shared prefix of about (or, with a tokenizer, exactly) `tokens` tokens.
pub fn shared_prefix(tokens: u32, counter: Option<&TokenCounter>) -> Result<String, String> {
    in_tokens(tokens, counter, |n| words(PREFIX_WORDS, n))
}

/// A prefix-cache pair's prefix: about (or, with a tokenizer, exactly) `tokens` tokens of
/// words drawn at random from a seed (the pair's nonce), so no two pairs share a run of
/// text, and a cache that reuses text found anywhere in a prompt (LMCache's blending)
/// cannot serve a pair's cold request from an earlier pair's: each pair's prefix is new as
/// a whole, not only after its nonce.
pub fn pair_prefix(
    tokens: u32,
    seed: u64,
    counter: Option<&TokenCounter>,
) -> Result<String, String> {
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};
    in_tokens(tokens, counter, |count| {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut text = String::with_capacity(count * 6);
        for _ in 0..count {
            if !text.is_empty() {
                text.push(' ');
            }
            let i = rng.random_range(0..PREFIX_WORDS.len() + FILLER.len());
            text.push_str(
                PREFIX_WORDS
                    .get(i)
                    .unwrap_or_else(|| &FILLER[i - PREFIX_WORDS.len()]),
            );
        }
        text
    })
}

/// `tokens` words of `text(n)` (n words), or with a tokenizer exactly `tokens` tokens: twice
/// as many words encoded and cut, since a word is one token or more.
fn in_tokens(
    tokens: u32,
    counter: Option<&TokenCounter>,
    text: impl Fn(usize) -> String,
) -> Result<String, String> {
    match counter {
        None => Ok(text(tokens as usize)),
        Some(counter) => {
            let ids = counter.encode(&text(tokens as usize * 2))?;
            counter.decode(&ids[..ids.len().min(tokens as usize)])
        }
    }
}

/// Builds prompts of an exact token count with a tokenizer: the filler is pre-encoded
/// once, and each prompt takes as many filler tokens as the nonce leaves room for.
#[derive(Debug)]
pub struct ExactFiller {
    ids: Vec<u32>,
}

impl ExactFiller {
    /// Enough filler for prompts of up to `max_tokens` tokens.
    pub fn new(counter: &TokenCounter, max_tokens: u32) -> Result<Self, String> {
        let mut count = max_tokens as usize + 16;
        loop {
            let ids = counter.encode(&words(FILLER, count))?;
            if ids.len() > max_tokens as usize {
                return Ok(Self { ids });
            }
            count *= 2;
        }
    }

    /// `prefix` (may be empty) + nonce + filler, adjusted until it encodes to exactly
    /// `tokens` tokens (or as close as the tokenizer's merges allow, within a few rounds);
    /// returns the text and its real token count.
    pub fn prompt(
        &self,
        counter: &TokenCounter,
        prefix: &str,
        tokens: u32,
        nonce_value: u64,
    ) -> Result<(String, u32), String> {
        let head = if prefix.is_empty() {
            nonce(nonce_value)
        } else {
            format!("{prefix} {}", nonce(nonce_value))
        };
        let head_tokens = counter.encode(&head)?.len();
        let mut take = (tokens as usize).saturating_sub(head_tokens);
        let mut best = (head.clone(), head_tokens as u32);
        // Merges at the junction can shift the count by a token or two; a few rounds of
        // correction converge in practice.
        for _ in 0..8 {
            let text = match take {
                0 => head.clone(),
                n => format!(
                    "{head} {}",
                    counter.decode(&self.ids[..n.min(self.ids.len())])?
                ),
            };
            let count = counter.encode(&text)?.len();
            best = (text, count as u32);
            match count.cmp(&(tokens as usize)) {
                std::cmp::Ordering::Equal => break,
                std::cmp::Ordering::Less if take < self.ids.len() => {
                    take += tokens as usize - count
                }
                std::cmp::Ordering::Greater if take > 0 => {
                    take = take.saturating_sub(count - tokens as usize)
                }
                _ => break,
            }
        }
        Ok(best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_prefixes_share_no_run_of_words() {
        let a = pair_prefix(1024, 1, None).unwrap();
        let b = pair_prefix(1024, 2, None).unwrap();
        assert_eq!(a.split_whitespace().count(), 1024);
        assert_eq!(a, pair_prefix(1024, 1, None).unwrap(), "one seed, one text");
        // llama-server reuses runs of `--cache-reuse` tokens or more (256 is typical): two
        // pairs' prefixes share no run of even 12 words.
        let a: Vec<&str> = a.split_whitespace().collect();
        let b: Vec<&str> = b.split_whitespace().collect();
        let runs: std::collections::HashSet<&[&str]> = a.windows(12).collect();
        assert!(b.windows(12).all(|w| !runs.contains(w)));
    }

    #[test]
    fn prompts_start_with_distinct_nonces_and_have_the_requested_words() {
        let a = approximate(128, 1);
        let b = approximate(128, 2);
        assert_ne!(a[..16], b[..16], "each prompt has its own prefix");
        assert_eq!(
            a.split_whitespace().count(),
            1 + 128 - NONCE_TOKENS as usize
        );
        assert_eq!(approximate(3, 3).split_whitespace().count(), 1);
    }

    #[test]
    fn shared_prefix_without_tokenizer_is_words() {
        let prefix = shared_prefix(5, None).unwrap();
        assert_eq!(prefix, "you are a helpful assistant");
    }
}
