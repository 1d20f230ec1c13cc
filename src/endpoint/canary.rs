//! A target's validated correctness-canary settings, its prompts (a prompts file, a golden file, or the
//! built-in set) and the golden file's format. Loaded at configuration time, so a bad file
//! fails `inferprobe check` naming the file and the line.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::logprobs::Position;
use crate::structure::Structure;

/// What a golden file says it is (the first key a reader checks).
pub const GOLDEN_FORMAT: &str = "inferprobe-canary-golden/1";

#[derive(Clone, Debug)]
pub struct CanarySpec {
    pub interval: Duration,
    pub max_tokens: u32,
    /// The structured prompts' `max_tokens`: a reasoning model thinks first (Qwen3 and
    /// DeepSeek-R1 behind a reasoning parser, gpt-oss, o-series), and vLLM's `required`
    /// answer alone is about 20 tokens; the text prompts' short budget would cut them all.
    pub structured_max_tokens: u32,
    /// Alternatives asked for per token; 0 asks for no logprobs (known answers only).
    pub top_logprobs: u32,
    /// How far (nats) the reference's token must lead the received one for a difference to
    /// count as a divergence.
    pub margin: f64,
    pub prompts: Arc<[CanaryPrompt]>,
    /// The golden file the prompts (and their references) came from, if any.
    pub golden: Option<String>,
    /// The group the golden answers apply to: its model, and the group value it was
    /// recorded for (any group of that model when `None`). Other groups learn theirs.
    pub golden_for: Option<(String, Option<String>)>,
    /// Target labels whose values make a replica's group; empty: its controller revision.
    pub group_by: Vec<String>,
    /// The one group a block's replicas are compared with (the rollout gate); `None`:
    /// every other group, by name (`canary::baseline`).
    pub baseline: Option<String>,
    /// Replicas of the pool on other nodes asked to vote when a node-local group is below
    /// three replicas on this node (0: never).
    pub votes: usize,
    /// Checks run back to back when a replica is first found, at least (then on until the
    /// gate's evidence suffices, `crate::canary::warmup`; then one per interval).
    pub warmup: usize,
    /// The rollout gate's tolerance, which the warm-up gathers evidence for.
    pub max_divergence: f64,
    /// `check --no-secrets`: a prompts or golden file the cluster mounts was not here to
    /// read, so the built-in prompts stand in for it (`check` says so; `run` reads it).
    pub unread: Option<String>,
}

impl CanarySpec {
    /// What the canary sends an hour to one replica, (prompt tokens, at most output
    /// tokens): a check per interval, the prompts in turn, each prompt's words at 4 tokens
    /// per 3 (the chat template and a replica's warm-up and votes come on top).
    pub fn tokens_per_hour(&self) -> (u64, u64) {
        let checks = 3600.0 / self.interval.as_secs_f64().max(1e-3);
        let n = self.prompts.len().max(1) as f64;
        let words: usize = self
            .prompts
            .iter()
            .map(|p| p.text.split_whitespace().count())
            .sum();
        let output: u64 = self
            .prompts
            .iter()
            .map(|p| match p.structure {
                Some(_) => u64::from(self.structured_max_tokens),
                None => u64::from(self.max_tokens),
            })
            .sum();
        let per = |total: f64| (checks * total / n).round() as u64;
        (per(words as f64 * 4.0 / 3.0), per(output as f64))
    }

    /// The group a replica of `model` with these `labels` and controller `revision` is in:
    /// the values of `group_by`, else the revision (`None` for a static target, or a
    /// source that does not say).
    pub fn group_of(&self, labels: &[(String, String)], revision: Option<&str>) -> Option<String> {
        if self.group_by.is_empty() {
            return revision.map(str::to_owned);
        }
        let value = |name: &String| {
            labels
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map_or("", |(_, v)| v.as_str())
        };
        Some(
            self.group_by
                .iter()
                .map(value)
                .collect::<Vec<_>>()
                .join(","),
        )
    }

    /// Whether the golden answers apply to a replica of `model` in `group`.
    pub fn golden_applies(&self, model: &str, group: Option<&str>) -> bool {
        self.golden_for
            .as_ref()
            .is_some_and(|(m, g)| m == model && g.as_deref().is_none_or(|g| Some(g) == group))
    }
}

