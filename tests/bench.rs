//! `inferprobe bench` against the simulator: the summary's numbers agree with the metrics
//! the daemon would export for the same run, and the CLI writes vLLM-shaped results.

use crate::common;

use std::process::Command;
use std::time::Duration;

use clap::Parser;
use common::{Scrape, start_sim};
use inferprobe::Shutdown;
use inferprobe::bench::{self, BenchArgs};
use inferprobe::sim::{Fault, SimConfig};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
}

fn args(extra: &[&str]) -> BenchArgs {
    let mut argv = vec![
        "bench",
        "--model",
        "m",
        "--input-tokens",
        "24",
        "--output-tokens",
        "8",
        "--quiet",
    ];
    argv.extend_from_slice(extra);
    Cli::parse_from(argv).bench
}

async fn run(args: &BenchArgs) -> bench::BenchReport {
    let plan = bench::plan(args).unwrap();
    bench::run(args, plan, &Shutdown::new()).await.unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_agrees_with_the_exported_metrics() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        tokens_per_chunk: 2.into(),
        faults: vec![(Fault::Http429, 0.1), (Fault::Reset, 0.1)],
        seed: Some(3),
        ..SimConfig::default()
    })
    .await;
    let url = sim.url();
    let args = args(&[
        "--url",
        &url,
        "--backend",
        "openai",
        "--num-prompts",
        "60",
        "--request-rate",
        "60",
        "--max-concurrency",
        "8",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
    ]);
    let report = run(&args).await;
    let s = Scrape::parse(report.metrics.clone());
    let summary = &report.summary;

    assert_eq!(summary.completed + summary.failed, 60, "{}", report.text);
    assert!(summary.failed > 0 && summary.completed > 30);
    assert_eq!(s.requests("bench"), 60.0);
    assert_eq!(s.successes("bench"), summary.completed as f64);
    for (category, n) in &summary.errors {
        assert_eq!(s.errors("bench", category), *n as f64, "{category}");
    }
    assert_eq!(
        s.sum("inferprobe_output_tokens_total", &[("target", "bench")]),
        summary.total_output as f64
    );
    for (metric, histogram) in [
        ("ttft", "inferprobe_time_to_first_token_seconds"),
        ("tpot", "inferprobe_time_per_output_token_seconds"),
        ("itl", "inferprobe_inter_token_latency_seconds"),
        ("e2el", "inferprobe_e2e_request_latency_seconds"),
    ] {
        let (sum, count) = s.histogram(histogram, "bench");
        let mean_ms = report.json[format!("mean_{metric}_ms")].as_f64().unwrap();
        assert!(
            close(mean_ms, sum / count * 1e3),
            "{metric}: summary {mean_ms} ms, metrics {} ms",
            sum / count * 1e3
        );
    }
    // With per-chunk usage off, the final usage is shared over the 2-token chunks: each
    // is two ITL observations of ~ITL, not one of ~2·ITL.
    let itl = report.json["median_itl_ms"].as_f64().unwrap();
    // Timer wake-ups make single gaps a little shorter or longer around the schedule.
    assert!((1.0..3.0).contains(&itl), "median ITL {itl} ms");
    assert!(
        report
            .text
            .starts_with("============ Serving Benchmark Result ============\n")
    );
    assert!(
        report
            .text
            .contains("Maximum request concurrency:             8")
    );
    assert!(report.text.contains("P50 E2EL (ms):"));
    assert!(
        report.text.contains("------Errors by Category"),
        "{}",
        report.text
    );
}

/// Failures say why: after the summary, each category's messages with a request id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_requests_are_listed_with_the_servers_message_and_a_request_id() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(1),
        faults: vec![(Fault::Http500, 0.5)],
        seed: Some(5),
        ..SimConfig::default()
    })
    .await;
    let url = sim.url();
    let args = args(&["--url", &url, "--num-prompts", "20", "--save-detailed"]);
    let report = run(&args).await;
    let (text, json) = (&report.text, &report.json);
    let failed = report.summary.failed;
    assert!(failed > 0 && report.summary.completed > 0, "{text}");

    // The summary block ends as vLLM's does; the list follows it.
    let closing = format!("\n{}\n", "=".repeat(50));
    let (_, after) = text.split_once(&closing).unwrap();
    let mut lines = after.lines();
    assert!(
        lines
            .next()
            .is_some_and(|l| l.starts_with("Failed requests, first 3 distinct messages")),
        "{text}"
    );
    let line = lines.next().unwrap_or_default();
    let prefix = format!("  http_5xx ({failed}): ");
    assert!(line.starts_with(&prefix), "{text}");
    assert!(line.contains("simulated server error"), "{text}");
    let id = line
        .rsplit_once('[')
        .and_then(|(_, id)| id.strip_suffix(']'))
        .unwrap_or_default();
    let ids = json["request_ids"].as_array().unwrap();
    let i = ids.iter().position(|v| v == id);
    let i = i.unwrap_or_else(|| panic!("`{id}` is not a request id of the run: {text}"));
    let error = json["errors"][i].as_str().unwrap();
    assert!(error.contains("simulated server error"), "{error}");
    assert_eq!(lines.next(), None, "one distinct message: {text}");

    let samples = &json["error_samples"]["http_5xx"];
    assert_eq!(samples[0]["request_id"], id);
    assert_eq!(samples[0]["count"], failed);
    assert_eq!(json["errors_by_category"]["http_5xx"], failed);
}

