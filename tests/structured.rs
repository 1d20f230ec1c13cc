//! Structured-output and tool-call checks (issue 26): the canary judges JSON answers and
//! tool calls as an agent would, on every API that can ask for them, against the
//! simulator's schema-following answers and its structured faults, and against replayed
//! streams of what servers were seen to send.

use crate::common;

use std::time::Duration;

use common::replay::{Capture, serve};
use common::structured::{checks, invalid, json_line, named_line, prompts, required_line, target};
use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::SimConfig;
use serde_json::{Value, json};

fn sim_config() -> SimConfig {
    SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    }
}

/// Item 1, 2, 6: each API spells the request its own way, and the simulator's answers
/// (tool calls streamed as `tool_calls`, `tool_use` or `function_call` fragments; JSON
/// text) validate, `expect_json` included, on each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_structures_match_on_every_api() {
    let sim = start_sim(sim_config()).await;
    let dir = tempfile::tempdir().unwrap();
    let all = prompts(
        dir.path(),
        "all.jsonl",
        &[json_line(), named_line("Paris"), required_line()],
    );
    let tools = prompts(
        dir.path(),
        "tools.jsonl",
        &[named_line("Paris"), required_line()],
    );
    let json_only = prompts(dir.path(), "json.jsonl", &[json_line()]);
    let url = || sim.url();
    let cases = [
        ("chat", "openai-chat", url(), &all, 3.0),
        ("responses", "openai-responses", url(), &all, 3.0),
        ("anthropic", "anthropic", url(), &tools, 2.0),
        ("completions", "openai", url(), &json_only, 1.0),
        ("tgi", "tgi", url(), &json_only, 1.0),
    ];
    let toml: String = cases
        .iter()
        .map(|(name, backend, url, file, _)| target(name, backend, url, file, ""))
        .collect();
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(60), |s| {
            cases
                .iter()
                .all(|(name, _, _, _, n)| checks(s, name, "match") >= 2.0 * n)
        })
        .await;
    daemon.stop().await;
    for (name, ..) in &cases {
        let bad =
            ["invalid_output", "wrong_answer", "unscored", "diverged"].map(|r| checks(&s, name, r));
        assert_eq!(bad, [0.0; 4], "{name}: invalid, wrong, unscored, diverged");
        let scored = s.sum(
            "inferprobe_canary_structured_checks_total",
            &[("target", name)],
        );
        assert_eq!(scored, checks(&s, name, "match"), "{name}");
    }
}

/// Item 2, 6: every broken structure lands in its own reason, with the output and the
/// schema path quoted on the status page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_structure_has_its_reason() {
    let sim = start_sim(sim_config()).await;
    let dir = tempfile::tempdir().unwrap();
    let named = prompts(dir.path(), "named.jsonl", &[named_line("Paris")]);
    let required = prompts(dir.path(), "required.jsonl", &[required_line()]);
    let json = prompts(dir.path(), "json.jsonl", &[json_line()]);
    let chat = sim.url();
    // (target, prompts, fault, reason, quoted on the page)
    let cases = [
        (
            "wrong_type",
            &named,
            "wrong_argument_type",
            "schema",
            "schema path /type",
        ),
        (
            "as_text",
            &required,
            "tool_call_as_text",
            "no_tool_call",
            "as text in `content`",
        ),
        (
            "loop",
            &json,
            "whitespace_loop",
            "truncated",
            "hit its length limit",
        ),
        ("refused", &json, "schema_rejected", "rejected", "HTTP 400"),
    ];
    let mut toml: String = cases
        .iter()
        .map(|(name, file, fault, ..)| {
            let headers = format!(r#"headers = {{ "x-inferprobe-fault" = "{fault}" }}"#);
            target(name, "openai-chat", &chat, file, &headers)
        })
        .collect();
    // Split into a fragment per character, the arguments still validate.
    toml += &target(
        "split",
        "openai-chat",
        &chat,
        &named,
        r#"headers = { "x-inferprobe-fault" = "split_arguments" }"#,
    );
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(60), |s| {
            cases
                .iter()
                .all(|(name, _, _, reason, _)| invalid(s, name, reason) >= 3.0)
                && checks(s, "split", "match") >= 3.0
        })
        .await;
    let page = daemon.get("/", None).await.text().await.unwrap();
    daemon.stop().await;
    for (name, _, _, reason, quoted) in &cases {
        let all: f64 = [
            "rejected",
            "truncated",
            "not_json",
            "schema",
            "no_tool_call",
            "wrong_tool",
        ]
        .iter()
        .map(|r| invalid(&s, name, r))
        .sum();
        assert_eq!(all, invalid(&s, name, reason), "{name}: only {reason}");
        assert_eq!(checks(&s, name, "invalid_output"), all, "{name}");
        assert_eq!(checks(&s, name, "match"), 0.0, "{name}");
        assert!(page.contains(quoted), "{name}: {quoted:?} not on the page");
    }
    assert!(
        page.contains("&quot;false&quot;") || page.contains("\"false\""),
        "the output is quoted"
    );
    assert_eq!(checks(&s, "split", "invalid_output"), 0.0);
}

/// Item 2: a valid call whose known value is wrong is a wrong answer, not invalid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_call_with_a_wrong_value_is_a_wrong_answer() {
    let sim = start_sim(sim_config()).await;
    let dir = tempfile::tempdir().unwrap();
    let lyon = prompts(dir.path(), "lyon.jsonl", &[named_line("Lyon")]);
    let url = sim.url();
    let daemon = start_daemon(&target("t", "openai-chat", &url, &lyon, "")).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            checks(s, "t", "wrong_answer") >= 3.0
        })
        .await;
    let page = daemon.get("/", None).await.text().await.unwrap();
    daemon.stop().await;
    assert_eq!(
        checks(&s, "t", "invalid_output") + checks(&s, "t", "match"),
        0.0
    );
    assert!(page.contains("/city"), "{page}");
}

