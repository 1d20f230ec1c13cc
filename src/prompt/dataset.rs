//! Prompt datasets from files, loaded and checked at configuration time (so `inferprobe
//! check` reports a bad file with its line before anything runs).
//!
//! - `sharegpt`: a JSON array of `{"conversations": [{"from": "human", "value": …}, …]}`;
//!   the first human turn is the prompt and the turn after it is the reply whose length
//!   sets the output length. Entries without such a pair are skipped, as are those vLLM's
//!   ShareGPT loader rejects (prompt or reply under 4 tokens, prompt over 1024, both over
//!   2048), so runs are comparable with `vllm bench serve`.
//! - `jsonl`: one object per line, `{"prompt": "…", "output_tokens": 128}` (the latter
//!   optional).
//! - `text`: one prompt per non-empty line.

use std::path::Path;

use serde::Deserialize;

use super::tokenizer::TokenCounter;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatasetFormat {
    ShareGpt,
    Jsonl,
    Text,
}

impl DatasetFormat {
    pub const NAMES: [&'static str; 3] = ["sharegpt", "jsonl", "text"];

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "sharegpt" => Some(Self::ShareGpt),
            "jsonl" => Some(Self::Jsonl),
            "text" => Some(Self::Text),
            _ => None,
        }
    }

    /// `.json` is ShareGPT, `.jsonl` JSON lines, anything else one prompt per line.
    pub fn from_extension(path: &Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some("json") => Self::ShareGpt,
            Some("jsonl") => Self::Jsonl,
            _ => Self::Text,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub prompt: String,
    /// The output length this entry asks for, when the dataset says.
    pub output_tokens: Option<u32>,
}

#[derive(Debug)]
pub struct Dataset {
    pub entries: Vec<Entry>,
}

/// Tokens in `text`: exact with a tokenizer, else 4 tokens per 3 words (the usual ratio for
/// English prose in BPE vocabularies).
pub fn estimate_tokens(text: &str, counter: Option<&TokenCounter>) -> u64 {
    counter.and_then(|c| c.count(text)).unwrap_or_else(|| {
        let words = text.split_whitespace().count() as u64;
        (words * 4).div_ceil(3)
    })
}

/// ShareGPT's largest public file is about 650 MB; it is parsed whole, in memory.
const MAX_DATASET_BYTES: u64 = 2 << 30;

pub fn load(
    path: &Path,
    format: DatasetFormat,
    counter: Option<&TokenCounter>,
) -> Result<Dataset, String> {
    let name = path.display();
    let text = crate::files::read_text(path, MAX_DATASET_BYTES)?;
    let entries = match format {
        DatasetFormat::ShareGpt => sharegpt(&text, counter),
        DatasetFormat::Jsonl => jsonl(&text),
        DatasetFormat::Text => Ok(text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| Entry {
                prompt: l.to_owned(),
                output_tokens: None,
            })
            .collect()),
    }
    .map_err(|e| format!("{name}: {e}"))?;
    if entries.is_empty() {
        return Err(format!("{name}: no usable prompts"));
    }
    Ok(Dataset { entries })
}

#[derive(Deserialize)]
struct Turn {
    #[serde(default)]
    from: String,
    #[serde(default)]
    value: String,
}

#[derive(Deserialize)]
struct Conversation {
    #[serde(default)]
    conversations: Vec<Turn>,
}

