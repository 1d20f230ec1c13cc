//! What the canary's structured checks send (issues 26 and 32): the request bodies a
//! recording server received for each backend, each API's own spelling, and what
//! `inferprobe check` says of a structured prompt (or refuses) before anything is sent.

use crate::common;

use common::process::inferprobe;

use std::time::Duration;

use common::replay::{Capture, Requests, serve_recording};
use common::start_daemon;
use common::structured::{
    WEATHER, json_line, line, named_line, named_weather, prompts, required_line, target,
};
use serde_json::{Value, json};

/// The JSON bodies a recording server received.
fn bodies(requests: &Requests) -> Vec<Value> {
    let requests = requests.lock().unwrap();
    requests
        .iter()
        .filter_map(|r| r.split_once("\r\n\r\n"))
        .filter_map(|(_, body)| serde_json::from_str(body).ok())
        .collect()
}

/// The first request body a target sent, with `file` as its canary prompts.
async fn sent(backend: &str, file: &str, extra: &str) -> Value {
    sent_toml(&target("t", backend, "http://127.0.0.1:9", file, extra)).await
}

/// Item 2 and 3: a structured prompt sends no greedy settings (a reasoning model refuses
/// `temperature: 0`), `extra_body` wins, and it has its own budget; a text prompt is still
/// greedy and seeded, with the short one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_prompts_send_what_the_user_set_and_their_own_budget() {
    let dir = tempfile::tempdir().unwrap();
    let json = prompts(dir.path(), "json.jsonl", &[json_line()]);
    let text = prompts(
        dir.path(),
        "text.jsonl",
        &[r#"{"prompt": "2+2=", "expect": "4"}"#.into()],
    );
    let extra = r#"extra_body = { temperature = 1.0, reasoning_effort = "low" }"#;
    let body = sent("openai-chat", &json, extra).await;
    assert_eq!(body["temperature"], json!(1.0), "{body}");
    assert_eq!(body["reasoning_effort"], "low", "{body}");
    assert!(
        body.get("seed").is_none() && body.get("logprobs").is_none(),
        "{body}"
    );
    assert_eq!(body["max_tokens"], 512, "{body}");
    let body = sent("openai-chat", &text, extra).await;
    assert_eq!(
        (&body["temperature"], &body["max_tokens"]),
        (&json!(0), &json!(64)),
        "{body}"
    );
    assert!(body.get("seed").is_some(), "{body}");
    let body = sent("openai-chat", &json, "").await;
    assert!(body.get("temperature").is_none(), "{body}");
    let budget = target("t", "openai-chat", "http://127.0.0.1:9", &json, "").replace(
        "max_tokens = 64",
        "max_tokens = 64, structured_max_tokens = 1024",
    );
    let body = sent_toml(&budget).await;
    assert_eq!(body["max_tokens"], 1024, "{body}");
}

/// The first request body the daemon sent with `toml`, its URL pointed at a recorder.
async fn sent_toml(toml: &str) -> Value {
    let (addr, requests) =
        serve_recording(Capture::stream("data: [DONE]\n\n"), Duration::ZERO).await;
    let daemon = start_daemon(&toml.replace("http://127.0.0.1:9", &format!("http://{addr}"))).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while bodies(&requests).is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    daemon.stop().await;
    bodies(&requests).into_iter().next().expect("a request")
}

