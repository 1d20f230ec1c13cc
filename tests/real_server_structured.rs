//! Structured-output and tool-call checks against a real llama-server (`--jinja`), with
//! the tiny random-weight model. Ignored by `cargo test`; scripts/real-server/test.sh runs
//! it (.ci/run does).
//!
//! What this server does with the tiny model (llama.cpp as setup.sh builds it): a
//! `response_format` with a schema fails its grammar sampler ("Failed to initialize
//! samplers", HTTP 400: the tiny vocabulary cannot spell the grammar); tools are ignored by a
//! template without tool support, so `required` and a named `tool_choice` (which
//! llama-server takes only as a string) get text until `max_tokens`. The canary must see
//! each as an answer an agent cannot use, with its reason, and never call one unscored.

use crate::common;

use std::time::Duration;

use common::{llama, start_daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn structured_checks_judge_a_real_servers_answers() {
    let server = llama::start(&llama::tiny(), 2048, &["--jinja"]).await;
    let dir = tempfile::tempdir().unwrap();
    let weather = r#"{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}"#;
    let lines = [
        r#"{"prompt": "capital of France", "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": {"type": "object", "properties": {"capital": {"type": "string"}}, "required": ["capital"]}}}}"#.to_owned(),
        format!(r#"{{"prompt": "What is the weather in Paris?", "tools": [{weather}], "tool_choice": "required"}}"#),
        format!(r#"{{"prompt": "Weather in Paris, please", "tools": [{weather}], "tool_choice": {{"type": "function", "function": {{"name": "get_weather"}}}}}}"#),
    ];
    let prompts = dir.path().join("structured.jsonl");
    std::fs::write(&prompts, lines.join("\n")).unwrap();
    let toml = format!(
        r#"
        [[targets]]
        name = "llama"
        backend = "openai-chat"
        url = "{}"
        model = "tiny"
        rate = 0.001
        canary = {{ interval = "100ms", max_tokens = 32, structured_max_tokens = 32, prompts = "{}" }}
        "#,
        server.url,
        prompts.display()
    );
    // `structured_max_tokens = 32`: the tool prompts run to the limit (text, never a call),
    // and 512 tokens of that each would only make the run longer.
    let daemon = start_daemon(&toml).await;
    let count = |s: &common::Scrape, name: &str, labels: &[(&str, &str)]| {
        let mut all = vec![("target", "llama")];
        all.extend_from_slice(labels);
        s.sum(name, &all)
    };
    let s = daemon
        .wait_for(Duration::from_secs(120), |s| {
            count(s, "inferprobe_canary_structured_checks_total", &[]) >= 30.0
        })
        .await;
    let page = daemon.get("/", None).await.text().await.unwrap();
    daemon.stop().await;
    let checks = "inferprobe_canary_checks_total";
    let invalid = "inferprobe_canary_invalid_outputs_total";
    let results = ["match", "wrong_answer", "invalid_output", "unscored"];
    let reasons = [
        "rejected",
        "truncated",
        "not_json",
        "schema",
        "no_tool_call",
        "wrong_tool",
        "refused",
    ];
    for r in results {
        eprintln!("llama-server: {r} {}", count(&s, checks, &[("result", r)]));
    }
    for r in reasons {
        eprintln!(
            "llama-server: invalid {r} {}",
            count(&s, invalid, &[("reason", r)])
        );
    }
    let structured = count(&s, "inferprobe_canary_structured_checks_total", &[]);
    assert_eq!(
        count(&s, checks, &[("result", "unscored")]),
        0.0,
        "every check scored"
    );
    let judged: f64 = ["match", "wrong_answer", "invalid_output"]
        .iter()
        .map(|r| count(&s, checks, &[("result", r)]))
        .sum();
    assert_eq!(judged, structured);
    // One prompt in three is the schema the grammar sampler refuses: a third of the checks.
    let rejected = count(&s, invalid, &[("reason", "rejected")]);
    assert!(
        (rejected - structured / 3.0).abs() <= 1.0,
        "rejected {rejected} of {structured}"
    );
    assert!(page.contains("HTTP 400"), "the refusal is quoted");
    // Counted under the capability that broke: the JSON answer's.
    assert_eq!(
        count(
            &s,
            invalid,
            &[("reason", "rejected"), ("capability", "json")]
        ),
        rejected
    );
    // The tool prompts: text until max_tokens, never a call.
    let cut = count(&s, invalid, &[("reason", "truncated")])
        + count(&s, invalid, &[("reason", "no_tool_call")]);
    assert!(
        (cut - 2.0 * structured / 3.0).abs() <= 1.0,
        "tool prompts: {cut} of {structured}"
    );
}
