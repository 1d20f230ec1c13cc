//! The prefix-cache check against servers that cache or report the way real ones do (issue
//! 43), each taught to the simulator: a prefill/decode split whose decode side reports the
//! transferred KV as cached, 128-token blocks, llama-server's chunk reuse, a provider that
//! reports cached tokens only on a hit, and a cache too small for its load that forgets a
//! prefix before the conversation's next turn.

use crate::common;

use std::time::Duration;

use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::{Fault, ReportCached, SimConfig};

/// A target's checks by (result, rule), and its checks whose usage was set aside.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    hit_usage: f64,
    hit_ttft: f64,
    miss: f64,
    unreported: f64,
    failed: f64,
    set_aside: f64,
    set_aside_not_written: f64,
}

impl Counts {
    fn of(s: &Scrape) -> Self {
        let checks = |result: &str, rule: &str| {
            s.sum(
                "inferprobe_prefix_cache_checks_total",
                &[("target", "t"), ("result", result), ("rule", rule)],
            )
        };
        Self {
            hit_usage: checks("hit", "usage"),
            hit_ttft: checks("hit", "ttft"),
            miss: checks("miss", "usage"),
            unreported: checks("unreported", "ttft"),
            failed: checks("failed", "none"),
            set_aside: s.sum(
                "inferprobe_prefix_cache_usage_set_aside_total",
                &[("target", "t"), ("reason", "cold_cached")],
            ),
            set_aside_not_written: s.sum(
                "inferprobe_prefix_cache_usage_set_aside_total",
                &[("target", "t"), ("reason", "not_written")],
            ),
        }
    }

    fn total(&self) -> f64 {
        self.hit_usage + self.hit_ttft + self.miss + self.unreported + self.failed
    }
}

/// A simulator answering in 5 ms plus 200 µs per prompt word its cache did not serve.
fn server() -> SimConfig {
    let mut config = SimConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    };
    config.prefill.per_token = Duration::from_micros(200);
    config
}

/// Check target `t` on `sim` with `prefix_cache = { <keys> }` until `judged` checks are
/// counted; `extra` adds keys to the target (headers; a workload's `rate` replaces the
/// near-silent default).
async fn check(sim: SimConfig, keys: &str, extra: &str, judged: f64) -> Counts {
    let chat = "backend = \"openai-chat\"\nmodel = \"m\"";
    check_as(sim, chat, keys, extra, judged).await
}

/// As [`check`], with the target's backend and model in `api`.
async fn check_as(sim: SimConfig, api: &str, keys: &str, extra: &str, judged: f64) -> Counts {
    let sim = start_sim(sim).await;
    let daemon = start_daemon(&format!(
        r#"
        [[targets]]
        name = "t"
        url = "{}"
        {api}
        prefix_cache = {{ {keys} }}
        {extra}
        {quiet}
        "#,
        sim.url(),
        quiet = if extra.contains("rate") {
            ""
        } else {
            "rate = 0.001"
        },
    ))
    .await;
    let scrape = daemon
        .wait_for(Duration::from_secs(60), |s| Counts::of(s).total() >= judged)
        .await;
    daemon.stop().await;
    let counts = Counts::of(&scrape);
    eprintln!("{keys}: {counts:?}");
    counts
}

/// Item 1: vLLM's decode side reports `prompt_tokens − 1` cached on every request. The
/// cold request claims a prefix no cache could have held: its count is set aside and the
/// pair judged by TTFT (the prefill side's cache still saves the warm one's prefill), and
/// a cache that is off is `unreported`, never a miss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_prefill_decode_split_no_check_is_a_miss() {
    let mut pd = server();
    pd.prefill.report_cached = ReportCached::PdDecode;
    let keys = r#"interval = "100ms", prefix_tokens = 512"#;
    let caching = check(pd.clone(), keys, "", 6.0).await;
    assert_eq!(caching.miss, 0.0, "{caching:?}");
    assert_eq!(caching.set_aside, caching.total(), "{caching:?}");
    // ~100 ms of prefill saved on a 5 ms answer: a hit by TTFT, one slow warm request aside.
    assert!(caching.hit_ttft >= caching.total() - 1.0, "{caching:?}");
    let off = r#"headers = { "x-inferprobe-fault" = "cache_disabled" }"#;
    let disabled = check(pd, keys, off, 4.0).await;
    assert_eq!(disabled.miss, 0.0, "{disabled:?}");
    assert!(
        disabled.unreported >= disabled.total() - 1.0,
        "{disabled:?}"
    );
}

/// Item 3: a server caching 128-token blocks returns a 300-token prefix as 256 tokens.
/// Asked for 90% of the prefix, every check misses on that healthy cache; told the block
/// size, the check expects the prefix's whole blocks and every check hits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_block_size_known_whole_blocks_are_a_hit() {
    let mut blocks = server();
    blocks.prefill.block_tokens = 128;
    let keys = r#"interval = "60ms", prefix_tokens = 300, hit_share = 0.9"#;
    let unknown = check(blocks.clone(), keys, "", 4.0).await;
    assert_eq!(unknown.miss, unknown.total(), "{unknown:?}");
    let known = check(blocks, &format!("{keys}, block_tokens = 128"), "", 4.0).await;
    assert_eq!(known.hit_usage, known.total(), "{known:?}");
}