fn check(toml: &str) -> (bool, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, toml).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args(["check", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// Item 2 and 3 in `check`: Claude's extended thinking refuses a forced tool call, so such
/// a prompt is refused (and the built-in set keeps the sendable ones); a budget that cannot
/// hold the smallest answer is a warning.
#[test]
fn check_refuses_a_forced_call_with_thinking_and_warns_of_a_short_budget() {
    let dir = tempfile::tempdir().unwrap();
    let named = prompts(dir.path(), "named.jsonl", &[named_weather()]);
    let thinking = r#"extra_body = { thinking = { type = "enabled", budget_tokens = 1024 } }"#;
    let (ok, _, stderr) = check(&target(
        "t",
        "anthropic",
        "http://127.0.0.1:9",
        &named,
        thinking,
    ));
    assert!(!ok && stderr.contains("extended thinking"), "{stderr}");
    let (ok, _, stderr) = check(&target("t", "anthropic", "http://127.0.0.1:9", &named, ""));
    assert!(ok, "{stderr}");
    let json = prompts(dir.path(), "json.jsonl", &[json_line()]);
    let short = target("t", "openai-chat", "http://127.0.0.1:9", &json, "").replace(
        "max_tokens = 64",
        "max_tokens = 64, structured_max_tokens = 4",
    );
    let (ok, stdout, stderr) = check(&short);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("4 tokens each"), "{stdout}");
    assert!(
        stderr.contains("structured_max_tokens 4 cannot hold prompt 1's smallest answer"),
        "{stderr}"
    );
    let (_, _, stderr) = check(&target("t", "openai-chat", "http://127.0.0.1:9", &json, ""));
    assert!(!stderr.contains("cannot hold"), "{stderr}");
}

/// Item 9: `strict` on a function is sent where the API takes it (it was dropped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_functions_are_sent_strict() {
    let dir = tempfile::tempdir().unwrap();
    let strict = r#"{"type": "function", "function": {"name": "get_weather", "strict": true, "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}}"#;
    let file = prompts(
        dir.path(),
        "strict.jsonl",
        &[line("Weather?", &[strict], json!("required"))],
    );
    let body = sent("openai-chat", &file, "").await;
    assert_eq!(
        body["tools"][0]["function"]["strict"],
        json!(true),
        "{body}"
    );
    let body = sent("openai-responses", &file, "").await;
    assert_eq!(body["tools"][0]["strict"], json!(true), "{body}");
}

/// Item 6: TGI's chat route reads `response_format` as its own grammar and refuses it with
/// tools; `tgi-chat` spells it so (OpenAI's wrapper was a 422 on every check), and `check`
/// refuses the pair, naming the way out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tgi_chat_is_sent_tgis_grammar() {
    let dir = tempfile::tempdir().unwrap();
    let json = prompts(dir.path(), "json.jsonl", &[json_line()]);
    let body = sent("tgi-chat", &json, "").await;
    assert_eq!(body["response_format"]["type"], "json", "{body}");
    assert_eq!(
        body["response_format"]["value"]["required"],
        json!(["country", "capital"]),
        "{body}"
    );
    assert!(
        body["response_format"].get("json_schema").is_none(),
        "{body}"
    );
    assert!(body.get("messages").is_some(), "{body}");
    let named = prompts(dir.path(), "named.jsonl", &[named_weather()]);
    let body = sent("tgi-chat", &named, "").await;
    assert_eq!(
        body["tools"][0]["function"]["name"], "get_weather",
        "{body}"
    );
    let both = prompts(
        dir.path(),
        "both.jsonl",
        &[format!(
            r#"{{"prompt": "x", "tools": [{WEATHER}], "tool_choice": "auto", "response_format": {{"type": "json_object"}}}}"#
        )],
    );
    let (ok, _, stderr) = check(&target("t", "tgi-chat", "http://127.0.0.1:9", &both, ""));
    assert!(!ok && stderr.contains("mutually exclusive"), "{stderr}");
    let (ok, _, stderr) = check(&target("t", "tgi", "http://127.0.0.1:9", &named, ""));
    assert!(!ok && stderr.contains("tgi-chat"), "{stderr}");
}

