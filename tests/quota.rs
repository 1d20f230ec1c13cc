//! Rate-limit headroom (issue 59, item 3): a hosted API's quota, as its responses report
//! it, on /metrics before the first 429 (the simulator's `--rate-limit`, in OpenAI's and
//! Anthropic's headers), and the `Retry-After` of the 429 itself.

use crate::common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::SimConfig;
use inferprobe::sim::ratelimit::RateLimitFlags;

/// A simulator with a quota of `limit` requests in a 10-minute window.
async fn limited(limit: u32) -> common::Sim {
    start_sim(SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::from_micros(200),
        limits: Box::new(RateLimitFlags {
            rate_limit: Some(limit),
            rate_limit_window: Duration::from_secs(600),
        }),
        ..SimConfig::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_running_down_is_visible_before_the_first_429() {
    const LIMIT: u32 = 30;
    let (openai, anthropic) = (limited(LIMIT).await, limited(LIMIT).await);
    let target = |name: &str, backend: &str, url: &str| {
        format!(
            r#"
            [[targets]]
            name = "{name}"
            backend = "{backend}"
            url = "{url}"
            model = "m"
            rate = 15
            output_tokens = 4
            "#
        )
    };
    let toml = format!(
        "seed = 3\n{}{}",
        target("openai", "openai-chat", &openai.url()),
        target("claude", "anthropic", &anthropic.url()),
    );
    let daemon = start_daemon(&toml).await;
    let started = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let remaining = |s: &Scrape, target: &str| {
        let labels = [("target", target), ("resource", "requests")];
        s.matching("inferprobe_ratelimit_remaining", &labels)
            .next()
            .map(|sample| sample.value)
    };
    // Every scrape until both are refused: what an SRE's dashboard would have shown.
    let mut seen: Vec<(String, Option<f64>, f64)> = Vec::new();
    let last = loop {
        let s = daemon.scrape().await;
        for t in ["openai", "claude"] {
            seen.push((t.into(), remaining(&s, t), s.errors(t, "rate_limited")));
        }
        if ["openai", "claude"]
            .iter()
            .all(|t| s.errors(t, "rate_limited") >= 3.0)
        {
            break s;
        }
        assert!(seen.len() < 4000, "no 429 came: {seen:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    daemon.stop().await;
    for t in ["openai", "claude"] {
        let mine: Vec<_> = seen.iter().filter(|(name, ..)| name == t).collect();
        // Before the first 429, the headroom ran down where a dashboard shows it.
        let before: Vec<f64> = mine
            .iter()
            .filter(|(_, _, errors)| *errors == 0.0)
            .filter_map(|(_, left, _)| *left)
            .collect();
        assert!(
            before.iter().any(|&left| left <= f64::from(LIMIT) / 4.0),
            "{t}: the quota never read low before a 429: {before:?}"
        );
        assert!(
            before.windows(2).all(|w| w[1] <= w[0]),
            "{t}: it only runs down within a window: {before:?}"
        );
        let labels = [("target", t), ("resource", "requests")];
        assert_eq!(
            last.sum("inferprobe_ratelimit_remaining", &labels),
            0.0,
            "{t}"
        );
        assert_eq!(
            last.sum("inferprobe_ratelimit_limit", &labels),
            f64::from(LIMIT),
            "{t}"
        );
        // The window resets ten minutes after it began, give or take the test's seconds.
        let reset = last.sum("inferprobe_ratelimit_reset_timestamp_seconds", &labels);
        let expected = started.as_secs_f64() + 600.0;
        assert!(
            (reset - expected).abs() < 30.0,
            "{t}: reset {reset} vs {expected}"
        );
        // The 429's Retry-After: the rest of the window.
        let retry = last.sum("inferprobe_retry_after_seconds", &[("target", t)]);
        assert!((500.0..=600.0).contains(&retry), "{t}: Retry-After {retry}");
        // Only the resources the server reports have series.
        let tokens = [("target", t), ("resource", "tokens")];
        assert_eq!(
            last.matching("inferprobe_ratelimit_remaining", &tokens)
                .count(),
            0
        );
    }
}
