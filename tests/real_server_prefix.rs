//! The prefix-cache check (issue 35) against a real llama-server (scripts/real-server/):
//! with its prompt cache (on by default) every check hits by the cached tokens it reports
//! (`prompt_tokens_details.cached_tokens`, and `timings.cache_n`), and each pair's TTFTs
//! reach their own histograms (the speed-up is printed, not asserted: it is timing on a
//! shared machine); with `--no-cache-prompt` it reports 0 cached tokens and every check is
//! a miss; with `--cache-reuse 256` (chunks reused at shifted positions) every check still
//! hits and none has its usage set aside: llama-server's scan stops reusing at the pair's
//! fresh nonce. Ignored by `cargo test`; scripts/real-server/test.sh runs it.

use crate::common;

use std::time::Duration;

use common::{Scrape, llama, start_daemon};

fn checks(scrape: &Scrape, result: &str, rule: &str) -> f64 {
    scrape.sum(
        "inferprobe_prefix_cache_checks_total",
        &[("target", "llama"), ("result", result), ("rule", rule)],
    )
}

/// Run the check against a llama-server started with `extra` until 6 checks are judged;
/// returns the scrape.
async fn run_checks(extra: &[&str]) -> Scrape {
    // 8,192 tokens over four slots: 2,048 each, room for a 256-word prefix in this
    // model's tokens (~700) and the chat template.
    let server = llama::start(&llama::tiny(), 8192, extra).await;
    let daemon = start_daemon(&format!(
        r#"
        [[targets]]
        name = "llama"
        url = "{}"
        model = "tiny"
        backend = "openai-chat"
        rate = 0.001
        prefix_cache = {{ interval = "300ms", prefix_tokens = 256 }}
        "#,
        server.url
    ))
    .await;
    let judged = |s: &Scrape| -> f64 {
        ["hit", "miss", "unreported", "failed"]
            .iter()
            .map(|r| {
                s.sum(
                    "inferprobe_prefix_cache_checks_total",
                    &[("target", "llama"), ("result", r)],
                )
            })
            .sum()
    };
    let scrape = daemon
        .wait_for(Duration::from_secs(60), |s| judged(s) >= 6.0)
        .await;
    daemon.stop().await;
    scrape
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn llama_server_serves_the_warm_prefix_from_its_prompt_cache() {
    let scrape = run_checks(&[]).await;
    let hits = checks(&scrape, "hit", "usage");
    let total = scrape.sum(
        "inferprobe_prefix_cache_checks_total",
        &[("target", "llama")],
    );
    assert_eq!(hits, total, "every check hits by usage\n{}", scrape.text);
    let (cold_sum, cold_n) = scrape.histogram("inferprobe_prefix_cache_cold_ttft_seconds", "llama");
    let (warm_sum, warm_n) = scrape.histogram("inferprobe_prefix_cache_warm_ttft_seconds", "llama");
    let (cold, warm) = (cold_sum / cold_n, warm_sum / warm_n);
    eprintln!(
        "llama-server, prompt cache on: {hits} of {total} checks hit; mean TTFT cold {:.1} ms, warm {:.1} ms",
        cold * 1e3,
        warm * 1e3
    );
    // The speed-up is a figure, not asserted: on a loaded 2-core CI machine one slow warm
    // request turned the mean of six around (warm 192 ms, cold 132 ms, every check a hit by
    // usage). The hits above are what this test holds llama-server to; here, that the
    // pairs' TTFTs reached the check's own histograms.
    assert!(
        cold_n > 0.0 && warm_n > 0.0,
        "no cold or warm TTFT observed\n{}",
        scrape.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn llama_server_without_its_prompt_cache_misses_every_check() {
    let scrape = run_checks(&["--no-cache-prompt"]).await;
    let misses = checks(&scrape, "miss", "usage");
    let total = scrape.sum(
        "inferprobe_prefix_cache_checks_total",
        &[("target", "llama")],
    );
    eprintln!("llama-server --no-cache-prompt: {misses} of {total} checks missed");
    assert_eq!(misses, total, "every check misses\n{}", scrape.text);
}

/// Issue 43, item 4: llama-server reuses runs of 256 tokens or more of a slot's previous
/// prompt at shifted positions and counts them cached. A cold request's prompt differs from
/// every earlier one from its nonce on, so nothing of it is reused: its count stays low,
/// and the warm one hits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn llama_server_with_cache_reuse_hits_every_check() {
    let scrape = run_checks(&["--cache-reuse", "256"]).await;
    let hits = checks(&scrape, "hit", "usage");
    let total = scrape.sum(
        "inferprobe_prefix_cache_checks_total",
        &[("target", "llama")],
    );
    let set_aside = scrape.sum(
        "inferprobe_prefix_cache_usage_set_aside_total",
        &[("target", "llama")],
    );
    eprintln!(
        "llama-server --cache-reuse 256: {hits} of {total} checks hit, {set_aside} set aside"
    );
    assert_eq!(hits, total, "every check hits by usage\n{}", scrape.text);
    assert_eq!(set_aside, 0.0, "{}", scrape.text);
}