/// Item 1: `check` refuses what a backend cannot send, naming the key and the way out.
#[test]
fn check_refuses_what_a_backend_cannot_send() {
    let dir = tempfile::tempdir().unwrap();
    let json = prompts(dir.path(), "json.jsonl", &[json_line()]);
    let tools = prompts(dir.path(), "tools.jsonl", &[required_line()]);
    let url = "http://127.0.0.1:9";
    let cases = [
        (
            target("t", "anthropic", url, &json, ""),
            "no `response_format`",
        ),
        (target("t", "tgi", url, &tools, ""), "takes no tools"),
        (
            target("t", "openai", url, &tools, ""),
            "completions API takes no tools",
        ),
        (
            format!(
                "[[targets]]\nname = \"t\"\nbackend = \"tensorrt-llm\"\nurl = \"{url}\"\nmodel = \"m\"\ncanary = {{ structured = true }}\n"
            ),
            "neither a JSON answer nor tools",
        ),
        (
            format!(
                "[[targets]]\nname = \"t\"\nbackend = \"openai-chat\"\nurl = \"{url}\"\nmodel = \"m\"\ntools = [{{ type = \"function\", function = {{ name = \"f\" }} }}]\ntool_choice = {{ type = \"function\", function = {{ name = \"g\" }} }}\n"
            ),
            "targets[0].tool_choice",
        ),
    ];
    for (toml, expected) in cases {
        let path = dir.path().join("c.toml");
        std::fs::write(&path, &toml).unwrap();
        let out = inferprobe(&["check", "--config", path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "accepted:\n{toml}");
        assert!(stderr.contains(expected), "{expected:?} not in: {stderr}");
    }
}

/// Item 1: what each API is sent (recorded by a replaying server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_api_is_sent_its_own_spelling() {
    let dir = tempfile::tempdir().unwrap();
    let named = prompts(dir.path(), "named.jsonl", &[named_line("Paris")]);
    let json_only = prompts(dir.path(), "json.jsonl", &[json_line()]);
    let empty = || Capture::stream("data: [DONE]\n\n");
    type Sent = Box<dyn Fn(&Value) -> bool>;
    let cases: [(&str, &str, Sent); 4] = [
        (
            "anthropic",
            named.as_str(),
            Box::new(|b: &Value| {
                b["tools"][0]["input_schema"]["required"] == json!(["city"])
                    && b["tool_choice"] == json!({"type": "tool", "name": "get_weather"})
            }),
        ),
        (
            "openai-responses",
            named.as_str(),
            Box::new(|b: &Value| {
                b["tools"][0]["name"] == "get_weather"
                    && b["tool_choice"] == json!({"type": "function", "name": "get_weather"})
            }),
        ),
        (
            "openai-responses",
            json_only.as_str(),
            Box::new(|b: &Value| {
                b["text"]["format"]["name"] == "capital"
                    && b["text"]["format"]["schema"]["type"] == "object"
            }),
        ),
        (
            "tgi",
            json_only.as_str(),
            Box::new(|b: &Value| {
                b["parameters"]["grammar"]["type"] == "json"
                    && b["parameters"]["grammar"]["value"]["required"]
                        == json!(["country", "capital"])
            }),
        ),
    ];
    for (backend, file, sent) in cases {
        let (addr, requests) = serve_recording(empty(), Duration::ZERO).await;
        let daemon = start_daemon(&target("t", backend, &format!("http://{addr}"), file, "")).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while bodies(&requests).is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        daemon.stop().await;
        let body = bodies(&requests).into_iter().next().expect("a request");
        assert!(sent(&body), "{backend}: {body}");
        // Judged by its schema alone: no greedy settings (issue 32 item 2).
        let greedy = ["temperature", "seed", "top_logprobs"]
            .iter()
            .any(|k| body.get(k).is_some())
            || body["parameters"].get("do_sample").is_some();
        assert!(!greedy, "{backend}: greedy settings sent: {body}");
    }
}

/// `check` says how a structured canary is scored, and warns when its share of the checks
/// is too small for the alert.
#[test]
fn check_describes_structured_prompts() {
    let dir = tempfile::tempdir().unwrap();
    let all = prompts(
        dir.path(),
        "all.jsonl",
        &[json_line(), named_line("Paris"), required_line()],
    );
    for (interval, warned) in [("60s", false), ("10m", true)] {
        let toml = target("t", "openai-chat", "http://127.0.0.1:9", &all, "").replace(
            r#"interval = "20ms""#,
            &format!(r#"interval = "{interval}""#),
        );
        let path = dir.path().join("c.toml");
        std::fs::write(&path, &toml).unwrap();
        let out = inferprobe(&["check", "--config", path.to_str().unwrap()]);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{stderr}");
        assert!(
            stdout.contains("3 structured (JSON or a tool call) judged by its schema"),
            "{stdout}"
        );
        assert!(!stdout.contains("compared by logprobs"), "{stdout}");
        assert_eq!(
            stderr.contains("InferprobeInvalidOutputs needs 5"),
            warned,
            "{interval}: {stderr}"
        );
    }
}
