//! Measurement against the simulator's injected latencies: the exported histograms' sums
//! and counts must match what the simulator was told to do.
//!
//! Tolerances are for a busy 2-core machine: measured latency can only exceed the injected
//! one (the probe's clock starts before the server's), so lower bounds are tight and upper
//! bounds allow scheduling noise. ITL means are robust because the simulator writes on an
//! absolute schedule: a late write is followed by an early one.

use crate::common;

use std::time::Duration;

use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::SimConfig;

const TTFT: Duration = Duration::from_millis(150);
const ITL: Duration = Duration::from_millis(20);

fn config(sim: &str, backend: &str, output_tokens: u32, continuous: bool) -> String {
    format!(
        r#"
        seed = 1
        [defaults]
        url = "{sim}"
        model = "m"
        rate = 8
        max_concurrency = 8
        input_tokens = 16
        ttft_timeout = "5s"
        stall_timeout = "5s"
        request_timeout = "20s"
        [[targets]]
        name = "t"
        backend = "{backend}"
        output_tokens = {output_tokens}
        continuous_usage_stats = {continuous}
        "#
    )
}

/// Probe until `n` successes, then stop; the scrape is taken before stopping.
async fn measure(sim: SimConfig, backend: &str, output_tokens: u32, continuous: bool) -> Scrape {
    let sim = start_sim(sim).await;
    let daemon = start_daemon(&config(&sim.url(), backend, output_tokens, continuous)).await;
    let scrape = daemon
        .wait_for(Duration::from_secs(30), |s| s.successes("t") >= 10.0)
        .await;
    daemon.stop().await;
    assert_eq!(scrape.all_errors("t"), 0.0, "{}", scrape.text);
    scrape
}

fn mean(scrape: &Scrape, histogram: &str) -> (f64, f64) {
    let (sum, count) = scrape.histogram(histogram, "t");
    assert!(count > 0.0, "{histogram} has no observations");
    (sum / count, count)
}

fn assert_close(what: &str, measured: f64, injected: Duration, below: f64, above: f64) {
    let injected = injected.as_secs_f64();
    assert!(
        measured >= injected - below && measured <= injected + above,
        "{what}: measured {:.4} s, injected {injected:.4} s (allowed -{below} s / +{above} s)",
        measured
    );
}

fn sim(tokens_per_chunk: u32) -> SimConfig {
    SimConfig {
        ttft: TTFT,
        itl: ITL,
        tokens_per_chunk: tokens_per_chunk.into(),
        ..SimConfig::default()
    }
}

/// Chunks of 2, 1, 3, 2, 2, 1, 3, 2, … tokens: speculative decoding's accepted drafts.
fn varying() -> SimConfig {
    use clap::Parser;
    let args = ["inferprobe", "simulate", "--tokens-per-chunk", "2,1,3,2"];
    let sizes = match inferprobe::cli::Cli::try_parse_from(args).map(|c| c.command) {
        Ok(inferprobe::cli::Command::Simulate { sim, .. }) => sim.tokens_per_chunk,
        other => panic!("the flag does not parse: {other:?}"),
    };
    SimConfig {
        tokens_per_chunk: sizes,
        ..sim(1)
    }
}

