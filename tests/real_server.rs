//! Against a real inference server: llama.cpp's `llama-server` with a tiny random-weight
//! model (scripts/real-server/setup.sh builds both). Ignored by `cargo test`; run with
//!     cargo test --test suite real_server -- --ignored
//! (.ci/run does). Paths come from LLAMA_SERVER and TINY_GGUF, else target/real-server/.
//!
//! Checked per probe against the server's own account (`timings`): output tokens equal
//! the server's count whether or not the server sends usage; prompt tokens equal the
//! server's (cached + processed); TTFT is at least the server's prompt time, by at most
//! MARGIN of transport and scheduling at the median and OUTLIER_MS for any one probe (the
//! server's own threads get preempted on a loaded machine too); TPOT is within TPOT_MARGIN
//! of the server's time per generated token at the median and TPOT_OUTLIER_MS for any one. Across a bench run, output tokens equal the server's
//! `llamacpp:tokens_predicted_total`. A context overflow is a real HTTP 400, counted as `context_length`.

use crate::common;

use common::llama;

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use inferprobe::Shutdown;
use inferprobe::bench::{self, BenchArgs};
use inferprobe::probe::{Outcome, Prober};
use prometheus_client::metrics::counter::Counter;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;

/// Request transit, queueing and the first token's sampling, on a busy 2-core machine.
const MARGIN_MS: f64 = 25.0;
/// The same for the worst single probe, when other processes compete for the two cores.
const OUTLIER_MS: f64 = 100.0;
/// Per-token difference between what the client sees and what the server timed, at the
/// median.
const TPOT_MARGIN_MS: f64 = 1.0;
/// The same for the worst single probe, when the suite's other servers compete for the
/// two cores (1.14 ms seen while the sampler and canary tests ran beside it).
const TPOT_OUTLIER_MS: f64 = 5.0;

async fn start_server(context: u32) -> llama::Server {
    llama::start(&llama::tiny(), context, &[]).await
}