/// A chat stream of one tool call: `name`, then the argument fragments, then `finish`.
fn call_stream(name: &str, fragments: &[&str], finish: &str) -> Capture {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let mut body = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    body += &chunk(
        json!({"tool_calls": [{"index": 0, "id": "c", "type": "function", "function": {"name": name, "arguments": ""}}]}),
        Value::Null,
    );
    for f in fragments {
        body += &chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}),
            Value::Null,
        );
    }
    body += &chunk(json!({}), Value::from(finish));
    body += "data: [DONE]\n\n";
    Capture::stream(&body)
}

/// Item 2: arguments cut mid-string are `not_json`; a call of an undeclared function is
/// `wrong_tool`; fragments of one call across many chunks are assembled before judging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_calls_are_judged_whole() {
    let dir = tempfile::tempdir().unwrap();
    let named = prompts(dir.path(), "named.jsonl", &[named_line("Paris")]);
    let cut = || call_stream("get_weather", &["{\"ci", "ty\": \"Par"], "tool_calls");
    let other = || call_stream("delete_files", &["{}"], "tool_calls");
    let cases: [(&str, &dyn Fn() -> Capture, &str); 2] =
        [("cut", &cut, "not_json"), ("other", &other, "wrong_tool")];
    let mut toml = String::new();
    for (name, fragments, _) in &cases {
        let addr = serve(fragments(), Duration::ZERO).await;
        toml += &target(name, "openai-chat", &format!("http://{addr}"), &named, "");
    }
    let whole = call_stream(
        "get_weather",
        &["{\"", "city", "\": ", "\"Pa", "ris\"", "}"],
        "tool_calls",
    );
    let addr = serve(whole, Duration::ZERO).await;
    toml += &target(
        "whole",
        "openai-chat",
        &format!("http://{addr}"),
        &named,
        "",
    );
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            cases
                .iter()
                .all(|(name, _, reason)| invalid(s, name, reason) >= 3.0)
                && checks(s, "whole", "match") >= 3.0
        })
        .await;
    daemon.stop().await;
    assert_eq!(checks(&s, "whole", "invalid_output"), 0.0);
    assert_eq!(
        checks(&s, "cut", "match") + checks(&s, "other", "match"),
        0.0
    );
}

/// Item 3: `canary.structured = true` adds the built-in structured prompts, the ones the
/// backend can send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_structured_prompts_run_where_they_can_be_sent() {
    let sim = start_sim(sim_config()).await;
    let toml = format!(
        r#"
        [[targets]]
        name = "chat"
        backend = "openai-chat"
        url = "{0}"
        model = "m"
        rate = 0.001
        canary = {{ interval = "10ms", structured = true }}
        [[targets]]
        name = "anthropic"
        backend = "anthropic"
        url = "{0}"
        model = "m"
        rate = 0.001
        canary = {{ interval = "10ms", structured = true }}
        "#,
        sim.url()
    );
    let daemon = start_daemon(&toml).await;
    // chat: 8 text prompts and 3 structured; anthropic (no logprobs): the 2 tool prompts.
    let structured = |s: &Scrape, t: &str| {
        s.sum(
            "inferprobe_canary_structured_checks_total",
            &[("target", t)],
        )
    };
    let s = daemon
        .wait_for(Duration::from_secs(60), |s| {
            checks(s, "chat", "match") >= 22.0 && structured(s, "anthropic") >= 4.0
        })
        .await;
    daemon.stop().await;
    assert_eq!(checks(&s, "chat", "invalid_output"), 0.0);
    assert_eq!(checks(&s, "anthropic", "invalid_output"), 0.0);
    let all = [
        "match",
        "diverged",
        "wrong_answer",
        "invalid_output",
        "unscored",
    ]
    .iter()
    .map(|r| checks(&s, "chat", r))
    .sum::<f64>();
    let share = structured(&s, "chat") / all;
    assert!((0.15..=0.4).contains(&share), "3 of 11 prompts: {share}");
    assert_eq!(
        structured(&s, "anthropic"),
        checks(&s, "anthropic", "match")
    );
}

/// Item 4: a latency target with tools: TTFT is the first tool-call delta, and the
/// arguments are the output tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latency_probe_with_tools_times_the_call() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(100),
        itl: Duration::from_millis(10),
        ..SimConfig::default()
    })
    .await;
    let toml = format!(
        r#"
        [[targets]]
        name = "agent"
        backend = "openai-chat"
        url = "{}"
        model = "m"
        rate = 20
        output_tokens = 64
        tools = [{{ type = "function", function = {{ name = "get_weather", parameters = {{ type = "object", properties = {{ city = {{ type = "string" }} }} }} }} }}]
        tool_choice = "required"
        "#,
        sim.url()
    );
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| s.successes("agent") >= 10.0)
        .await;
    daemon.stop().await;
    let (sum, count) = s.histogram("inferprobe_time_to_first_token_seconds", "agent");
    let ttft = sum / count;
    assert!((0.095..0.3).contains(&ttft), "TTFT {ttft}");
    // `{"city":"sim"}`: 14 characters, 4 simulated tokens, billed and counted.
    let tokens = s.sum("inferprobe_output_tokens_total", &[("target", "agent")]);
    assert_eq!(tokens / s.successes("agent"), 4.0, "{tokens}");
    assert_eq!(s.all_errors("agent"), 0.0);
}