/// Per probe: ITL observations, and the mean ITL and TPOT.
fn per_token(s: &Scrape) -> (f64, f64, f64) {
    let successes = s.successes("t");
    let (itl, itl_count) = mean(s, "inferprobe_inter_token_latency_seconds");
    let (tpot, tpot_count) = mean(s, "inferprobe_time_per_output_token_seconds");
    assert_eq!(tpot_count, successes);
    (itl_count / successes, itl, tpot)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_ttft_itl_tpot_e2el_match_the_injected_latencies() {
    let s = measure(sim(1), "openai-chat", 10, true).await;
    let successes = s.successes("t");

    let (ttft, _) = mean(&s, "inferprobe_time_to_first_token_seconds");
    assert_close("TTFT", ttft, TTFT, 0.0, 0.06);
    // The simulator sends the role-only chunk at 0 ms: a probe taking TTFT there would
    // land in the lowest buckets.
    let early = s.sum(
        "inferprobe_time_to_first_token_seconds_bucket",
        &[("target", "t"), ("le", "0.1")],
    );
    assert_eq!(early, 0.0, "a TTFT was taken before the first token");

    let (itl, itl_count) = mean(&s, "inferprobe_inter_token_latency_seconds");
    assert_close("ITL", itl, ITL, 0.002, 0.006);
    assert_eq!(
        itl_count,
        9.0 * successes,
        "10 tokens give 9 gaps per probe"
    );

    let (tpot, tpot_count) = mean(&s, "inferprobe_time_per_output_token_seconds");
    assert_close("TPOT", tpot, ITL, 0.002, 0.006);
    assert_eq!(tpot_count, successes);

    let (e2el, _) = mean(&s, "inferprobe_e2e_request_latency_seconds");
    assert_close("E2EL", e2el, TTFT + ITL * 9, 0.0, 0.08);

    let (_, tokens) = s.histogram("inferprobe_request_output_tokens", "t");
    assert_eq!(tokens, successes);
    let output_total = s.sum("inferprobe_output_tokens_total", &[("target", "t")]);
    assert_eq!(output_total, 10.0 * successes);
    // 16 requested input tokens = a nonce + 8 filler words; the simulator counts words.
    let prompt_total = s.sum("inferprobe_prompt_tokens_total", &[("target", "t")]);
    assert_eq!(prompt_total, 9.0 * successes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k_tokens_per_chunk_give_k_itl_observations_with_continuous_usage() {
    // 12 tokens in chunks of 4, 4·ITL apart: each later chunk is 4 observations of ITL.
    let s = measure(sim(4), "openai-chat", 12, true).await;
    let successes = s.successes("t");
    let (per_probe, itl, tpot) = per_token(&s);
    assert_eq!(per_probe, 8.0, "(12 - 4) tokens after the first chunk");
    assert_close("ITL", itl, ITL, 0.002, 0.006);
    let output_total = s.sum("inferprobe_output_tokens_total", &[("target", "t")]);
    assert_eq!(output_total, 12.0 * successes);
    assert_close("TPOT", tpot, ITL, 0.002, 0.006);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_per_chunk_usage_the_final_total_is_shared_over_the_chunks() {
    // `inferprobe simulate --tokens-per-chunk 4`, usage only at the end: a speculative or
    // --stream-interval 4 server. Per chunk this read ITL and TPOT 4x too large.
    let backends = [
        "openai",
        "openai-chat",
        "anthropic",
        "openai-responses",
        "tgi",
    ];
    for backend in backends {
        let s = measure(sim(4), backend, 32, false).await;
        let (per_probe, itl, tpot) = per_token(&s);
        // Shared by text, the first chunk may be credited one token more or less.
        assert!(
            (27.0..=29.0).contains(&per_probe),
            "{backend}: {per_probe} ITL per probe, not 28"
        );
        assert_close(&format!("{backend} ITL"), itl, ITL, 0.002, 0.006);
        assert_close(&format!("{backend} TPOT"), tpot, ITL, 0.002, 0.006);
        let output = s.sum("inferprobe_output_tokens_total", &[("target", "t")]);
        assert_eq!(output, 32.0 * s.successes("t"), "{backend}: billed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_varying_number_of_tokens_per_chunk_is_timed_per_token() {
    // 2,1,3,2 cycled: 32 tokens in 16 chunks, the first of 2.
    let s = measure(varying(), "openai-chat", 32, true).await;
    let (per_probe, itl, tpot) = per_token(&s);
    assert_eq!(per_probe, 30.0, "per-chunk usage: exact");
    assert_close("ITL", itl, ITL, 0.002, 0.006);
    assert_close("TPOT", tpot, ITL, 0.002, 0.006);

    let s = measure(varying(), "openai", 32, false).await;
    let (per_probe, itl, tpot) = per_token(&s);
    assert!(
        (29.0..=31.0).contains(&per_probe),
        "estimated: {per_probe} per probe, not 30"
    );
    assert_close("ITL (estimated)", itl, ITL, 0.002, 0.006);
    assert_close("TPOT (estimated)", tpot, ITL, 0.002, 0.006);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_reasoning_is_billed_but_not_timed() {
    // 20 reasoning tokens before the answer, never streamed, broken out in usage; the
    // answer's 16 tokens come 4 per chunk.
    let thinking = SimConfig {
        hidden_reasoning: 20,
        ..sim(4)
    };
    for continuous in [false, true] {
        let s = measure(thinking.clone(), "openai-chat", 16, continuous).await;
        let successes = s.successes("t");
        let (per_probe, itl, tpot) = per_token(&s);
        assert_eq!(
            per_probe, 12.0,
            "continuous usage {continuous}: 16 - 4 visible tokens"
        );
        assert_close("ITL", itl, ITL, 0.002, 0.006);
        assert_close("TPOT", tpot, ITL, 0.002, 0.006);
        let (ttft, _) = mean(&s, "inferprobe_time_to_first_token_seconds");
        assert_close("TTFT", ttft, TTFT + ITL * 20, 0.0, 0.06);
        let output = s.sum("inferprobe_output_tokens_total", &[("target", "t")]);
        assert_eq!(output, 36.0 * successes, "billed: reasoning included");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_usage_tokens_are_counted_from_events() {
    let no_usage = SimConfig {
        usage: false,
        ..sim(1)
    };
    let s = measure(no_usage, "openai", 10, false).await;
    let successes = s.successes("t");
    let output_total = s.sum("inferprobe_output_tokens_total", &[("target", "t")]);
    assert_eq!(output_total, 10.0 * successes);
    let (_, prompt_count) = s.histogram("inferprobe_request_prompt_tokens", "t");
    assert_eq!(prompt_count, 0.0, "no usage, no prompt token count");
    let (itl, count) = mean(&s, "inferprobe_inter_token_latency_seconds");
    assert_eq!(count, 9.0 * successes);
    assert_close("ITL", itl, ITL, 0.002, 0.006);

    // With several tokens per chunk and no usage, the event count undercounts: documented.
    let chunky = SimConfig {
        usage: false,
        ..sim(3)
    };
    let s = measure(chunky, "openai-chat", 12, false).await;
    let output_total = s.sum("inferprobe_output_tokens_total", &[("target", "t")]);
    assert_eq!(output_total, 4.0 * s.successes("t"));
}