fn target(
    url: &str,
    backend: &str,
    include_usage: bool,
    extra: &str,
) -> Arc<inferprobe::config::Target> {
    let toml = format!(
        "[[targets]]\nname = \"t\"\nbackend = \"{backend}\"\nurl = \"{url}\"\nmodel = \"tiny\"\ninput_tokens = 48\noutput_tokens = 32\ninclude_usage = {include_usage}\n{extra}\n"
    );
    Arc::clone(&common::parse_config(&toml).unwrap().targets[0])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn probe_measurements_agree_with_the_servers_own_timings() {
    let server = start_server(4096).await;
    let mut ttft_gaps = Vec::new();
    let mut tpot_gaps = Vec::new();
    for (backend, include_usage) in [
        ("openai", true),
        ("openai", false),
        ("openai-chat", true),
        ("openai-chat", false),
    ] {
        let target = target(&server.url, backend, include_usage, "");
        let prober = Prober::new(Arc::clone(&target), Counter::default()).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        for i in 0..15 {
            let prompt = target.prompts.next(&mut rng);
            let report = prober
                .probe(&format!("real-{i}"), &prompt, &CancellationToken::new())
                .await;
            let Outcome::Finished(Ok(m)) = report.outcome else {
                panic!("{backend} usage={include_usage}: {:?}", report.outcome);
            };
            let case = format!("{backend} usage={include_usage} probe {i}");
            let timings = report
                .record
                .response
                .server_timings
                .unwrap_or_else(|| panic!("{case}: no timings"));
            let output = m.output_tokens.unwrap();
            assert_eq!(
                Some(output.value()),
                timings.predicted_n,
                "{case}: {output:?}"
            );
            assert!(output.is_exact() || !include_usage, "{case}");
            if let Some(prompt_tokens) = m.prompt_tokens {
                let server = timings.cache_n.unwrap_or(0) + timings.prompt_n.unwrap_or(0);
                assert_eq!(prompt_tokens, server, "{case}: prompt tokens");
            }
            let ttft = m.ttft.unwrap().as_secs_f64() * 1e3;
            let prompt_ms = timings.prompt_ms.unwrap();
            assert!(
                ttft >= prompt_ms,
                "{case}: TTFT {ttft} ms < server prompt time {prompt_ms} ms"
            );
            ttft_gaps.push(ttft - prompt_ms);
            // One token per event here: the ITL count is the tokens after the first, as
            // before tokens per event were estimated (a byte token held back for the next
            // event's text would make that event carry two, by usage or by estimate).
            let (n, itl) = (output.value(), m.itl_observations());
            eprintln!(
                "{case}: timed by {}, {itl} ITL for {n} tokens",
                m.timed_by.as_str()
            );
            assert!(
                itl + 1 == n || (include_usage && itl + 2 == n),
                "{case}: {itl} ITL for {n} tokens"
            );
            let tpot = m.tpot.unwrap().as_secs_f64() * 1e3;
            let server_tpot = timings.predicted_per_token_ms.unwrap();
            tpot_gaps.push((tpot - server_tpot).abs());
        }
    }
    ttft_gaps.sort_by(f64::total_cmp);
    tpot_gaps.sort_by(f64::total_cmp);
    let median_tpot_gap = tpot_gaps[tpot_gaps.len() / 2];
    let worst_tpot_gap = tpot_gaps[tpot_gaps.len() - 1];
    let median_ttft_gap = ttft_gaps[ttft_gaps.len() / 2];
    let worst_ttft_gap = ttft_gaps[ttft_gaps.len() - 1];
    println!(
        "TTFT - server prompt time: median {median_ttft_gap:.3} ms, worst {worst_ttft_gap:.3} ms; |TPOT - server TPOT|: median {median_tpot_gap:.3} ms, worst {worst_tpot_gap:.3} ms"
    );
    assert!(
        median_ttft_gap <= MARGIN_MS,
        "TTFT exceeds the server's prompt time by {median_ttft_gap} ms at the median"
    );
    assert!(
        worst_ttft_gap <= OUTLIER_MS,
        "TTFT exceeds the server's prompt time by {worst_ttft_gap} ms"
    );
    assert!(
        median_tpot_gap <= TPOT_MARGIN_MS,
        "TPOT differs from the server's by {median_tpot_gap} ms at the median"
    );
    assert!(
        worst_tpot_gap <= TPOT_OUTLIER_MS,
        "TPOT differs from the server's by {worst_tpot_gap} ms"
    );
}

/// The sum of a counter in llama-server's /metrics.
async fn server_counter(url: &str, name: &str) -> f64 {
    let text = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn output_tokens_agree_with_the_servers_counters() {
    let server = start_server(4096).await;
    for backend in ["openai", "openai-chat"] {
        let before = server_counter(&server.url, "llamacpp:tokens_predicted_total").await;
        let args = Cli::parse_from([
            "bench",
            "--url",
            &server.url,
            "--backend",
            backend,
            "--model",
            "tiny",
            "--num-prompts",
            "30",
            "--request-rate",
            "20",
            "--input-tokens",
            "40",
            "--output-tokens",
            "24",
            "--quiet",
        ])
        .bench;
        let report = bench::run(&args, bench::plan(&args).unwrap(), &Shutdown::new())
            .await
            .unwrap();
        let after = server_counter(&server.url, "llamacpp:tokens_predicted_total").await;
        assert_eq!(report.summary.failed, 0, "{}", report.text);
        assert_eq!(
            report.summary.total_output as f64,
            after - before,
            "{backend}: probe vs server token totals"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn a_context_overflow_is_context_length() {
    let server = start_server(256).await;
    let toml = format!(
        "[[targets]]\nname = \"long\"\nurl = \"{}\"\nmodel = \"tiny\"\nrate = 10\ninput_tokens = 800\noutput_tokens = 8\n",
        server.url
    );
    let daemon = common::start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(20), |s| s.requests("long") >= 3.0)
        .await;
    daemon.stop().await;
    assert_eq!(
        s.errors("long", "context_length"),
        s.requests("long"),
        "{}",
        s.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn max_completion_tokens_limits_this_llama_server() {
    // This llama.cpp (llama-cpp-python 0.3.36's) takes `max_completion_tokens` as an alias
    // of n_predict; older ones ignore it and would generate to the context's end.
    let server = start_server(4096).await;
    let target = target(
        &server.url,
        "openai-chat",
        true,
        "max_tokens_field = \"max_completion_tokens\"",
    );
    let prober = Prober::new(Arc::clone(&target), Counter::default()).unwrap();
    let mut rng = StdRng::seed_from_u64(2);
    for i in 0..3 {
        let prompt = target.prompts.next(&mut rng);
        let report = prober
            .probe(&format!("mct-{i}"), &prompt, &CancellationToken::new())
            .await;
        let Outcome::Finished(Ok(m)) = report.outcome else {
            panic!("{:?}", report.outcome);
        };
        assert_eq!(
            m.output_tokens.map(|c| c.value()),
            Some(32),
            "output_tokens = 32"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn images_reach_a_real_vision_model() {
    // A tiny random-weight vision projector for the tiny model (make_tiny_mmproj.py): every
    // image becomes 16 tokens of the prompt.
    let mmproj = llama::path("TINY_MMPROJ", "tiny-mmproj.gguf");
    let server = llama::start(
        &llama::tiny(),
        4096,
        &["--mmproj", mmproj.to_str().unwrap()],
    )
    .await;
    let images = "images = { count = 2, width = 64, height = 64, format = \"png\" }";
    let with = target(&server.url, "openai-chat", true, images);
    let without = target(&server.url, "openai-chat", true, "");
    let (with_images, text_only) = (
        Prober::new(Arc::clone(&with), Counter::default()).unwrap(),
        Prober::new(Arc::clone(&without), Counter::default()).unwrap(),
    );
    // One seed for both: the same prompt texts, so only the images differ.
    let (mut a, mut b) = (StdRng::seed_from_u64(3), StdRng::seed_from_u64(3));
    for i in 0..4 {
        let (p, q) = (with.prompts.next(&mut a), without.prompts.next(&mut b));
        assert_eq!(p.text, q.text);
        assert_eq!(p.media().len(), 2);
        let (m, record) = vision_probe(&with_images, &p, i).await;
        let (text, _) = vision_probe(&text_only, &q, i).await;
        assert_eq!(
            m.prompt_tokens.unwrap(),
            text.prompt_tokens.unwrap() + 2 * 16,
            "two images of 16 tokens each"
        );
        assert_eq!(m.output_tokens.map(|c| c.value()), Some(32));
        // The server's prompt time includes encoding the images; TTFT includes sending them.
        let prompt_ms = record.response.server_timings.unwrap().prompt_ms.unwrap();
        assert!(m.ttft.unwrap().as_secs_f64() * 1e3 >= prompt_ms);
    }
}

async fn vision_probe(
    prober: &Prober,
    prompt: &inferprobe::prompt::Prompt,
    i: usize,
) -> (
    inferprobe::record::Measurement,
    inferprobe::record::RequestRecord,
) {
    let report = prober
        .probe(&format!("vision-{i}"), prompt, &CancellationToken::new())
        .await;
    match report.outcome {
        Outcome::Finished(Ok(m)) => (m, report.record),
        other => panic!("{other:?}"),
    }
}