/// Item 4: llama-server's `--cache-reuse` serves runs of an earlier prompt at shifted
/// positions; a pair's prompts share nothing with earlier pairs' from the nonce on, so the
/// cold request reports nothing cached and the warm one hits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunk_reuse_does_not_flatter_the_cold_request() {
    let mut llama = server();
    llama.prefill.block_tokens = 1;
    llama.prefill.cache_reuse = 32;
    let counts = check(llama, r#"interval = "60ms", prefix_tokens = 256"#, "", 5.0).await;
    assert_eq!(counts.hit_usage, counts.total(), "{counts:?}");
    assert_eq!(counts.set_aside, 0.0);
}

/// Item 6: a provider that sends cached tokens only on a hit. One request in five has the
/// cache off (`cache_disabled`), so about a third of the pairs miss: once a hit was
/// reported, their missing count is 0 and they are misses, not `unreported`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_reporting_only_hits_shows_its_misses() {
    let mut hits_only = server();
    hits_only.prefill.report_cached = ReportCached::HitOnly;
    hits_only.prefill.per_token = Duration::ZERO;
    hits_only.faults = vec![(Fault::CacheDisabled, 0.2)];
    let keys = r#"interval = "50ms", prefix_tokens = 256"#;
    let counts = check(hits_only, keys, "", 20.0).await;
    assert!(counts.hit_usage >= 1.0 && counts.miss >= 1.0, "{counts:?}");
    // Only the misses before the first hit are unknown: P(5 misses first) = 0.36^5 < 1%.
    assert!(counts.unreported < 5.0, "{counts:?}");
}

/// Item 5: a cache of 24 blocks of 128 tokens under ten 1,000-token requests a second. A
/// warm request sent at once finds its prefix; a conversation's next turn a second later
/// finds it evicted by the other requests in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_too_small_for_its_load_misses_after_the_reuse_gap() {
    let mut small = server();
    small.prefill.per_token = Duration::ZERO;
    small.prefill.block_tokens = 128;
    small.prefill.prefix_cache_blocks = 24;
    let workload = "rate = 10\ninput_tokens = 1000\noutput_tokens = 2";
    let at_once = check(
        small.clone(),
        r#"interval = "1500ms", prefix_tokens = 1024, reuse_gap = "0s""#,
        workload,
        4.0,
    )
    .await;
    assert!(at_once.hit_usage >= 3.0, "{at_once:?}");
    let later = check(
        small,
        r#"interval = "1500ms", prefix_tokens = 1024, reuse_gap = "1s""#,
        workload,
        4.0,
    )
    .await;
    assert!(later.miss >= 3.0, "{later:?}");
}

/// Item 2: Anthropic caches only up to a block marked `cache_control`, and only a prompt
/// of the model's minimum or more. The pair marks its shared part, so a 1,024-token prefix
/// hits on a model that caches 1,024; where the model asks for more than its table says
/// (2,048 here), the cold request writes nothing and the pair is `unreported`, never a miss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_caches_the_marked_prefix_from_its_minimum() {
    let claude = "backend = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"";
    let keys = r#"interval = "60ms", prefix_tokens = 1024"#;
    let cached = check_as(server(), claude, keys, "", 4.0).await;
    assert_eq!(cached.hit_usage, cached.total(), "{cached:?}");
    let mut stricter = server();
    stricter.prefill.anthropic_min_cacheable = 2048;
    let below = check_as(stricter, claude, keys, "", 4.0).await;
    assert_eq!(below.miss, 0.0, "{below:?}");
    assert_eq!(
        (below.unreported, below.set_aside_not_written),
        (below.total(), below.total()),
        "{below:?}"
    );
}

/// After a review: a pair waiting out its reuse gap at shutdown is dropped, so the drain
/// does not wait for the gap, and no warm request goes out after the daemon was told to
/// stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_wait_for_a_pairs_gap() {
    let sim = start_sim(server()).await;
    let daemon = start_daemon(&format!(
        r#"
        [[targets]]
        name = "t"
        url = "{}"
        backend = "openai-chat"
        model = "m"
        rate = 0.001
        prefix_cache = {{ interval = "4s", prefix_tokens = 1024, reuse_gap = "3500ms" }}
        "#,
        sim.url()
    ))
    .await;
    // The server's own count of prompt tokens: the cold request's ~1,040 once it was served.
    let client = reqwest::Client::new();
    let served = || async {
        let text = client
            .get(format!("{}/metrics", sim.url()))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|l| l.starts_with("vllm:prompt_tokens_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while served().await < 1000.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no cold request in 15 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cold = served().await;
    let stopping = std::time::Instant::now();
    daemon.stop().await;
    let took = stopping.elapsed();
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        served().await,
        cold,
        "a warm request went out after shutdown began"
    );
}
