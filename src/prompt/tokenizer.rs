//! Exact token counts from a local Hugging Face `tokenizer.json` (never fetched from a hub).
//!
//! Used to build synthetic prompts of an exact length and as the output-token counter of
//! last resort when a server reports no usage. Counts exclude special tokens (BOS, chat
//! template markers), which the server adds on its side.

use std::fmt;
use std::path::Path;

use tokenizers::Tokenizer;

pub struct TokenCounter {
    tokenizer: Tokenizer,
    path: String,
}

impl fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCounter")
            .field("path", &self.path)
            .finish()
    }
}

/// Hugging Face's tokenizer.json files are tens of megabytes at most.
const MAX_TOKENIZER_BYTES: u64 = 256 << 20;

impl TokenCounter {
    pub fn load(path: &Path) -> Result<Self, String> {
        let bytes = crate::files::read_file(path, MAX_TOKENIZER_BYTES)?;
        let tokenizer = Tokenizer::from_bytes(bytes)
            .map_err(|e| format!("cannot load tokenizer {}: {e}", path.display()))?;
        let counter = Self {
            tokenizer,
            path: path.display().to_string(),
        };
        // Fail at load, not on the first probe, if this tokenizer cannot encode text.
        counter.encode("hello world")?;
        Ok(counter)
    }

    /// The file this tokenizer was loaded from.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self.tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| format!("tokenizer {}: {e}", self.path))
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String, String> {
        self.tokenizer
            .decode(ids, true)
            .map_err(|e| format!("tokenizer {}: {e}", self.path))
    }

    /// Tokens in `text`; `None` if the tokenizer fails on it (never expected for UTF-8).
    pub fn count(&self, text: &str) -> Option<u64> {
        self.encode(text).ok().map(|ids| ids.len() as u64)
    }
}