fn sharegpt(text: &str, counter: Option<&TokenCounter>) -> Result<Vec<Entry>, String> {
    let conversations: Vec<Conversation> = serde_json::from_str(text).map_err(|e| {
        format!(
            "line {} column {}: not a ShareGPT JSON array: {e}",
            e.line(),
            e.column()
        )
    })?;
    let human = |t: &Turn| matches!(t.from.as_str(), "human" | "user");
    Ok(conversations
        .iter()
        .filter_map(|c| {
            let at = c.conversations.iter().position(human)?;
            let prompt = &c.conversations[at].value;
            let reply = &c.conversations.get(at + 1)?.value;
            let prompt_tokens = estimate_tokens(prompt, counter);
            let output_tokens = estimate_tokens(reply, counter);
            let valid = prompt_tokens >= 4
                && output_tokens >= 4
                && prompt_tokens <= 1024
                && prompt_tokens + output_tokens <= 2048;
            valid.then(|| Entry {
                prompt: prompt.clone(),
                output_tokens: Some(output_tokens as u32),
            })
        })
        .collect())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLine {
    prompt: String,
    #[serde(default)]
    output_tokens: Option<u32>,
}

fn jsonl(text: &str) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let entry: JsonLine =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        if entry.prompt.is_empty() || entry.output_tokens == Some(0) {
            return Err(format!(
                "line {}: prompt must be non-empty and output_tokens > 0",
                i + 1
            ));
        }
        entries.push(Entry {
            prompt: entry.prompt,
            output_tokens: entry.output_tokens,
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(text: &str, format: DatasetFormat) -> Result<Dataset, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, text).unwrap();
        load(&path, format, None).map_err(|e| e.replace(&path.display().to_string(), "FILE"))
    }

    #[test]
    fn sharegpt_takes_the_first_human_turn_and_its_reply() {
        let text = r#"[
          {"id": "a", "conversations": [
            {"from": "system", "value": "ignored"},
            {"from": "human", "value": "what is the capital of france"},
            {"from": "gpt", "value": "the capital of france is paris and it is lovely"}]},
          {"id": "b", "conversations": [{"from": "human", "value": "no reply here at all"}]},
          {"id": "c", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello there friend"}]}
        ]"#;
        let data = load_str(text, DatasetFormat::ShareGpt).unwrap();
        assert_eq!(
            data.entries.len(),
            1,
            "no reply, and too short, are skipped"
        );
        assert_eq!(data.entries[0].prompt, "what is the capital of france");
        // 10 words × 4/3
        assert_eq!(data.entries[0].output_tokens, Some(14));
    }

    #[test]
    fn bad_files_name_the_line() {
        let err = load_str("[\n{\"conversations\": [}\n]", DatasetFormat::ShareGpt).unwrap_err();
        assert!(err.starts_with("FILE: line 2 column"), "{err}");
        let err = load_str(
            "{\"prompt\": \"a\"}\n\n{\"promt\": \"b\"}\n",
            DatasetFormat::Jsonl,
        )
        .unwrap_err();
        assert!(
            err.starts_with("FILE: line 3: unknown field `promt`"),
            "{err}"
        );
        let err = load_str(
            "{\"prompt\": \"a\", \"output_tokens\": 0}\n",
            DatasetFormat::Jsonl,
        )
        .unwrap_err();
        assert!(err.contains("line 1"), "{err}");
        let err = load_str("\n\n", DatasetFormat::Text).unwrap_err();
        assert_eq!(err, "FILE: no usable prompts");
        let err = load(
            Path::new("/nonexistent/x.json"),
            DatasetFormat::ShareGpt,
            None,
        )
        .unwrap_err();
        assert!(err.contains("cannot read /nonexistent/x.json"));
    }

    #[test]
    fn jsonl_and_text() {
        let data = load_str(
            "{\"prompt\": \"one\", \"output_tokens\": 5}\n{\"prompt\": \"two\"}\n",
            DatasetFormat::Jsonl,
        )
        .unwrap();
        assert_eq!(data.entries[0].output_tokens, Some(5));
        assert_eq!(data.entries[1].output_tokens, None);
        let data = load_str("first prompt\n\n  \nsecond prompt\n", DatasetFormat::Text).unwrap();
        assert_eq!(data.entries.len(), 2);
    }

    #[test]
    fn formats_from_names_and_extensions() {
        assert_eq!(
            DatasetFormat::from_extension(Path::new("a.json")),
            DatasetFormat::ShareGpt
        );
        assert_eq!(
            DatasetFormat::from_extension(Path::new("a.jsonl")),
            DatasetFormat::Jsonl
        );
        assert_eq!(
            DatasetFormat::from_extension(Path::new("a.txt")),
            DatasetFormat::Text
        );
        assert_eq!(
            DatasetFormat::from_name("jsonl"),
            Some(DatasetFormat::Jsonl)
        );
        assert_eq!(DatasetFormat::from_name("csv"), None);
    }
}