/// One prompt, sent exactly as written (no nonce: the same text every time).
#[derive(Clone, Debug)]
pub struct CanaryPrompt {
    pub text: String,
    /// Scored by this regex on the answer's text instead of by logprobs.
    pub expect: Option<regex::Regex>,
    /// The golden answer, when a golden file gave one.
    pub reference: Option<Arc<Reference>>,
    /// A structured prompt's `response_format` / `tools`: judged by its schema, not by
    /// logprobs ([`crate::canary::structured`]).
    pub structure: Option<Arc<Structure>>,
    /// A structured answer's known values: a JSON Pointer into it, and a regex its value
    /// must match (a string as it is, anything else as JSON text).
    pub expect_json: Vec<(String, regex::Regex)>,
}

impl CanaryPrompt {
    /// A prompt as written: no known answer, no structure, no reference.
    pub fn text(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            expect: None,
            reference: None,
            structure: None,
            expect_json: Vec::new(),
        }
    }

    /// Compared by logprobs with a reference (not a known answer, not a structure).
    pub fn compared(&self) -> bool {
        self.expect.is_none() && self.structure.is_none()
    }

    /// A known answer: scored by its `expect` regex on the text (not a structure).
    pub fn known(&self) -> bool {
        self.expect.is_some() && self.structure.is_none()
    }
}

/// A reference answer: its tokens with their logprobs, and how it ended.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Reference {
    pub text: String,
    pub positions: Vec<Position>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

impl Reference {
    /// It stopped on its own (an end token or a stop string), not at its length limit.
    pub fn ended(&self) -> bool {
        self.finish_reason.as_deref().is_some_and(|r| r != "length")
    }
}

/// The built-in prompts: neutral text whose continuation any model has an opinion about.
/// No known answers: a small model may well get arithmetic wrong, and that is not an
/// outage. Known answers come from a prompts file.
pub const BUILT_IN: &[&str] = &[
    "The capital of France is",
    "Water boils at a temperature of",
    "Here is a list of the first ten prime numbers:",
    "The quick brown fox",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):",
    "The three primary colors are",
    "Translate to French: The cat is sleeping on the mat.",
];

