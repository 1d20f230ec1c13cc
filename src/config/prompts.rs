//! Validation of what a target asks and checks: prompt source (synthetic, dataset,
//! tokenizer, LoRA models), response validation, and format-specific options.
//!
//! Files (tokenizers, datasets) are loaded here, once per path even when several targets
//! share them, so `inferprobe check` reports a bad file with its line.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use regex::Regex;

use super::{AudioSpec, BackendOptions, ConfigError, RawTarget};
use crate::endpoint::BackendKind;
use crate::prompt::{
    Dataset, DatasetFormat, Input, PromptSource, TokenCounter, dataset, synthetic,
};
use crate::validation::Validation;

const DEFAULT_INPUT_TOKENS: u64 = 128;
const DEFAULT_OUTPUT_TOKENS: u64 = 64;
const MAX_TOKENS: u64 = 1_000_000;
const DEFAULT_ANTHROPIC_VERSION: &str = "2023-06-01";

/// Files loaded so far, shared between targets.
#[derive(Default)]
pub(super) struct Loaded {
    tokenizers: HashMap<String, Arc<TokenCounter>>,
    datasets: HashMap<(String, String), Arc<Dataset>>,
    /// Held while an image is generated: one at a time in the whole configuration.
    images: Arc<std::sync::Mutex<()>>,
    /// `check --no-secrets`: secrets are checked for form, not read.
    pub(super) skip_secrets: bool,
}

type At<'a> = &'a dyn Fn(&str) -> String;

fn in_range(key: &str, value: u64, max: u64) -> Result<u32, ConfigError> {
    super::fields::in_range(key, value, 1, max).map(|v| v as u32)
}

pub(super) fn prompt_source(
    at: At,
    t: &RawTarget,
    model: &str,
    backend: BackendKind,
    loaded: &mut Loaded,
) -> Result<PromptSource, ConfigError> {
    let tokenizer = match &t.tokenizer {
        None => None,
        Some(path) => Some(match loaded.tokenizers.get(path) {
            Some(counter) => Arc::clone(counter),
            None => {
                let counter = TokenCounter::load(Path::new(path))
                    .map_err(|e| ConfigError::new(at("tokenizer"), e))?;
                let counter = Arc::new(counter);
                loaded.tokenizers.insert(path.clone(), Arc::clone(&counter));
                counter
            }
        }),
    };
    let output_tokens = in_range(
        &at("output_tokens"),
        t.output_tokens.unwrap_or(DEFAULT_OUTPUT_TOKENS),
        MAX_TOKENS,
    )?;
    let input_tokens = in_range(
        &at("input_tokens"),
        t.input_tokens.unwrap_or(DEFAULT_INPUT_TOKENS),
        MAX_TOKENS,
    )?;
    let range_ratio = t.range_ratio.unwrap_or(0.0);
    if !(0.0..1.0).contains(&range_ratio) {
        return Err(ConfigError::new(
            at("range_ratio"),
            format!("{range_ratio} must be in [0, 1)"),
        ));
    }
    let input = match &t.dataset {
        Some(path) => {
            if t.shared_prefix_tokens.is_some() {
                return Err(ConfigError::new(
                    at("shared_prefix_tokens"),
                    "applies to synthetic prompts, not a dataset",
                ));
            }
            let format = match &t.dataset_format {
                None => DatasetFormat::from_extension(Path::new(path)),
                Some(name) => DatasetFormat::from_name(name).ok_or_else(|| {
                    ConfigError::new(
                        at("dataset_format"),
                        format!(
                            "unknown format `{name}` (expected one of: {})",
                            DatasetFormat::NAMES.join(", ")
                        ),
                    )
                })?,
            };
            let key = (path.clone(), format!("{format:?}"));
            let data = match loaded.datasets.get(&key) {
                Some(data) => Arc::clone(data),
                None => {
                    let data = dataset::load(Path::new(path), format, tokenizer.as_deref())
                        .map_err(|e| ConfigError::new(at("dataset"), e))?;
                    let data = Arc::new(data);
                    loaded.datasets.insert(key, Arc::clone(&data));
                    data
                }
            };
            Input::Dataset {
                dataset: data,
                output_from_dataset: t.output_tokens_from_dataset.unwrap_or(true),
            }
        }
        None => {
            let prefix = t.shared_prefix_tokens.unwrap_or(0);
            if prefix >= u64::from(input_tokens) {
                return Err(ConfigError::new(
                    at("shared_prefix_tokens"),
                    format!("{prefix} must be less than input_tokens ({input_tokens})"),
                ));
            }
            let shared_prefix = synthetic::shared_prefix(prefix as u32, tokenizer.as_deref())
                .map_err(|e| ConfigError::new(at("tokenizer"), e))?;
            let longest = (f64::from(input_tokens) * (1.0 + range_ratio)).ceil() as u32;
            let exact = match &tokenizer {
                Some(counter) => Some(
                    synthetic::ExactFiller::new(counter, longest)
                        .map_err(|e| ConfigError::new(at("tokenizer"), e))?,
                ),
                None => None,
            };
            Input::Synthetic {
                input_tokens,
                shared_prefix,
                exact,
            }
        }
    };
    let models = match &t.models {
        None => vec![model.to_owned()],
        Some(models) if models.is_empty() || models.iter().any(String::is_empty) => {
            return Err(ConfigError::new(
                at("models"),
                "must be a non-empty list of model names",
            ));
        }
        Some(models) => models.clone(),
    };
    let structure = crate::structure::Structure::parse(
        t.response_format.as_ref(),
        t.tools.as_ref(),
        t.tool_choice.as_ref(),
    )
    .map_err(|(field, e)| ConfigError::new(at(field), e))?;
    if let Some(structure) = &structure {
        backend
            .backend()
            .structure(&mut t.extra_body.clone().unwrap_or_default(), structure)
            .map_err(|e| {
                let key = if structure.tools.is_empty() {
                    "response_format"
                } else {
                    "tools"
                };
                ConfigError::new(at(key), format!("{backend}: {e}"))
            })?;
    }
    Ok(PromptSource {
        structure: structure.map(Arc::new),
        input,
        output_tokens,
        range_ratio,
        models,
        tokenizer,
        media: super::media::media(at, t, backend, &loaded.images)?,
    })
}