/// "Total input tokens" is vLLM 0.32's figure (the server's `prompt_tokens` when reported,
/// else the client-side length); the client-side lengths are reported beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_tokens_are_vllms_figure_with_the_clients_beside_it() {
    for usage in [true, false] {
        let sim = start_sim(SimConfig {
            ttft: Duration::from_millis(2),
            itl: Duration::from_millis(1),
            usage,
            ..SimConfig::default()
        })
        .await;
        let url = sim.url();
        let args = args(&["--url", &url, "--num-prompts", "5", "--save-detailed"]);
        let report = run(&args).await;
        let json = &report.json;
        assert_eq!(json["completed"], 5, "{}", report.text);
        // The client's length is the prompt's documented approximation (24 asked for:
        // the nonce counts 8, each filler word 1), never a count of words.
        assert_eq!(json["input_lens_client"], serde_json::json!(vec![24; 5]));
        assert_eq!(json["total_input_tokens_client"], 5 * 24);
        // The simulator counts whitespace-separated words: the nonce is one.
        let server = if usage { 17 } else { 24 };
        assert_eq!(
            json["input_lens"],
            serde_json::json!(vec![server; 5]),
            "usage {usage}"
        );
        assert_eq!(json["total_input_tokens"], 5 * server, "usage {usage}");
        assert!(
            report.text.contains(&format!(
                "Total input tokens:                      {}",
                5 * server
            )),
            "{}",
            report.text
        );
    }
}

/// A config file's deadlines are a probe's: a benchmark waits as vLLM's client does, and
/// only the flags shorten it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_files_ttft_timeout_does_not_fail_a_benchmark_but_the_flag_does() {
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(400),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("probe.toml");
    let toml = format!(
        "[defaults]\nrequest_timeout = \"300ms\"\n[[targets]]\nname = \"slow\"\nurl = \"{}\"\n\
         model = \"m\"\ninput_tokens = 16\noutput_tokens = 4\nttft_timeout = \"200ms\"\n",
        sim.url()
    );
    std::fs::write(&config, toml).unwrap();
    let with = |flags: &[&str]| {
        let mut argv = vec!["bench", "--config", config.to_str().unwrap(), "--quiet"];
        argv.extend_from_slice(&["--num-prompts", "4", "--request-rate", "inf"]);
        argv.extend_from_slice(flags);
        Cli::parse_from(argv).bench
    };

    let report = run(&with(&[])).await;
    let s = &report.summary;
    assert_eq!((s.completed, s.failed), (4, 0), "{}", report.text);
    let ttft = report.json["mean_ttft_ms"].as_f64().unwrap();
    assert!(
        ttft >= 400.0,
        "the simulator's 400 ms TTFT was waited for: {ttft}"
    );

    let report = run(&with(&["--ttft-timeout", "200ms"])).await;
    let s = &report.summary;
    assert_eq!((s.completed, s.failed), (0, 4), "{}", report.text);
    assert_eq!(s.errors.get("ttft_timeout"), Some(&4), "{}", report.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_cli_writes_a_vllm_shaped_result_file() {
    let dir = tempfile::tempdir().unwrap();
    let timeline = dir.path().join("timeline.jsonl");
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        timeline_file: Some(timeline.clone()),
        ..SimConfig::default()
    })
    .await;
    let result = dir.path().join("result.json");
    let out = Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args([
            "bench",
            "--url",
            &sim.url(),
            "--model",
            "m",
            "--num-prompts",
            "20",
            "--request-rate",
            "inf",
        ])
        .args([
            "--output-tokens",
            "4",
            "--goodput",
            "ttft:1000",
            "--save-detailed",
        ])
        .arg("--result-file")
        .arg(&result)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Successful requests:                     20"),
        "{stdout}"
    );
    assert!(stdout.contains("Request goodput (req/s):"));
    assert!(
        !stdout.contains("Request rate configured"),
        "not shown for inf"
    );
    assert!(
        stdout.ends_with(&format!("{}\n", "=".repeat(50))),
        "no failure list without failures: {stdout}"
    );
    assert!(!stdout.contains("distinct messages"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    for key in [
        "date",
        "backend",
        "model_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "p99_itl_ms",
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "latencies",
        "generated_texts",
        "errors",
        "error_samples",
        "total_input_tokens_client",
        "input_lens_client",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    assert_eq!(json["request_rate"], "inf");
    assert_eq!(json["completed"], 20);
    assert_eq!(json["output_lens"][0], 4);
    assert_eq!(json["itls"][0].as_array().unwrap().len(), 3);
    joins_the_simulator_timeline(&json, &timeline).await;

    let bad = Command::new(env!("CARGO_BIN_EXE_inferprobe"))
        .args([
            "bench",
            "--url",
            &sim.url(),
            "--model",
            "m",
            "--goodput",
            "itl:5",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--goodput"));
}

/// The fidelity benchmark joins the result's `request_ids` with the simulator's ground
/// truth: every request is there once, with one send per output token.
async fn joins_the_simulator_timeline(result: &serde_json::Value, timeline: &std::path::Path) {
    let ids = result["request_ids"].as_array().expect("request_ids");
    assert_eq!(ids.len(), 20);
    // A response's line is written when the simulator drops it, just after the last byte.
    let mut lines = Vec::new();
    for _ in 0..100 {
        lines = std::fs::read_to_string(timeline)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        if lines.len() >= ids.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let truth: std::collections::HashMap<String, serde_json::Value> = lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["request_id"].as_str().unwrap().to_owned(), v)
        })
        .collect();
    assert_eq!(truth.len(), ids.len(), "{lines:#?}");
    for (i, id) in ids.iter().enumerate() {
        let sends = truth[id.as_str().unwrap()]["token_sends_ns"]
            .as_array()
            .unwrap();
        assert_eq!(
            sends.len() as u64,
            result["output_lens"][i].as_u64().unwrap(),
            "{id}: {lines:#?}"
        );
        assert_eq!(result["itls"][i].as_array().unwrap().len(), sends.len() - 1);
    }
}