/// The built-in structured prompts (`canary.structured = true`), as a prompts file would
/// spell them: a JSON answer to a small object schema, a named tool, and a required call
/// of one of two tools. No `expect_json`: as with the text prompts, a small model may get
/// the facts wrong, and that is not an outage; a broken structure is.
pub fn built_in_structured() -> Vec<CanaryPrompt> {
    use serde_json::json;
    let weather = json!({"type": "function", "function": {"name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}});
    let time = json!({"type": "function", "function": {"name": "get_time",
        "description": "The current time in an IANA time zone",
        "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}});
    let capital = json!({"type": "json_schema", "json_schema": {"name": "capital", "schema": {
        "type": "object",
        "properties": {"country": {"type": "string"}, "capital": {"type": "string"}},
        "required": ["country", "capital"]}}});
    let prompts = [
        (
            "Answer in JSON: what is the capital of France?",
            Some(capital),
            None,
            None,
        ),
        (
            "What is the weather in Paris right now?",
            None,
            Some(json!([weather.clone()])),
            Some(json!({"type": "function", "function": {"name": "get_weather"}})),
        ),
        (
            "What time is it in Tokyo?",
            None,
            Some(json!([weather, time])),
            Some(json!("required")),
        ),
    ];
    prompts
        .into_iter()
        .filter_map(|(text, format, tools, choice)| {
            // Literals above, checked by a unit test: never an error.
            let structure = Structure::parse(format.as_ref(), tools.as_ref(), choice.as_ref())
                .ok()
                .flatten()?;
            Some(CanaryPrompt {
                structure: Some(Arc::new(structure)),
                ..CanaryPrompt::text(text)
            })
        })
        .collect()
}

/// A line of a prompts file.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptLine {
    prompt: String,
    #[serde(default)]
    expect: Option<String>,
    #[serde(default)]
    response_format: Option<serde_json::Value>,
    #[serde(default)]
    tools: Option<serde_json::Value>,
    #[serde(default)]
    tool_choice: Option<serde_json::Value>,
    #[serde(default)]
    expect_json: Option<std::collections::BTreeMap<String, String>>,
}

fn expect(pattern: &str, at: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("{at}: `expect` is not a valid regex: {e}"))
}

/// A prompts file: one JSON object per line, `{"prompt": "...", "expect": "REGEX"}`
/// (`expect` optional), or a structured prompt with `response_format`, `tools`,
/// `tool_choice` (the OpenAI chat spelling) and `expect_json` (`{"/pointer": "REGEX"}`);
/// blank lines and lines starting with `#` are skipped.
pub fn load_prompts(path: &Path) -> Result<Vec<CanaryPrompt>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut prompts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = format!("{}:{}", path.display(), i + 1);
        let parsed: PromptLine = serde_json::from_str(line).map_err(|e| format!("{at}: {e}"))?;
        if parsed.prompt.is_empty() {
            return Err(format!("{at}: `prompt` is empty"));
        }
        let structure = Structure::parse(
            parsed.response_format.as_ref(),
            parsed.tools.as_ref(),
            parsed.tool_choice.as_ref(),
        )
        .map_err(|(field, e)| format!("{at}: `{field}` {e}"))?;
        let mut expect_json = Vec::new();
        for (pointer, pattern) in parsed.expect_json.iter().flatten() {
            if !(pointer.is_empty() || pointer.starts_with('/')) {
                return Err(format!(
                    "{at}: `expect_json` key {pointer:?} is not a JSON Pointer (\"/city\", \"/items/0/name\")"
                ));
            }
            expect_json.push((pointer.clone(), expect(pattern, &at)?));
        }
        if structure.is_none() && !expect_json.is_empty() {
            return Err(format!(
                "{at}: `expect_json` checks a structured answer: give `response_format` or `tools`"
            ));
        }
        prompts.push(CanaryPrompt {
            expect: parsed
                .expect
                .as_deref()
                .map(|p| expect(p, &at))
                .transpose()?,
            text: parsed.prompt,
            reference: None,
            structure: structure.map(Arc::new),
            expect_json,
        });
    }
    if prompts.is_empty() {
        return Err(format!("{} holds no prompt", path.display()));
    }
    Ok(prompts)
}

/// A golden file: reference answers recorded by `inferprobe canary record` from an
/// endpoint the user trusts.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Golden {
    pub format: String,
    pub model: String,
    /// The endpoint it was recorded from, and what it said it was (`Server` header).
    pub url: String,
    #[serde(default)]
    pub server: Option<String>,
    pub backend: String,
    /// Unix time of the recording.
    pub recorded_at: u64,
    pub max_tokens: u32,
    pub top_logprobs: u32,
    /// The group value it was recorded for (`canary record --group`): it applies to that
    /// group only; without one, to every group of its model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub answers: Vec<GoldenAnswer>,
    /// `canary record --adapters`: each LoRA adapter's answers on the prompts where they
    /// part from the base model's (`answers`): the adapter check's references.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adapters: Vec<GoldenAdapter>,
}

/// One adapter's recorded answers (docs/adapters.md, "Recorded references").
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldenAdapter {
    pub name: String,
    /// The path `/v1/models` listed it at (`root`): the version recorded.
    #[serde(default)]
    pub root: String,
    /// Prompts on which its answer and the base's agree are not kept: they tell nothing.
    pub answers: Vec<GoldenAnswer>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldenAnswer {
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
    #[serde(flatten)]
    pub answer: Reference,
}

/// Read a golden file into prompts with their references.
pub fn load_golden(path: &Path) -> Result<(Golden, Vec<CanaryPrompt>), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let golden: Golden = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a golden file: {e}", path.display()))?;
    if golden.format != GOLDEN_FORMAT {
        return Err(format!(
            "{}: format {:?}, expected {GOLDEN_FORMAT:?}",
            path.display(),
            golden.format
        ));
    }
    let mut prompts = Vec::new();
    for (i, entry) in golden.answers.iter().enumerate() {
        let at = format!("{}: answers[{i}]", path.display());
        if entry.expect.is_none() && entry.answer.positions.is_empty() {
            return Err(format!(
                "{at}: no logprobs and no `expect`: nothing to compare"
            ));
        }
        prompts.push(CanaryPrompt {
            text: entry.prompt.clone(),
            expect: entry
                .expect
                .as_deref()
                .map(|p| expect(p, &at))
                .transpose()?,
            reference: Some(Arc::new(entry.answer.clone())),
            structure: None,
            expect_json: Vec::new(),
        });
    }
    if prompts.is_empty() {
        return Err(format!("{} holds no answer", path.display()));
    }
    Ok((golden, prompts))
}

pub fn built_in() -> Vec<CanaryPrompt> {
    BUILT_IN
        .iter()
        .map(|text| CanaryPrompt::text(text))
        .collect()
}
