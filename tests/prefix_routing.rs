//! The prefix-cache check through a gateway (issue 35, item 3), end to end: the daemon
//! checks a pool behind the simulator's gateway over two replicas, each with its own cache.
//! What the pool's hit ratio says is where the router sent the pair's second request:
//! - prefix affinity: to the replica that holds the prefix, every time;
//! - round-robin under traffic: there when an odd number of other requests came between the
//!   pair's two (about 1/2 over two replicas, 1/N over N);
//! - round-robin on a quiet pool: to the next replica, every time (never a hit).

use crate::common;

use std::time::Duration;

use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::{Route, SimConfig};

fn checks(scrape: &Scrape, result: &str) -> f64 {
    scrape.sum(
        "inferprobe_prefix_cache_checks_total",
        &[("target", "pool"), ("result", result)],
    )
}

/// (hits, misses) once `judged` checks of the pool were judged by the usage it reports.
async fn hit_ratio(route: Route, workload_rate: f64, judged: f64) -> (f64, f64) {
    let mut config = SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    };
    // A 512-word prefix takes ~100 ms to prefill cold: long enough for the workload's
    // requests to come between a pair's two.
    config.prefill.per_token = Duration::from_micros(200);
    config.gateway.replicas = 2;
    config.gateway.route = route;
    let sim = start_sim(config).await;
    let daemon = start_daemon(&format!(
        r#"
        [[targets]]
        name = "pool"
        url = "{}"
        model = "m"
        backend = "openai-chat"
        rate = {workload_rate}
        input_tokens = 8
        output_tokens = 2
        prefix_cache = {{ interval = "150ms", prefix_tokens = 512 }}
        "#,
        sim.url()
    ))
    .await;
    let scrape = daemon
        .wait_for(Duration::from_secs(60), |s| {
            checks(s, "hit") + checks(s, "miss") >= judged
        })
        .await;
    daemon.stop().await;
    assert_eq!(
        checks(&scrape, "unreported"),
        0.0,
        "the simulator reports cached tokens\n{}",
        scrape.text
    );
    (checks(&scrape, "hit"), checks(&scrape, "miss"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_affinity_sends_every_second_request_to_the_prefix() {
    let (hits, misses) = hit_ratio(Route::PrefixAffinity, 40.0, 10.0).await;
    assert_eq!(misses, 0.0, "{hits} hits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_on_a_quiet_pool_never_returns_to_the_prefix() {
    // The lowest rate (a first arrival uniform in 11.6 days): at 0.001 a second, uniform in
    // 1,000 s, it fell within a loaded CI run's seconds about once in a hundred, between a
    // pair's two requests (a hit).
    let (hits, misses) = hit_ratio(Route::RoundRobin, 1e-6, 10.0).await;
    assert_eq!(hits, 0.0, "{misses} misses");
}

/// Binomial(30, 1/2) falls outside [6, 24] with probability ~3e-4; the workload's 40
/// requests a second put ~4 between a pair's two, so their parity is close to a coin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_under_traffic_returns_to_the_prefix_about_half_the_time() {
    let (hits, misses) = hit_ratio(Route::RoundRobin, 40.0, 30.0).await;
    let ratio = hits / (hits + misses);
    eprintln!("round-robin under traffic: {hits} hits, {misses} misses");
    assert!(
        (0.2..=0.8).contains(&ratio),
        "{hits} hits, {misses} misses: ratio {ratio:.2}"
    );
}
