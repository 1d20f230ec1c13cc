//! End to end through the daemon, against scripted servers (`common::replay`, one event per
//! HTTP chunk, a known gap apart): the dialects and failure framings real servers send, each
//! measured or categorized the way a pager can trust.
//!
//! - hidden reasoning billed but never streamed does not shrink TPOT;
//! - without usage, the tokenizer counts reasoning and tool calls, not only the answer;
//! - a declared abort, llama.cpp's `error:` lines, a 200 JSON error body and an Anthropic
//!   error event with non-JSON data are the server's errors (`stream_error_event`);
//! - a stream cut before its first token is `stream_interrupted`, not `empty_response`;
//! - Mistral's content arrays and OpenAI refusals are healthy answers.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::replay::{Capture, serve};
use common::{Scrape, start_daemon};
use inferprobe::prompt::TokenCounter;
use serde_json::{Value, json};

/// The gap before every event the scripted servers write.
const GAP: Duration = Duration::from_millis(25);

fn tokenizer_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer/tiny-bpe.json")
}

fn sse(value: &Value) -> String {
    format!("data: {value}\n\n")
}

fn chat(delta: Value, finish: Option<&str>) -> String {
    sse(&json!({
        "object": "chat.completion.chunk", "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }))
}

fn usage(completion_tokens: u64) -> String {
    sse(&json!({
        "object": "chat.completion.chunk", "model": "m", "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": completion_tokens},
    }))
}

const DONE: &str = "data: [DONE]\n\n";
const REASONING: [&str; 6] = ["Let", " me", " think", " about", " the", " question"];
const ANSWER: [&str; 2] = ["The", " answer"];
const TOOL: [&str; 3] = ["get_weather", "{\"city\":", " \"Paris\"}"];

/// 1,000 tokens billed, 8 streamed: an o-series model's hidden reasoning.
fn hidden_reasoning() -> String {
    let mut body = chat(json!({"role": "assistant", "content": ""}), None);
    for i in 0..8 {
        body += &chat(json!({ "content": format!(" w{i}") }), None);
    }
    body += &chat(json!({}), Some("stop"));
    body + &usage(1000) + DONE
}

/// Streamed reasoning, then the answer; no usage.
fn reasoning_without_usage() -> String {
    let mut body = chat(json!({"role": "assistant", "content": ""}), None);
    for piece in REASONING {
        body += &chat(json!({ "reasoning_content": piece }), None);
    }
    for piece in ANSWER {
        body += &chat(json!({ "content": piece }), None);
    }
    body + &chat(json!({}), Some("stop")) + DONE
}

/// Only a tool call; no usage.
fn tool_call_without_usage() -> String {
    let mut body = chat(json!({"role": "assistant", "content": null}), None);
    body += &chat(
        json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": TOOL[0], "arguments": ""}}]}),
        None,
    );
    for piece in &TOOL[1..] {
        body += &chat(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            None,
        );
    }
    body + &chat(json!({}), Some("tool_calls")) + DONE
}

fn aborted() -> String {
    chat(json!({"role": "assistant", "content": ""}), None)
        + &chat(json!({"content": "Hel"}), None)
        + &chat(json!({"content": ""}), Some("abort"))
        + &usage(1)
        + DONE
}

fn llama_cpp_error_line() -> String {
    sse(&json!({"choices": [{"index": 0, "text": " a", "finish_reason": null}]}))
        + "error: {\"code\":500,\"message\":\"llama_decode failed\",\"type\":\"server_error\"}\n\n"
        + DONE
}

fn cut_before_first_token() -> String {
    chat(json!({"role": "assistant", "content": ""}), None)
}

fn mistral_content_arrays() -> String {
    let thinking = |text: &str| {
        chat(
            json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": text}]}]}),
            None,
        )
    };
    chat(json!({"role": "assistant", "content": ""}), None)
        + &thinking("Hmm")
        + &thinking(", easy.")
        + &chat(json!({"content": [{"type": "text", "text": "Yes"}]}), None)
        + &chat(json!({"content": "."}), Some("stop"))
        + &usage(4)
        + DONE
}

fn refusal() -> String {
    chat(
        json!({"role": "assistant", "content": null, "refusal": ""}),
        None,
    ) + &chat(json!({"refusal": "I can't help with that."}), None)
        + &chat(json!({}), Some("stop"))
        + &usage(7)
        + DONE
}

fn json_error_body() -> Capture {
    Capture {
        status_line: "HTTP/1.1 200 OK".into(),
        headers: vec!["content-type: application/json".into()],
        body: br#"{"object":"error","message":"The model `m` does not exist.","type":"NotFoundError","param":null,"code":404}"#.to_vec(),
    }
}

fn anthropic_error_not_json() -> String {
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n\
     event: error\ndata: upstream connect error or disconnect/reset before headers\n\n"
        .into()
}

struct Case {
    name: &'static str,
    capture: Capture,
    extra: String,
}

fn case(name: &'static str, body: String, extra: &str) -> Case {
    Case {
        name,
        capture: Capture::stream(&body),
        extra: extra.into(),
    }
}

/// One daemon, one scripted server per case; the scrape once every case has 3 probes, and
/// the status page then (it shows each failure's cause, as the log line does).
async fn run(cases: Vec<Case>) -> (Scrape, String) {
    let mut toml = String::from(
        "seed = 3\n[defaults]\nmodel = \"m\"\nrate = 6\nmax_concurrency = 2\n\
         ttft_timeout = \"3s\"\nstall_timeout = \"3s\"\nrequest_timeout = \"8s\"\n",
    );
    let mut names = Vec::new();
    for case in cases {
        let addr = serve(case.capture, GAP).await;
        toml += &format!(
            "[[targets]]\nname = \"{}\"\nurl = \"http://{addr}\"\n{}\n",
            case.name, case.extra
        );
        names.push(case.name);
    }
    let daemon = start_daemon(&toml).await;
    let scrape = daemon
        .wait_for(Duration::from_secs(40), |s| {
            names.iter().all(|t| s.requests(t) >= 3.0)
        })
        .await;
    let page = daemon.get("/", None).await.text().await.unwrap();
    daemon.stop().await;
    (scrape, page)
}

fn assert_all(s: &Scrape, target: &str, category: Option<&str>) {
    let requests = s.requests(target);
    assert!(requests >= 3.0, "{target}");
    match category {
        Some(category) => {
            assert_eq!(s.errors(target, category), requests, "{target}: {}", s.text);
        }
        None => assert_eq!(s.successes(target), requests, "{target}: {}", s.text),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_that_count_only_what_arrived() {
    let tokenizer = format!("tokenizer = \"{}\"", tokenizer_path().display());
    let (s, _) = run(vec![
        case("hidden", hidden_reasoning(), ""),
        case("reasoning", reasoning_without_usage(), &tokenizer),
        case("tool", tool_call_without_usage(), &tokenizer),
    ])
    .await;
    for target in ["hidden", "reasoning", "tool"] {
        assert_all(&s, target, None);
    }

    // 8 content chunks GAP apart: TPOT is one GAP, however many tokens were billed.
    let (sum, count) = s.histogram("inferprobe_time_per_output_token_seconds", "hidden");
    let tpot = sum / count;
    assert!(
        tpot >= 0.8 * GAP.as_secs_f64(),
        "TPOT {tpot} s; billed tokens leaked in"
    );
    assert!(tpot < 4.0 * GAP.as_secs_f64(), "TPOT {tpot} s");
    let billed = s.sum("inferprobe_output_tokens_total", &[("target", "hidden")]);
    assert_eq!(
        billed,
        1000.0 * s.successes("hidden"),
        "output tokens stay billed"
    );

    // Without usage: every generated text is counted by the tokenizer.
    let counter = TokenCounter::load(&tokenizer_path()).unwrap();
    let count = |pieces: &[&str]| counter.count(&pieces.concat()).unwrap() as f64;
    for (target, expected) in [
        ("reasoning", count(&ANSWER) + count(&REASONING)),
        ("tool", count(&TOOL)),
    ] {
        let (sum, n) = s.histogram("inferprobe_request_output_tokens", target);
        assert_eq!(sum / n, expected, "{target}: output tokens per probe");
        // TPOT and ITL stay per streamed event: the mean of the ITL observations.
        let (itl_sum, itl_n) = s.histogram("inferprobe_inter_token_latency_seconds", target);
        let (tpot_sum, tpot_n) = s.histogram("inferprobe_time_per_output_token_seconds", target);
        let (mean_itl, mean_tpot) = (itl_sum / itl_n, tpot_sum / tpot_n);
        assert!(
            (mean_itl - mean_tpot).abs() < 1e-9,
            "{target}: {mean_itl} vs {mean_tpot}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_land_where_they_belong() {
    let (s, page) = run(vec![
        // Even a finish_reasons check that would accept it cannot make an abort a success.
        case(
            "abort",
            aborted(),
            "validate = { finish_reasons = [\"abort\", \"stop\"] }",
        ),
        case(
            "llama-error",
            llama_cpp_error_line(),
            "backend = \"openai\"",
        ),
        case("cut", cut_before_first_token(), ""),
        Case {
            name: "json-error",
            capture: json_error_body(),
            extra: String::new(),
        },
        case(
            "anthropic-error",
            anthropic_error_not_json(),
            "backend = \"anthropic\"",
        ),
    ])
    .await;
    assert_all(&s, "abort", Some("stream_error_event"));
    assert_all(&s, "llama-error", Some("stream_error_event"));
    assert_all(&s, "cut", Some("stream_interrupted"));
    assert_all(&s, "json-error", Some("stream_error_event"));
    assert_all(&s, "anthropic-error", Some("stream_error_event"));
    // The server's own words reach the log line (and the status page).
    for message in [
        "ended the generation with finish_reason",
        "llama_decode failed",
        "does not exist",
        "upstream connect error",
        "before its first token",
    ] {
        assert!(page.contains(message), "{message}\n{page}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_dialects_are_successes() {
    let (s, _) = run(vec![
        case("mistral", mistral_content_arrays(), ""),
        case("refusal", refusal(), ""),
    ])
    .await;
    assert_all(&s, "mistral", None);
    assert_all(&s, "refusal", None);
    // TTFT on the first thinking chunk: the role chunk is the first event, thinking the second.
    let (sum, n) = s.histogram("inferprobe_time_to_first_token_seconds", "mistral");
    assert!(sum / n >= 2.0 * GAP.as_secs_f64(), "TTFT {}", sum / n);
    assert!(sum / n < 3.0 * GAP.as_secs_f64() + 0.2, "TTFT {}", sum / n);
}