pub(super) fn validation(
    at: At,
    t: &RawTarget,
    backend: BackendKind,
    has_tokenizer: bool,
) -> Result<Validation, ConfigError> {
    let Some(raw) = &t.validate else {
        return Ok(Validation::default());
    };
    let key = |field: &str| at(&format!("validate.{field}"));
    let regex = match &raw.regex {
        None => None,
        Some(pattern) => Some(
            Regex::new(pattern)
                .map_err(|e| ConfigError::new(key("regex"), format!("invalid regex: {e}")))?,
        ),
    };
    let validation = Validation {
        regex,
        finish_reasons: raw.finish_reasons.clone().unwrap_or_default(),
        output_tokens: raw.output_tokens.unwrap_or(false),
        model: raw.model.unwrap_or(false),
    };
    if !backend.generates_text()
        && (validation.regex.is_some()
            || !validation.finish_reasons.is_empty()
            || validation.output_tokens)
    {
        return Err(ConfigError::new(
            at("validate"),
            "embeddings have no output text; only `model` can be validated (and embedding_dimensions)",
        ));
    }
    let reports_usage = t.include_usage.unwrap_or(true) && backend != BackendKind::TensorRtLlm;
    if validation.output_tokens && !(reports_usage || has_tokenizer) {
        return Err(ConfigError::new(
            key("output_tokens"),
            "needs exact counts: include_usage (not reported by tensorrt-llm) or a tokenizer",
        ));
    }
    Ok(validation)
}

pub(super) fn backend_options(at: At, t: &RawTarget) -> Result<BackendOptions, ConfigError> {
    let seconds = t.audio_seconds.unwrap_or(2.0);
    if !(seconds > 0.0 && seconds <= 600.0) {
        return Err(ConfigError::new(
            at("audio_seconds"),
            format!("{seconds} must be in (0, 600]"),
        ));
    }
    let tone_hz = t.audio_tone_hz.unwrap_or(440.0);
    if !(0.0..=8000.0).contains(&tone_hz) {
        return Err(ConfigError::new(
            at("audio_tone_hz"),
            format!("{tone_hz} must be in [0, 8000] (0 = silence)"),
        ));
    }
    let embedding_dimensions = match t.embedding_dimensions {
        None => None,
        Some(n) => {
            Some(super::fields::in_range(&at("embedding_dimensions"), n, 1, 1 << 20)? as usize)
        }
    };
    let max_tokens_field = match t.max_tokens_field.as_deref() {
        None | Some("max_tokens") => "max_tokens",
        Some("max_completion_tokens") => "max_completion_tokens",
        Some(other) => {
            return Err(ConfigError::new(
                at("max_tokens_field"),
                format!("`{other}` must be \"max_tokens\" or \"max_completion_tokens\""),
            ));
        }
    };
    Ok(BackendOptions {
        max_tokens_field,
        embedding_dimensions,
        audio: AudioSpec {
            seconds,
            tone_hz,
            language: Some(t.audio_language.clone().unwrap_or_else(|| "en".into()))
                .filter(|l| !l.is_empty()),
        },
        anthropic_version: t
            .anthropic_version
            .clone()
            .unwrap_or_else(|| DEFAULT_ANTHROPIC_VERSION.into()),
    })
}
