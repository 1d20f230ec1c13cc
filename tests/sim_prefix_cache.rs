//! The simulator's prefix cache (issue 35, item 5), as a client sees it over HTTP: the
//! second of two prompts sharing a long prefix reports the prefix's whole blocks as cached
//! and gets its first token sooner by the prefill they saved; the cache faults make it miss.

use crate::common;

use std::time::{Duration, Instant};

use common::{start_daemon, start_sim};
use inferprobe::sim::SimConfig;
use serde_json::{Value, json};

/// 200 words shared by both prompts; the nonce first makes them new to the cache.
fn prompt(nonce: &str, ending: &str) -> String {
    let shared: Vec<String> = (0..200).map(|i| format!("w{i}")).collect();
    format!("{nonce} {} {ending}", shared.join(" "))
}

/// (cached tokens as usage reports them, time to the first byte of the body)
async fn ask(url: &str, text: &str, fault: Option<&str>) -> (Option<u64>, Duration) {
    let client = reqwest::Client::new();
    let mut request = client
        .post(format!("{url}/v1/chat/completions"))
        .json(&json!({
            "model": "m", "max_tokens": 2, "stream": false,
            "messages": [{ "role": "user", "content": text }],
        }));
    if let Some(fault) = fault {
        request = request.header("x-inferprobe-fault", fault);
    }
    let start = Instant::now();
    let body: Value = request.send().await.unwrap().json().await.unwrap();
    let elapsed = start.elapsed();
    let cached = body["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64();
    (cached, elapsed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warmed_prefix_is_served_from_the_cache_and_saves_its_prefill() {
    let mut config = SimConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(1),
        ..SimConfig::default()
    };
    config.prefill.per_token = Duration::from_millis(1);
    let sim = start_sim(config).await;
    let url = sim.url();
    let (cold, cold_time) = ask(&url, &prompt("n1", "first question"), None).await;
    let (warm, warm_time) = ask(&url, &prompt("n1", "second one"), None).await;
    assert_eq!(cold, Some(0));
    // The nonce and 200 shared words: 201 words, 12 whole blocks of 16.
    assert_eq!(warm, Some(192));
    // 192 tokens' prefill (192 ms) saved; on a busy machine the cold one is still slower
    // by most of it.
    assert!(
        cold_time > warm_time + Duration::from_millis(120),
        "cold {cold_time:?}, warm {warm_time:?}"
    );
    // Another nonce shares nothing.
    assert_eq!(ask(&url, &prompt("n2", "x"), None).await.0, Some(0));
    // Faults: disabled reads nothing; evicted empties the cache first.
    assert_eq!(
        ask(&url, &prompt("n2", "y"), Some("cache_disabled"))
            .await
            .0,
        Some(0)
    );
    assert_eq!(
        ask(&url, &prompt("n2", "z"), Some("cache_evicts")).await.0,
        Some(0)
    );
    assert_eq!(ask(&url, &prompt("n2", "w"), None).await.0, Some(192));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_cache_usage_says_nothing_about_caching() {
    let mut config = SimConfig::default();
    config.prefill.prefix_cache_blocks = 0;
    let sim = start_sim(config).await;
    let url = sim.url();
    ask(&url, &prompt("n1", "a"), None).await;
    assert_eq!(ask(&url, &prompt("n1", "b"), None).await.0, None);
}

/// The daemon reads what the simulator reports (item 1, end to end). Workload probes start
/// with a nonce, so the cache never serves them: 0 cached tokens, reported by every probe.
/// A configured `shared_prefix_tokens` goes before the nonce on purpose, and its whole
/// blocks are served to every probe after the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_probes_hit_only_their_configured_shared_prefix() {
    let sim = start_sim(SimConfig::default()).await;
    let daemon = start_daemon(&format!(
        r#"
        [defaults]
        url = "{}"
        model = "m"
        backend = "openai-chat"
        rate = 10
        input_tokens = 64
        output_tokens = 2
        [[targets]]
        name = "plain"
        [[targets]]
        name = "shared"
        shared_prefix_tokens = 48
        "#,
        sim.url()
    ))
    .await;
    let scrape = daemon
        .wait_for(Duration::from_secs(30), |s| {
            s.successes("plain") >= 5.0 && s.successes("shared") >= 5.0
        })
        .await;
    daemon.stop().await;
    let cached = |target: &str| -> u64 {
        let prefix = format!("inferprobe_prompt_cached_tokens_total{{target=\"{target}\"");
        let line = scrape
            .text
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no cached tokens series for {target}:\n{}", scrape.text));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(cached("plain"), 0);
    let shared = cached("shared");
    assert!(
        shared >= 4 * 32 && shared % 16 == 0,
        "shared prefix: {shared} cached tokens"
    );
}

/// A daemon checking the simulator at `url` as target `t` (a pair every 50 ms, a prefix of
/// `prefix_tokens`; almost no workload), with `extra` keys on the target.
async fn checking(url: &str, prefix_tokens: u32, extra: &str) -> common::Daemon {
    start_daemon(&format!(
        r#"
        [[targets]]
        name = "t"
        url = "{url}"
        model = "m"
        backend = "openai-chat"
        rate = 0.001
        prefix_cache = {{ interval = "50ms", prefix_tokens = {prefix_tokens} }}
        {extra}
        "#
    ))
    .await
}

/// The check end to end (item 2): pairs against the simulator judged by what it reports,
/// by TTFT where it reports nothing, and misses where its cache is off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_judges_hits_misses_and_unreported_caches() {
    let checks = |scrape: &common::Scrape, result: &str, rule: &str| -> f64 {
        let prefix = "inferprobe_prefix_cache_checks_total{target=\"t\"";
        scrape
            .text
            .lines()
            .filter(|l| l.starts_with(prefix))
            .filter(|l| l.contains(&format!("result=\"{result}\",rule=\"{rule}\"")))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    let total = |s: &common::Scrape| -> f64 {
        [
            ("hit", "usage"),
            ("hit", "ttft"),
            ("miss", "usage"),
            ("unreported", "ttft"),
            ("failed", "none"),
        ]
        .iter()
        .map(|(r, u)| checks(s, r, u))
        .sum()
    };
    // (cache blocks, usage sent, fault, what every check must be). Without usage the server
    // says nothing: a cache that works shows in TTFT; one that is off cannot be told from
    // a server that does not say, so it is never a miss.
    let cases = [
        (4096, true, None, ("hit", "usage")),
        (4096, true, Some("cache_disabled"), ("miss", "usage")),
        (4096, false, None, ("hit", "ttft")),
        (0, false, None, ("unreported", "ttft")),
    ];
    for (blocks, usage, fault, (result, rule)) in cases {
        let mut config = SimConfig {
            ttft: Duration::from_millis(10),
            itl: Duration::from_millis(1),
            ..SimConfig::default()
        };
        config.prefill.per_token = Duration::from_micros(200);
        config.prefill.prefix_cache_blocks = blocks;
        config.usage = usage;
        let sim = start_sim(config).await;
        let headers = fault.map_or(String::new(), |f| {
            format!("headers = {{ \"x-inferprobe-fault\" = \"{f}\" }}")
        });
        let daemon = checking(&sim.url(), 512, &headers).await;
        let scrape = daemon
            .wait_for(Duration::from_secs(30), |s| total(s) >= 3.0)
            .await;
        daemon.stop().await;
        let judged = checks(&scrape, result, rule);
        assert_eq!(
            judged,
            total(&scrape),
            "{blocks} blocks, fault {fault:?}: every check {result}/{rule}\n{}",
            scrape.text
        );
        // The pair's requests are not the target's probes.
        assert!(scrape.successes("t") <= 1.0, "{}", scrape.successes("t"));
    }
}

/// The simulator as a gateway over two replicas (item 5): round-robin sends a pair's
/// second request to the replica that does not hold the prefix; prefix affinity sends it
/// to the one that does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_routes_by_turn_or_by_prefix() {
    use inferprobe::sim::Route;
    for (route, warm_hits) in [(Route::RoundRobin, false), (Route::PrefixAffinity, true)] {
        let mut config = SimConfig::default();
        config.gateway.replicas = 2;
        config.gateway.route = route;
        let sim = start_sim(config).await;
        let url = sim.url();
        for nonce in ["n1", "n2", "n3"] {
            let (cold, _) = ask(&url, &prompt(nonce, "first"), None).await;
            let (warm, _) = ask(&url, &prompt(nonce, "second"), None).await;
            assert_eq!(cold, Some(0), "{route:?}");
            let expected = if warm_hits { 192 } else { 0 };
            assert_eq!(warm, Some(expected), "{route:?} {nonce}");
        }
    }
}

/// The check spends from the target's `max_output_tokens_per_hour` (4 tokens a request, 8 a
/// pair), so the key bounds the target's cost whatever sends: room for two pairs, then
/// pairs are skipped arrivals (`reason="budget"`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_spends_from_the_targets_output_budget() {
    let sim = start_sim(SimConfig::default()).await;
    let daemon = checking(&sim.url(), 64, "max_output_tokens_per_hour = 16").await;
    let skipped = |s: &common::Scrape| {
        s.sum(
            "inferprobe_requests_skipped_total",
            &[("target", "t"), ("reason", "budget")],
        )
    };
    let scrape = daemon
        .wait_for(Duration::from_secs(30), |s| skipped(s) >= 3.0)
        .await;
    daemon.stop().await;
    let checks = scrape.sum("inferprobe_prefix_cache_checks_total", &[("target", "t")]);
    assert_eq!(checks, 2.0, "{}", scrape.text);
}

/// The status page lists the recent pairs: the cached tokens the cold and the warm
/// request reported (a 512-word prefix after a one-word nonce: 32 whole blocks of 16), and
/// their TTFTs, so a miss can be read without a query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_each_pairs_cached_tokens() {
    let sim = start_sim(SimConfig::default()).await;
    let daemon = checking(&sim.url(), 512, "").await;
    daemon
        .wait_for(Duration::from_secs(30), |s| {
            s.sum(
                "inferprobe_prefix_cache_checks_total",
                &[("target", "t"), ("result", "hit")],
            ) >= 2.0
        })
        .await;
    let page = daemon.get("/", None).await.text().await.unwrap();
    daemon.stop().await;
    let table = page
        .split("<h3>Prefix cache</h3>")
        .nth(1)
        .unwrap_or_else(|| panic!("no prefix-cache table:\n{page}"));
    assert!(
        table.contains("<td>hit</td><td>usage</td><td>0 → 512</td>"),
        "{table}"
    );
    assert!(table.contains("prefix-"), "the warm request's id: {table}");
}
