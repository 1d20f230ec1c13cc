use std::time::Duration;

use super::*;
use crate::error::ErrorCategory;
use crate::record::TokenCount;

fn prompt() -> Prompt {
    Prompt {
        text: "q".into(),
        input_tokens: 2,
        input_exact: false,
        media: Ok(Vec::new()),
        greedy: None,
        sampled: None,
        structure: None,
        cache_breakpoint: None,
        conversation: None,
        extra: None,
        max_tokens: 8,
        model: "lora-a".into(),
    }
}

fn response(text: &str, finish: Option<&str>, model: Option<&str>) -> ResponseInfo {
    ResponseInfo {
        text: text.into(),
        finish_reason: finish.map(str::to_owned),
        model: model.map(str::to_owned),
        server_timings: None,
        other_text: String::new(),
        reasoning_streamed: false,
        logprobs: None,
        tool_calls: Vec::new(),
        refusal: String::new(),
        cache_written: None,
        thinking: Vec::new(),
        reasoning: None,
        served_by: None,
        echo: Vec::new(),
        quota: None,
    }
}

fn measurement(tokens: Option<TokenCount>) -> Measurement {
    Measurement {
        ttft: Some(Duration::from_millis(1)),
        tpot: None,
        timed_by: crate::record::TimedBy::Event,
        buffered: false,
        itl: Vec::new(),
        e2el: Duration::from_millis(2),
        output_tokens: tokens,
        prompt_tokens: None,
        cached_prompt_tokens: None,
        answer: Default::default(),
    }
}

fn failed_check(result: Result<(), ProbeError>) -> &'static str {
    match result {
        Err(ProbeError::Validation { check, .. }) => check,
        other => panic!("expected a validation failure, got {other:?}"),
    }
}

#[test]
fn an_empty_validation_accepts_anything() {
    let v = Validation::default();
    assert!(v.is_empty());
    assert!(
        v.check(&prompt(), &ResponseInfo::default(), &measurement(None))
            .is_ok()
    );
}

#[test]
fn each_check_names_itself_when_it_fails() {
    let v = Validation {
        regex: Some(Regex::new("^ (probe|token)").unwrap()),
        finish_reasons: vec!["length".into()],
        output_tokens: true,
        model: true,
    };
    let exact = measurement(Some(TokenCount::Usage(8)));
    let good = response(" probe probe", Some("length"), Some("lora-a"));
    assert!(v.check(&prompt(), &good, &exact).is_ok());

    let bad_text = response("nonsense", Some("length"), Some("lora-a"));
    assert_eq!(failed_check(v.check(&prompt(), &bad_text, &exact)), "regex");
    let short = measurement(Some(TokenCount::Usage(5)));
    assert_eq!(
        failed_check(v.check(&prompt(), &good, &short)),
        "output_tokens"
    );
    let approximate = measurement(Some(TokenCount::Events(8)));
    assert_eq!(
        failed_check(v.check(&prompt(), &good, &approximate)),
        "output_tokens"
    );
    let stopped = response(" probe", Some("stop"), Some("lora-a"));
    assert_eq!(
        failed_check(v.check(&prompt(), &stopped, &exact)),
        "finish_reason"
    );
    let other_model = response(" probe", Some("length"), Some("base"));
    assert_eq!(
        failed_check(v.check(&prompt(), &other_model, &exact)),
        "model"
    );
    let anonymous = response(" probe", Some("length"), None);
    let err = v.check(&prompt(), &anonymous, &exact).unwrap_err();
    assert_eq!(err.category(), ErrorCategory::Validation);
    assert_eq!(
        err.to_string(),
        "validation `model` failed: the response named no model"
    );
}
