//! Structured-output fixtures shared by the structured suites: the tools and schema of the
//! built-in structured prompts, prompts lines and files, a canary target, and the counts
//! a scrape holds.

use super::Scrape;

pub const WEATHER: &str = r#"{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}"#;
pub const TIME: &str = r#"{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}"#;
pub const CAPITAL: &str = r#"{"type": "json_schema", "json_schema": {"name": "capital", "schema": {"type": "object", "properties": {"country": {"type": "string"}, "capital": {"type": "string"}}, "required": ["country", "capital"]}}}"#;

/// A prompts line: a JSON answer to the capital schema.
pub fn json_line() -> String {
    format!(
        r#"{{"prompt": "Answer in JSON: the capital of France?", "response_format": {CAPITAL}}}"#
    )
}

/// A prompts line: the named `get_weather`, with a known city.
pub fn named_line(city: &str) -> String {
    format!(
        r#"{{"prompt": "What is the weather in Paris?", "tools": [{WEATHER}], "tool_choice": {{"type": "function", "function": {{"name": "get_weather"}}}}, "expect_json": {{"/city": "^{city}$"}}}}"#
    )
}

/// A prompts line: one of two tools, `required`.
pub fn required_line() -> String {
    format!(
        r#"{{"prompt": "What time is it in Tokyo?", "tools": [{WEATHER}, {TIME}], "tool_choice": "required"}}"#
    )
}

pub fn prompts(dir: &std::path::Path, name: &str, lines: &[String]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    path.to_str().unwrap().replace('\\', "/")
}

pub fn target(name: &str, backend: &str, url: &str, prompts: &str, extra: &str) -> String {
    format!(
        r#"
        [[targets]]
        name = "{name}"
        backend = "{backend}"
        url = "{url}"
        model = "m"
        rate = 0.001
        {extra}
        canary = {{ interval = "20ms", max_tokens = 64, prompts = "{prompts}" }}
        "#
    )
}

pub fn checks(s: &Scrape, target: &str, result: &str) -> f64 {
    s.sum(
        "inferprobe_canary_checks_total",
        &[("target", target), ("result", result)],
    )
}

pub fn invalid(s: &Scrape, target: &str, reason: &str) -> f64 {
    s.sum(
        "inferprobe_canary_invalid_outputs_total",
        &[("target", target), ("reason", reason)],
    )
}

/// `get_weather`, named in `tool_choice`.
pub fn named_weather() -> String {
    line(
        "Weather?",
        &[WEATHER],
        serde_json::json!({"type": "function", "function": {"name": "get_weather"}}),
    )
}

/// A prompt line offering `tools` with `tool_choice` = `choice`.
pub fn line(prompt: &str, tools: &[&str], choice: serde_json::Value) -> String {
    format!(
        r#"{{"prompt": "{prompt}", "tools": [{}], "tool_choice": {choice}}}"#,
        tools.join(", ")
    )
}
