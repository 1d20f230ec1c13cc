//! The session check against a real llama-server (`--jinja`) with the tiny random-weight
//! model. Ignored by `cargo test`; scripts/real-server/test.sh runs it (.ci/run does).
//!
//! What this server does with the tiny model: its template has no tool support, so the
//! tools are ignored and the turns that need a call get text to the length limit
//! (`truncated`, or `no_tool_call` where it stops sooner); no call, no
//! result, no grounded turn. What it can show, it must: every later turn's history (the
//! model's own answers fed back) accepted, turn after turn, never `history_rejected`; its
//! prompt cache (`timings.cache_n`) serving each later turn the previous one's prompt; and a
//! depth turn past a slot's window refused as `context_length`, in llama-server's words.

use crate::common;

use std::time::Duration;

use common::{llama, start_daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn a_real_server_accepts_the_history_caches_it_and_refuses_a_depth_past_its_window() {
    // Four slots of 2,048 tokens each.
    let server = llama::start(&llama::tiny(), 8192, &["--jinja"]).await;
    let toml = format!(
        r#"
        [[targets]]
        name = "llama"
        backend = "openai-chat"
        url = "{}"
        model = "tiny"
        rate = 0.001
        session = {{ interval = "1s", human_gap = "20ms", tool_gap = "10ms", max_tokens = 16, depth_tokens = 3000, depth_every = 1 }}
        "#,
        server.url
    );
    let daemon = start_daemon(&toml).await;
    let turns = |s: &common::Scrape, labels: &[(&str, &str)]| {
        let mut all = vec![("target", "llama")];
        all.extend_from_slice(labels);
        s.sum("inferprobe_session_turns_total", &all)
    };
    let s = daemon
        .wait_for(Duration::from_secs(120), |s| {
            // Eight later turns judged too: a turn whose previous turn added less than
            // what earlier turns could leave cached is not judged (issue 61), so four
            // sessions may judge seven.
            s.sum("inferprobe_sessions_total", &[("target", "llama")]) >= 4.0
                && s.sum(
                    "inferprobe_session_turn_cache_total",
                    &[("target", "llama")],
                ) >= 8.0
        })
        .await;
    daemon.stop().await;
    let results: Vec<String> = s
        .matching("inferprobe_session_turns_total", &[("target", "llama")])
        .filter(|x| x.value > 0.0)
        .map(|x| {
            format!(
                "{:?} {:?} {}",
                x.labels.get("turn"),
                x.labels.get("result"),
                x.value
            )
        })
        .collect();
    let sessions = s.sum("inferprobe_sessions_total", &[("target", "llama")]);
    assert_eq!(
        turns(&s, &[("result", "history_rejected")]),
        0.0,
        "{results:?}"
    );
    // The plain turns answered, every session.
    for turn in ["follow_up", "parallel"] {
        assert!(
            turns(&s, &[("turn", turn)]) >= sessions,
            "{turn}: {results:?}"
        );
    }
    assert!(
        turns(&s, &[("turn", "follow_up"), ("result", "ok")]) >= sessions,
        "{results:?}"
    );
    // Each depth turn past the slot's 2,048 tokens: the window, in the server's words.
    let depth = turns(&s, &[("turn", "depth")]);
    assert!(depth >= sessions, "{results:?}");
    assert_eq!(
        turns(&s, &[("turn", "depth"), ("result", "context_length")]),
        depth,
        "{results:?}"
    );
    // The later turns found the previous turn's prompt in the slot's cache.
    let hits = s.sum(
        "inferprobe_session_turn_cache_total",
        &[("target", "llama"), ("result", "hit")],
    );
    let judged = s.sum(
        "inferprobe_session_turn_cache_total",
        &[("target", "llama")],
    );
    eprintln!("llama-server: {results:?}; later turns {hits} of {judged} hit");
    assert!(
        judged >= 8.0 && hits >= 0.9 * judged,
        "{hits} of {judged}\n{}",
        s.text
    );
}
