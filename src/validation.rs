//! Response checks a target can require on top of the success rule: the output matches a
//! regex, the generation ran to max_tokens, it finished for an allowed reason, the server
//! answered with the requested model. A failed check is category `validation` and its name
//! is logged, so "the endpoint serves garbage" pages like "the endpoint is down".

use regex::Regex;

use crate::error::ProbeError;
use crate::prompt::Prompt;
use crate::record::{Measurement, ResponseInfo};

#[derive(Clone, Debug, Default)]
pub struct Validation {
    pub regex: Option<Regex>,
    pub finish_reasons: Vec<String>,
    /// Output tokens must equal the request's max_tokens.
    pub output_tokens: bool,
    pub model: bool,
}

impl PartialEq for Validation {
    fn eq(&self, other: &Self) -> bool {
        self.regex.as_ref().map(Regex::as_str) == other.regex.as_ref().map(Regex::as_str)
            && self.finish_reasons == other.finish_reasons
            && self.output_tokens == other.output_tokens
            && self.model == other.model
    }
}

impl Validation {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Run every configured check; the first failure is returned.
    pub fn check(
        &self,
        prompt: &Prompt,
        response: &ResponseInfo,
        measurement: &Measurement,
    ) -> Result<(), ProbeError> {
        let fail =
            |check: &'static str, detail: String| Err(ProbeError::Validation { check, detail });
        if let Some(regex) = &self.regex {
            if !regex.is_match(&response.text) {
                let text = crate::error::snippet(&response.text);
                return fail(
                    "regex",
                    format!("output {text:?} does not match /{}/", regex.as_str()),
                );
            }
        }
        if self.output_tokens {
            match measurement.output_tokens {
                Some(count)
                    if count.is_exact() && count.value() == u64::from(prompt.max_tokens) => {}
                Some(count) if count.is_exact() => {
                    return fail(
                        "output_tokens",
                        format!(
                            "{} output tokens, max_tokens was {}",
                            count.value(),
                            prompt.max_tokens
                        ),
                    );
                }
                _ => {
                    return fail(
                        "output_tokens",
                        "no exact output token count (no usage, no tokenizer)".into(),
                    );
                }
            }
        }
        if !self.finish_reasons.is_empty() {
            match &response.finish_reason {
                Some(reason) if self.finish_reasons.contains(reason) => {}
                Some(reason) => {
                    return fail(
                        "finish_reason",
                        format!("`{reason}` is not one of {:?}", self.finish_reasons),
                    );
                }
                None => {
                    return fail(
                        "finish_reason",
                        "the response named no finish reason".into(),
                    );
                }
            }
        }
        if self.model {
            match &response.model {
                Some(model) if *model == prompt.model => {}
                Some(model) => {
                    return fail(
                        "model",
                        format!("answered by `{model}`, asked for `{}`", prompt.model),
                    );
                }
                None => return fail("model", "the response named no model".into()),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
