//! Every backend end to end against the simulator speaking its wire format: a normal
//! stream is measured (tokens, TTFT only where it exists), the format's own error form
//! lands in `stream_error_event`, and validation, LoRA models, datasets and the tokenizer
//! fallback work through the whole daemon.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{Scrape, start_daemon, start_sim};
use inferprobe::prompt::TokenCounter;
use inferprobe::sim::SimConfig;

/// (backend, streams, reports token usage)
const BACKENDS: &[(&str, bool, bool)] = &[
    ("openai", true, true),
    ("openai-chat", true, true),
    ("tgi", true, true),
    ("tensorrt-llm", true, false),
    ("deepspeed-mii", false, true),
    ("openai-embeddings", false, false),
    ("openai-audio", true, true),
    ("anthropic", true, true),
    ("openai-responses", true, true),
];

fn sim() -> SimConfig {
    SimConfig {
        ttft: Duration::from_millis(30),
        itl: Duration::from_millis(3),
        ..SimConfig::default()
    }
}

fn header() -> String {
    "seed = 11\n[defaults]\nmodel = \"m\"\nrate = 10\noutput_tokens = 6\ninput_tokens = 20\naudio_seconds = 0.5\n".into()
}

fn target(name: &str, backend: &str, url: &str, extra: &str) -> String {
    format!("[[targets]]\nname = \"{name}\"\nbackend = \"{backend}\"\nurl = \"{url}\"\n{extra}\n")
}

async fn run_until(toml: &str, names: &[String], successes: f64, errors: f64) -> Scrape {
    let daemon = start_daemon(toml).await;
    let scrape = daemon
        .wait_for(Duration::from_secs(30), |s| {
            names
                .iter()
                .all(|t| s.successes(t) >= successes && s.all_errors(t) >= errors)
        })
        .await;
    daemon.stop().await;
    scrape
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_backend_measures_a_normal_response() {
    let sim = start_sim(sim()).await;
    let mut toml = header();
    for (backend, _, _) in BACKENDS {
        toml += &target(backend, backend, &sim.url(), "");
    }
    let names: Vec<String> = BACKENDS.iter().map(|b| b.0.to_owned()).collect();
    let s = run_until(&toml, &names, 4.0, 0.0).await;

    for &(backend, streams, usage) in BACKENDS {
        assert_eq!(s.all_errors(backend), 0.0, "{backend}:\n{}", s.text);
        let successes = s.successes(backend);
        let (ttft_sum, ttft_count) = s.histogram("inferprobe_time_to_first_token_seconds", backend);
        if streams {
            assert_eq!(ttft_count, successes, "{backend}: one TTFT per success");
            let ttft = ttft_sum / ttft_count;
            assert!((0.03..0.09).contains(&ttft), "{backend}: TTFT {ttft}");
            let (_, itl_count) = s.histogram("inferprobe_inter_token_latency_seconds", backend);
            assert_eq!(itl_count, 5.0 * successes, "{backend}: 6 tokens, 5 gaps");
        } else {
            assert_eq!(ttft_count, 0.0, "{backend}: no stream, no TTFT");
        }
        let output = s.sum("inferprobe_output_tokens_total", &[("target", backend)]);
        match backend {
            "openai-embeddings" => assert_eq!(output, 0.0),
            // Triton reports no usage: counted from events (one token each here).
            _ => assert_eq!(
                output,
                6.0 * successes,
                "{backend}: output tokens (usage: {usage})"
            ),
        }
        let prompts = s.histogram("inferprobe_request_prompt_tokens", backend).1;
        assert_eq!(
            prompts,
            if usage || backend == "openai-embeddings" {
                successes
            } else {
                0.0
            },
            "{backend}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_backend_reports_its_own_error_form() {
    let sim = start_sim(sim()).await;
    let mut toml = header();
    let forced = "headers = { \"x-inferprobe-fault\" = \"error_event\" }";
    for (backend, _, _) in BACKENDS {
        toml += &target(backend, backend, &sim.url(), forced);
    }
    let names: Vec<String> = BACKENDS.iter().map(|b| b.0.to_owned()).collect();
    let s = run_until(&toml, &names, 0.0, 3.0).await;
    for (backend, _, _) in BACKENDS {
        let requests = s.requests(backend);
        assert_eq!(
            s.errors(backend, "stream_error_event"),
            requests,
            "{backend}:\n{}",
            s.text
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_lora_models_and_tokenizer_fallback() {
    let sim = start_sim(sim()).await;
    let tokenizer =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer/tiny-bpe.json");
    let tokenizer = tokenizer.to_str().unwrap();
    let mut toml = header();
    toml += &target(
        "regex-fails",
        "openai-chat",
        &sim.url(),
        "validate = { regex = \"^never$\" }",
    );
    toml += &target(
        "all-checks",
        "openai",
        &sim.url(),
        "validate = { regex = \"probe\", output_tokens = true, finish_reasons = [\"length\"], model = true }",
    );
    toml += &target(
        "lora",
        "openai-chat",
        &sim.url(),
        "models = [\"base\", \"adapter-1\", \"adapter-2\"]\nvalidate = { model = true }",
    );
    toml += &target(
        "counted",
        "tensorrt-llm",
        &sim.url(),
        &format!("tokenizer = \"{tokenizer}\""),
    );
    let names: Vec<String> = ["all-checks", "lora", "counted"].map(String::from).to_vec();
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            s.requests("regex-fails") >= 3.0 && names.iter().all(|t| s.successes(t) >= 4.0)
        })
        .await;
    daemon.stop().await;

    assert_eq!(
        s.errors("regex-fails", "validation"),
        s.requests("regex-fails")
    );
    for t in &names {
        assert_eq!(s.all_errors(t), 0.0, "{t}:\n{}", s.text);
    }
    // The simulator's 6-token text, counted by the tokenizer rather than by events.
    let counter = TokenCounter::load(Path::new(tokenizer)).unwrap();
    let per_probe = counter
        .count(" probe token stream latency model server")
        .unwrap();
    let counted = s.sum("inferprobe_output_tokens_total", &[("target", "counted")]);
    assert_eq!(counted, per_probe as f64 * s.successes("counted"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datasets_set_prompts_and_output_lengths() {
    let sim = start_sim(sim()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prompts.jsonl");
    std::fs::write(&path, "{\"prompt\": \"one two three\", \"output_tokens\": 3}\n{\"prompt\": \"four five\", \"output_tokens\": 5}\n").unwrap();
    let toml = header()
        + &target(
            "data",
            "openai",
            &sim.url(),
            &format!("dataset = \"{}\"", path.display()),
        );
    let s = run_until(&toml, &["data".into()], 10.0, 0.0).await;
    let successes = s.successes("data");
    let (output_sum, _) = s.histogram("inferprobe_request_output_tokens", "data");
    let three = s.sum(
        "inferprobe_request_output_tokens_bucket",
        &[("target", "data"), ("le", "5.0")],
    );
    let two = s.sum(
        "inferprobe_request_output_tokens_bucket",
        &[("target", "data"), ("le", "2.0")],
    );
    assert_eq!(two, 0.0, "every probe asks for 3 or 5 tokens");
    assert_eq!(three, successes);
    let fives = (output_sum - 3.0 * successes) / 2.0;
    assert!(
        fives > 0.0 && fives < successes,
        "both entries drawn: {fives} of {successes}"
    );
    // A nonce and the prompt's three or two words, as the simulator counts them.
    let (prompt_sum, _) = s.histogram("inferprobe_request_prompt_tokens", "data");
    assert_eq!(prompt_sum, 4.0 * (successes - fives) + 3.0 * fives);
}
