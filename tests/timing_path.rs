//! Tokenizer work stays off the clock and off the threads that time streams: `bench` builds
//! every prompt before its clock starts (as vLLM samples its requests first), and the
//! daemon builds prompts and counts output on the blocking pool, not on the runtime that
//! stamps other probes' chunks.
//!
//! The prompts here take tens of milliseconds each to build with the test tokenizer, so
//! building them in the wrong place shows as seconds of skew, far above scheduling noise.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use common::{start_daemon, start_sim};
use inferprobe::Shutdown;
use inferprobe::bench::{self, BenchArgs};
use inferprobe::config::{Target, load_str};
use inferprobe::sim::SimConfig;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::time::Instant;

const INPUT_TOKENS: u32 = 32_000;

fn tokenizer() -> String {
    format!(
        "{}/tests/fixtures/tokenizer/tiny-bpe.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn heavy_target() -> Arc<Target> {
    let toml = format!(
        "[[targets]]\nname = \"t\"\nurl = \"http://h\"\nmodel = \"m\"\n\
         input_tokens = {INPUT_TOKENS}\ntokenizer = \"{}\"\n",
        tokenizer()
    );
    Arc::clone(&load_str(&toml).unwrap().targets[0])
}

/// How long building `n` of these prompts takes on this machine, now.
fn build_time(n: usize) -> Duration {
    let target = heavy_target();
    let mut rng = StdRng::seed_from_u64(1);
    let start = std::time::Instant::now();
    for _ in 0..n {
        assert_eq!(target.prompts.next(&mut rng).input_tokens, INPUT_TOKENS);
    }
    start.elapsed()
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_sends_an_infinite_rate_as_one_burst_after_building_its_prompts() {
    const N: usize = 10;
    let building = build_time(N);
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    })
    .await;
    let (url, tokenizer, n) = (sim.url(), tokenizer(), N.to_string());
    let input = INPUT_TOKENS.to_string();
    let argv = [
        "bench",
        "--url",
        &url,
        "--model",
        "m",
        "--tokenizer",
        &tokenizer,
        "--input-tokens",
        &input,
        "--output-tokens",
        "2",
        "--num-prompts",
        &n,
        "--save-detailed",
        "--quiet",
    ];
    let args = Cli::parse_from(argv).bench;
    let plan = bench::plan(&args).unwrap();
    let report = bench::run(&args, plan, &Shutdown::new()).await.unwrap();
    assert_eq!(report.summary.completed, N as u64, "{}", report.text);
    let starts: Vec<f64> = report.json["start_times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    let last = starts.iter().copied().fold(0.0, f64::max);
    // Built between sends, the last request would go out about `building` after the first.
    assert!(
        last < building.as_secs_f64() / 4.0,
        "the last of {N} requests went out {last} s into the run; building them takes {building:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn the_daemon_tokenizes_off_the_runtime_that_times_streams() {
    // One runtime thread for the simulator, the daemon's probes and this ticker: had the
    // daemon built a prompt (or counted output) on it, the ticker would stall as long.
    let one = build_time(2) / 2;
    let sim = start_sim(SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        usage: false, // output counted by the tokenizer too
        ..SimConfig::default()
    })
    .await;
    let toml = format!(
        "seed = 2\n[[targets]]\nname = \"t\"\nurl = \"{}\"\nmodel = \"m\"\nbackend = \"openai\"\n\
         input_tokens = {INPUT_TOKENS}\noutput_tokens = 4\ntokenizer = \"{}\"\nrate = 8\n\
         max_concurrency = 8\n",
        sim.url(),
        tokenizer()
    );
    let daemon = start_daemon(&toml).await;
    let mut worst = Duration::ZERO;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let before = Instant::now();
        tokio::time::sleep(Duration::from_millis(1)).await;
        worst = worst.max(before.elapsed().saturating_sub(Duration::from_millis(1)));
        if Instant::now() > deadline {
            panic!("no 6 probes within a minute");
        }
        let scrape = daemon.scrape().await;
        if scrape.successes("t") >= 6.0 {
            assert_eq!(scrape.all_errors("t"), 0.0, "{}", scrape.text);
            break;
        }
    }
    daemon.stop().await;
    assert!(
        worst < one / 2,
        "the runtime stalled {worst:?}; building one prompt takes {one:?}"
    );
}
