//! The simulator's prefix cache: vLLM's automatic prefix caching in miniature, so the
//! prefix-cache probe has something real to judge (issue 35, item 5).
//!
//! A prompt's words are its tokens. They are cached in whole blocks of [`BLOCK`] words,
//! each block keyed by a hash of every word up to its end, so a block hits only after the
//! very same prefix, and the least recently used block is evicted first. A request is
//! served the longest run of leading blocks the cache holds, never its last word (vLLM
//! always computes the last prompt token, so a prompt sent twice reports fewer cached
//! tokens than it has), and then its own full blocks are cached.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

/// Words per cached block: vLLM's default block size (16 tokens).
pub const BLOCK: usize = 16;

#[derive(Debug)]
pub struct PrefixCache {
    capacity: usize,
    /// Block key → when it was last used.
    used: HashMap<u64, u64>,
    /// When → block key: the eviction order.
    by_age: BTreeMap<u64, u64>,
    clock: u64,
}

impl PrefixCache {
    /// A cache of `capacity` blocks (0: caching off, nothing is ever served from it).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            used: HashMap::new(),
            by_age: BTreeMap::new(),
            clock: 0,
        }
    }

    /// Serve a prompt: how many of its leading words came from the cache. Its blocks are
    /// cached afterwards (and the ones it hit are used again).
    pub fn serve<'a>(&mut self, words: impl IntoIterator<Item = &'a str>) -> u64 {
        if self.capacity == 0 {
            return 0;
        }
        let words: Vec<&str> = words.into_iter().collect();
        let keys = block_keys(&words);
        // The last word is always computed: only blocks that end before it can be served.
        let servable = words.len().saturating_sub(1) / BLOCK;
        let hits = keys[..servable.min(keys.len())]
            .iter()
            .take_while(|key| self.used.contains_key(key))
            .count();
        for key in keys {
            self.touch(key);
        }
        (hits * BLOCK) as u64
    }

    /// Forget every block (the `cache_evicts` fault: memory pressure, a restart).
    pub fn clear(&mut self) {
        self.used.clear();
        self.by_age.clear();
    }

    fn touch(&mut self, key: u64) {
        self.clock += 1;
        if let Some(old) = self.used.insert(key, self.clock) {
            self.by_age.remove(&old);
        }
        self.by_age.insert(self.clock, key);
        while self.used.len() > self.capacity {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            self.used.remove(&oldest);
        }
    }
}

/// The key of each full block: a hash of the previous block's key and this block's words.
fn block_keys(words: &[&str]) -> Vec<u64> {
    let mut previous = 0u64;
    words
        .chunks_exact(BLOCK)
        .map(|block| {
            let mut hasher = DefaultHasher::new();
            previous.hash(&mut hasher);
            block.hash(&mut hasher);
            previous = hasher.finish();
            previous
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(prefix: &str, words: usize, ending: &str) -> Vec<String> {
        (0..words)
            .map(|i| format!("{prefix}{i}"))
            .chain(ending.split_whitespace().map(str::to_owned))
            .collect()
    }

    fn serve(cache: &mut PrefixCache, words: &[String]) -> u64 {
        cache.serve(words.iter().map(String::as_str))
    }

    #[test]
    fn a_shared_prefix_hits_in_whole_blocks_after_it_was_warmed() {
        let mut cache = PrefixCache::new(1024);
        let first = prompt("p", 100, "first question");
        let second = prompt("p", 100, "another question entirely");
        assert_eq!(serve(&mut cache, &first), 0, "cold");
        // 100 shared words: 6 whole blocks of 16.
        assert_eq!(serve(&mut cache, &second), 96);
        // The same prompt again: every full block but one ending at the last word.
        let exact = prompt("q", 64, "");
        assert_eq!(serve(&mut cache, &exact), 0);
        assert_eq!(
            serve(&mut cache, &exact),
            48,
            "the last word is always computed"
        );
    }

    #[test]
    fn a_different_first_word_shares_nothing() {
        let mut cache = PrefixCache::new(1024);
        let mut nonce = prompt("p", 64, "");
        serve(&mut cache, &nonce);
        nonce[0] = "nonce".into();
        assert_eq!(serve(&mut cache, &nonce), 0);
    }

    #[test]
    fn the_least_recently_used_blocks_go_first_and_clear_forgets_all() {
        let mut cache = PrefixCache::new(4);
        let a = prompt("a", 65, "");
        let b = prompt("b", 65, "");
        serve(&mut cache, &a);
        assert_eq!(serve(&mut cache, &a), 64);
        serve(&mut cache, &b); // four blocks: a's are evicted
        assert_eq!(serve(&mut cache, &a), 0);
        cache.clear();
        assert_eq!(serve(&mut cache, &b), 0);
        let mut off = PrefixCache::new(0);
        serve(&mut off, &a);
        assert_eq!(serve(&mut off, &a), 0, "capacity 0 is caching off");
    }
}
