//! The session check end to end (issue 50): the daemon holds conversations with the
//! simulator, which follows tools, caches the whole conversation, and fails the ways the
//! check judges. Every dialect runs whole sessions, grounded and cached; three replicas, one
//! refusing tool-call history and one ignoring tool results, each have their failure
//! counted on them alone while their single-turn probes succeed; a round-robin gateway
//! serves a third of the later turns from the cache, a session-affine one all of those
//! that send the header.

use crate::common;

use std::time::Duration;

use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::{Fault, Route, SimConfig};

/// Short gaps: the session's shape at a pace a test can wait for. The simulator caches
/// 16-token blocks (and counts no Responses `instructions`: a first turn there fills no
/// block, and the turns after it are too short to judge).
const SESSION: &str = r#"interval = "300ms", human_gap = "10ms", tool_gap = "5ms", long_gap = "20ms", block_tokens = 16"#;

fn sim(faults: Vec<(Fault, f64)>) -> SimConfig {
    let mut config = SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(1),
        faults,
        max_model_len: Some(8192),
        ..SimConfig::default()
    };
    config.prefill.anthropic_min_cacheable = 1;
    config
}

fn turns(scrape: &Scrape, target: &str, labels: &[(&str, &str)]) -> f64 {
    let mut all = vec![("target", target)];
    all.extend_from_slice(labels);
    scrape.sum("inferprobe_session_turns_total", &all)
}

fn sessions(scrape: &Scrape, target: &str) -> f64 {
    scrape.sum("inferprobe_sessions_total", &[("target", target)])
}

/// Whether a refusal of a kind holds for the target (what its page reads): 1 or 0.
fn open(scrape: &Scrape, target: &str, refusal: &str) -> f64 {
    scrape.sum(
        "inferprobe_session_refusal_open",
        &[("target", target), ("refusal", refusal)],
    )
}

fn cache(scrape: &Scrape, target: &str, labels: &[(&str, &str)]) -> f64 {
    let mut all = vec![("target", target)];
    all.extend_from_slice(labels);
    scrape.sum("inferprobe_session_turn_cache_total", &all)
}

/// Every (turn, result) of `target` with a count, for a failure's message.
fn results(scrape: &Scrape, target: &str) -> Vec<String> {
    scrape
        .matching("inferprobe_session_turns_total", &[("target", target)])
        .filter(|s| s.value > 0.0)
        .map(|s| {
            let get = |k: &str| s.labels.get(k).map_or("", String::as_str);
            format!("{} {} {}", get("turn"), get("result"), s.value)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dialect_holds_whole_sessions_grounded_and_cached() {
    let sim = start_sim(sim(Vec::new())).await;
    let target = |name: &str, backend: &str| {
        format!(
            r#"
            [[targets]]
            name = "{name}"
            url = "{}"
            backend = "{backend}"
            model = "m"
            rate = 0.001
            session = {{ {SESSION}, depth_tokens = "served", depth_every = 2 }}
            "#,
            sim.url()
        )
    };
    let daemon = start_daemon(&format!(
        "{}{}{}",
        target("chat", "openai-chat"),
        target("messages", "anthropic"),
        target("responses", "openai-responses"),
    ))
    .await;
    let names = ["chat", "messages", "responses"];
    let scrape = daemon
        .wait_for(Duration::from_secs(60), |s| {
            names.iter().all(|t| sessions(s, t) >= 4.0)
        })
        .await;
    daemon.stop().await;
    for t in names {
        let all = turns(&scrape, t, &[]);
        let ok = turns(&scrape, t, &[("result", "ok")]);
        assert_eq!(ok, all, "{t}: every turn ok: {:?}", results(&scrape, t));
        for turn in [
            "first",
            "tool_result",
            "follow_up",
            "parallel",
            "parallel_result",
            "long_gap",
            "depth",
        ] {
            assert!(
                turns(&scrape, t, &[("turn", turn), ("result", "ok")]) >= 1.0,
                "{t}: no ok {turn} turn: {:?}",
                results(&scrape, t)
            );
        }
        assert_eq!(
            scrape.sum(
                "inferprobe_sessions_total",
                &[("target", t), ("result", "failed")]
            ),
            0.0,
            "{t}"
        );
        // Every later turn judged found the previous turn's prompt cached. Judged are the
        // turns whose previous turn added a whole block beyond what earlier turns could
        // leave (here the parallel_result turns, and on chat the parallel ones: the others add fewer words
        // than a 16-word block).
        let hits = cache(&scrape, t, &[("result", "hit")]);
        assert!(hits >= 4.0, "{t}: {hits} hits\n{}", scrape.text);
        let misses: Vec<String> = scrape
            .matching(
                "inferprobe_session_turn_cache_total",
                &[("target", t), ("result", "miss")],
            )
            .filter(|s| s.value > 0.0)
            .map(|s| format!("{:?} {}", s.labels.get("turn"), s.value))
            .collect();
        assert!(misses.is_empty(), "{t}: misses {misses:?}");
        assert_eq!(cache(&scrape, t, &[("result", "unreported")]), 0.0, "{t}");
        // The per-turn series: TTFT by kind, the context growing turn by turn. The turns
        // whose reply began with a call (first, parallel: forced) are timed to the call,
        // apart from the text turns' TTFT.
        let (_, all) = scrape.histogram("inferprobe_session_turn_e2el_seconds", t);
        assert!(all >= 20.0, "{t}: {all} turns");
        let (_, text) = scrape.histogram("inferprobe_session_turn_ttft_seconds", t);
        let (_, calls) = scrape.histogram("inferprobe_session_turn_time_to_call_seconds", t);
        // (A scrape can fall between a turn's TTFT and its end-to-end latency: one apart.)
        assert!(
            (text + calls - all).abs() <= 1.0,
            "{t}: {text} text and {calls} call turns of {all}"
        );
        let count = |name: &str, turn: &str| scrape.sum(name, &[("target", t), ("turn", turn)]);
        for turn in ["first", "parallel"] {
            assert_eq!(
                count("inferprobe_session_turn_ttft_seconds_count", turn),
                0.0,
                "{t} {turn}"
            );
            assert!(
                count("inferprobe_session_turn_time_to_call_seconds_count", turn) >= 4.0,
                "{t} {turn}"
            );
        }
        for turn in ["tool_result", "follow_up", "parallel_result"] {
            assert_eq!(
                count("inferprobe_session_turn_time_to_call_seconds_count", turn),
                0.0,
                "{t} {turn}"
            );
        }
        // Nothing refused: no refusal holds.
        for refusal in ["tools", "history", "window", "depth"] {
            assert_eq!(open(&scrape, t, refusal), 0.0, "{t} {refusal}");
        }
        for tokens in [
            "inferprobe_session_cached_tokens_total",
            "inferprobe_session_output_tokens_total",
        ] {
            assert!(scrape.sum(tokens, &[("target", t)]) > 0.0, "{t}: {tokens}");
        }
        let prompt = |turn| {
            scrape.sum(
                "inferprobe_session_prompt_tokens_total",
                &[("target", t), ("turn", turn)],
            ) / turns(&scrape, t, &[("turn", turn)])
        };
        assert!(
            prompt("first") < prompt("tool_result")
                && prompt("tool_result") < prompt("parallel_result"),
            "{t}: the context grows: {} {} {}",
            prompt("first"),
            prompt("tool_result"),
            prompt("parallel_result")
        );
        assert_eq!(
            scrape.sum("inferprobe_session_served_window_tokens", &[("target", t)]),
            8192.0,
            "{t}"
        );
        let depth = scrape.sum("inferprobe_session_depth_tokens", &[("target", t)]);
        assert!((6000.0..8192.0).contains(&depth), "{t}: depth {depth}");
    }
    // The session's requests are none of the workload's.
    assert!(scrape.requests("chat") < 5.0, "{}", scrape.requests("chat"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_replica_has_its_own_failure_counted_and_the_healthy_one_none() {
    let healthy = start_sim(sim(Vec::new())).await;
    let rejecting = start_sim(sim(vec![(Fault::HistoryReject, 1.0)])).await;
    let ignoring = start_sim(sim(vec![(Fault::IgnoreToolResults, 1.0)])).await;
    let target = |name: &str, url: String| {
        format!(
            r#"
            [[targets]]
            name = "{name}"
            url = "{url}"
            backend = "openai-chat"
            model = "m"
            rate = 20
            input_tokens = 8
            output_tokens = 4
            session = {{ {SESSION} }}
            "#
        )
    };
    let daemon = start_daemon(&format!(
        "{}{}{}",
        target("healthy", healthy.url()),
        target("rejecting", rejecting.url()),
        target("ignoring", ignoring.url()),
    ))
    .await;
    let names = ["healthy", "rejecting", "ignoring"];
    let scrape = daemon
        .wait_for(Duration::from_secs(60), |s| {
            // Both counts are waited for: sessions can finish four before twenty probes
            // went out on a busy machine (CI saw 18).
            names
                .iter()
                .all(|t| sessions(s, t) >= 4.0 && s.requests(t) >= 20.0)
        })
        .await;
    daemon.stop().await;
    // Single-turn probes all succeed on every replica.
    for t in names {
        assert!(scrape.requests(t) >= 20.0, "{t}: {}", scrape.requests(t));
        assert_eq!(scrape.all_errors(t), 0.0, "{t}");
    }
    // Healthy: nothing but ok.
    assert_eq!(
        turns(&scrape, "healthy", &[("result", "ok")]),
        turns(&scrape, "healthy", &[]),
        "{:?}",
        results(&scrape, "healthy")
    );
    // Rejecting: the first turn accepted, the second (the first with a tool call in the
    // history) refused in every session, and nothing after it sent.
    let ended = sessions(&scrape, "rejecting");
    let rejected = turns(&scrape, "rejecting", &[("result", "history_rejected")]);
    let first_ok = turns(&scrape, "rejecting", &[("turn", "first"), ("result", "ok")]);
    assert!(
        rejected >= 4.0 && rejected == ended,
        "{:?}",
        results(&scrape, "rejecting")
    );
    assert!(first_ok >= ended, "{:?}", results(&scrape, "rejecting"));
    assert_eq!(
        turns(&scrape, "rejecting", &[("turn", "tool_result")]),
        rejected,
        "{:?}",
        results(&scrape, "rejecting")
    );
    // The rejecting replica's refusal holds (what its page reads); nothing else does.
    assert_eq!(open(&scrape, "rejecting", "history"), 1.0);
    for (t, refusal) in [
        ("rejecting", "tools"),
        ("rejecting", "window"),
        ("healthy", "history"),
        ("ignoring", "history"),
    ] {
        assert_eq!(open(&scrape, t, refusal), 0.0, "{t} {refusal}");
    }
    // Ignoring: both grounded turns ignored in every session, everything else ok.
    let ignored = turns(&scrape, "ignoring", &[("result", "tool_result_ignored")]);
    let grounded = turns(&scrape, "ignoring", &[("turn", "tool_result")])
        + turns(&scrape, "ignoring", &[("turn", "parallel_result")]);
    assert!(
        ignored >= 8.0 && ignored == grounded,
        "{:?}",
        results(&scrape, "ignoring")
    );
    assert_eq!(
        turns(&scrape, "ignoring", &[("result", "ok")]) + ignored,
        turns(&scrape, "ignoring", &[]),
        "{:?}",
        results(&scrape, "ignoring")
    );
}

/// The later turns' hits through a gateway over three replicas, with the workload's
/// traffic in between (gaps long enough for several of its requests, so round robin lands
/// anywhere), by affinity header sent or not;
/// and the switches of replica the gateway's `x-served-by` shows.
async fn through_gateway(route: Route) -> Scrape {
    let mut config = sim(Vec::new());
    config.gateway.replicas = 3;
    config.gateway.route = route;
    let sim = start_sim(config).await;
    let daemon = start_daemon(&format!(
        r#"
        [[targets]]
        name = "pool"
        url = "{}"
        backend = "openai-chat"
        model = "m"
        rate = 40
        input_tokens = 8
        output_tokens = 2
        session = {{ interval = "500ms", human_gap = "100ms", tool_gap = "75ms", affinity_headers = ["x-session-id"], served_by = ["x-served-by"], block_tokens = 16 }}
        "#,
        sim.url()
    ))
    .await;
    let scrape = daemon
        .wait_for(Duration::from_secs(90), |s| {
            cache(s, "pool", &[("affinity", "none")]) >= 60.0
                && cache(s, "pool", &[("affinity", "header")]) >= 60.0
        })
        .await;
    daemon.stop().await;
    scrape
}

fn hit_share(scrape: &Scrape, affinity: &str) -> f64 {
    cache(scrape, "pool", &[("affinity", affinity), ("result", "hit")])
        / cache(scrape, "pool", &[("affinity", affinity)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_robin_gateway_serves_a_third_of_later_turns_from_the_cache() {
    let scrape = through_gateway(Route::RoundRobin).await;
    for affinity in ["none", "header"] {
        let share = hit_share(&scrape, affinity);
        eprintln!("round robin, affinity {affinity}: {share:.2} of later turns hit");
        // About 1/3: the gaps hold about 3 of the workload's requests (75 ms and more at
        // 40 a second), so their number modulo 3 replicas is near uniform. At 5 ms gaps
        // (0.2 requests) the next turn mostly went to the next replica, and a loaded CI
        // run read 0.08. Binomial(60+, 1/3) stays within these bounds but for ~1e-3.
        assert!((0.12..0.58).contains(&share), "{affinity}: {share}");
    }
    let routed = scrape.sum(
        "inferprobe_session_routed_turns_total",
        &[("target", "pool")],
    );
    let switched = scrape.sum(
        "inferprobe_session_replica_switches_total",
        &[("target", "pool")],
    );
    assert!(routed >= 100.0, "{routed}");
    eprintln!("round robin: {switched} of {routed} later turns switched replica");
    // The verdicts follow the replicas: a judged turn hit exactly when the previous turn's
    // replica served it (issue 61: a turn landing on the replica of an earlier turn got
    // back half the previous prompt and was judged a hit). So the hit share is the share
    // of judged turns that stayed.
    let routed_cache = |result: &str, replica: &str| {
        scrape.sum(
            "inferprobe_session_routed_cache_total",
            &[("target", "pool"), ("result", result), ("replica", replica)],
        )
    };
    let (hit_same, hit_other) = (routed_cache("hit", "same"), routed_cache("hit", "other"));
    let (miss_same, miss_other) = (routed_cache("miss", "same"), routed_cache("miss", "other"));
    eprintln!(
        "judged turns: hit/same {hit_same}, hit/other {hit_other}, miss/same {miss_same}, miss/other {miss_other}"
    );
    assert!(hit_same >= 10.0 && miss_other >= 20.0, "{}", scrape.text);
    assert_eq!(
        hit_other, 0.0,
        "a hit on another replica than the previous turn's"
    );
    assert_eq!(miss_same, 0.0, "a miss on the previous turn's replica");
    assert_eq!(
        hit_same + miss_other,
        cache(&scrape, "pool", &[("result", "hit")])
            + cache(&scrape, "pool", &[("result", "miss")]),
        "every judged turn named its replica"
    );
    assert!(
        (0.45..0.9).contains(&(switched / routed)),
        "{switched} of {routed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_affine_gateway_serves_every_later_turn_that_sends_the_header() {
    let scrape = through_gateway(Route::SessionHeader).await;
    assert_eq!(hit_share(&scrape, "header"), 1.0, "{}", scrape.text);
    // Sessions without the header go round robin: the two are told apart.
    let none = hit_share(&scrape, "none");
    eprintln!("session header: 1.00 of later turns with it hit, {none:.2} without");
    assert!(none < 0.6, "{none}");
}

/// A day of sessions at the default interval (144), time-scaled: on a healthy server in
/// every dialect, not one turn is counted failed and not one later turn missed the cache,
/// so nothing the session alerts read moves (their rules are held to a healthy day in
/// config/prometheus/tests/session.test.yml).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_of_healthy_sessions_counts_nothing_failed() {
    let mut config = sim(Vec::new());
    config.ttft = Duration::from_millis(1);
    config.itl = Duration::ZERO;
    let sim = start_sim(config).await;
    let target = |name: &str, backend: &str| {
        format!(
            r#"
            [[targets]]
            name = "{name}"
            url = "{}"
            backend = "{backend}"
            model = "m"
            rate = 0.001
            session = {{ interval = "100ms", human_gap = "5ms", tool_gap = "2ms", long_gap = "10ms", max_tokens = 16, block_tokens = 16, depth_tokens = 2000, depth_every = 6 }}
            "#,
            sim.url()
        )
    };
    let daemon = start_daemon(&format!(
        "{}{}{}",
        target("chat", "openai-chat"),
        target("messages", "anthropic"),
        target("responses", "openai-responses"),
    ))
    .await;
    let names = ["chat", "messages", "responses"];
    let scrape = daemon
        .wait_for(Duration::from_secs(120), |s| {
            names.iter().all(|t| sessions(s, t) >= 144.0)
        })
        .await;
    daemon.stop().await;
    for t in names {
        assert!(
            sessions(&scrape, t) >= 144.0,
            "{t}: {}",
            sessions(&scrape, t)
        );
        assert_eq!(
            turns(&scrape, t, &[("result", "ok")]),
            turns(&scrape, t, &[]),
            "{t}: {:?}",
            results(&scrape, t)
        );
        assert_eq!(cache(&scrape, t, &[("result", "miss")]), 0.0, "{t}");
        assert!(turns(&scrape, t, &[("turn", "depth")]) >= 24.0, "{t}");
    }
}

/// A chat server that answers a request with `messages` of at most `accept_messages`
/// entries (a system prompt and one question: a single turn) with a short text stream, and
/// refuses the rest with HTTP 400; once `refuse_all_after` requests were answered, it
/// refuses everything. Raw TCP, one request per connection.
async fn refusing_server(accept_messages: usize, refuse_all_after: u64) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let answered = std::sync::Arc::clone(&answered);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let (head_end, length) = loop {
                    let Ok(n) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..at]).to_ascii_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (at + 4, length);
                    }
                };
                while buf.len() < head_end + length {
                    let Ok(n) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body: serde_json::Value =
                    serde_json::from_slice(&buf[head_end..]).unwrap_or_default();
                let messages = body["messages"].as_array().map_or(0, Vec::len);
                let done = answered.load(std::sync::atomic::Ordering::SeqCst);
                let response = if messages <= accept_messages && done < refuse_all_after {
                    answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let events = concat!(
                        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello there.\"},\"finish_reason\":null}]}\n\n",
                        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":3}}\n\n",
                        "data: [DONE]\n\n"
                    );
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{events}",
                        events.len()
                    )
                } else {
                    let error = r#"{"object":"error","message":"Conversation roles must alternate user/assistant/user/assistant/...","type":"BadRequestError","code":400}"#;
                    format!(
                        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{error}",
                        error.len()
                    )
                };
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    url
}

/// A refusal of a later turn is the history's only when the session's question alone is
/// accepted right after it: a server that refuses every request by then (a quota spent, a
/// model unloaded behind a 400) has its turns counted under their error category.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_the_historys_only_when_a_single_turn_is_accepted() {
    // Accepts single turns only: the history is what it refuses.
    let history = refusing_server(2, u64::MAX).await;
    // Accepts the first request of all, then nothing: no history's fault.
    let everything = refusing_server(usize::MAX, 1).await;
    let daemon = start_daemon(&format!(
        r#"
        [[targets]]
        name = "history"
        url = "{history}"
        backend = "openai-chat"
        model = "m"
        rate = 0.001
        session = {{ {SESSION} }}
        [[targets]]
        name = "everything"
        url = "{everything}"
        backend = "openai-chat"
        model = "m"
        rate = 0.001
        session = {{ {SESSION} }}
        "#
    ))
    .await;
    let scrape = daemon
        .wait_for(Duration::from_secs(60), |s| {
            sessions(s, "history") >= 2.0 && sessions(s, "everything") >= 2.0
        })
        .await;
    daemon.stop().await;
    // The text answer to a question that needed the tool, then the follow-up refused.
    let rejected = turns(&scrape, "history", &[("result", "history_rejected")]);
    assert_eq!(
        rejected,
        sessions(&scrape, "history"),
        "{:?}",
        results(&scrape, "history")
    );
    assert_eq!(
        turns(&scrape, "everything", &[("result", "history_rejected")]),
        0.0,
        "{:?}",
        results(&scrape, "everything")
    );
    assert!(
        turns(&scrape, "everything", &[("result", "http_4xx")]) >= 1.0,
        "{:?}",
        results(&scrape, "everything")
    );
}

/// Issue 61, item 1: a window shorter than the session's ordinary conversation (no depth
/// turn configured) refuses a later turn of every session as `context_length`, which
/// counts a window refusal (what InferprobeSessionWindowExceeded pages on) and no pass,
/// while the single-turn probes, far shorter, all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_shorter_than_the_conversation_refuses_every_session() {
    let mut config = sim(Vec::new());
    // The first turns fit (about 100 words); the history outgrows it within the session.
    config.max_model_len = Some(180);
    let narrow = start_sim(config).await;
    let daemon = start_daemon(&format!(
        r#"
        [[targets]]
        name = "narrow"
        url = "{}"
        backend = "openai-chat"
        model = "m"
        rate = 20
        input_tokens = 8
        output_tokens = 4
        session = {{ {SESSION} }}
        "#,
        narrow.url()
    ))
    .await;
    let scrape = daemon
        .wait_for(Duration::from_secs(60), |s| sessions(s, "narrow") >= 4.0)
        .await;
    daemon.stop().await;
    let refused = turns(&scrape, "narrow", &[("result", "context_length")]);
    let ended = sessions(&scrape, "narrow");
    assert!(refused >= 4.0, "{:?}", results(&scrape, "narrow"));
    assert_eq!(
        turns(&scrape, "narrow", &[("turn", "depth")]),
        0.0,
        "no depth turn is configured"
    );
    assert_eq!(
        scrape.sum(
            "inferprobe_sessions_total",
            &[("target", "narrow"), ("result", "complete")]
        ),
        0.0,
        "{:?}",
        results(&scrape, "narrow")
    );
    assert!(refused >= ended, "{refused} refusals, {ended} sessions");
    // The window's refusal holds, and it is the only one.
    assert_eq!(open(&scrape, "narrow", "window"), 1.0);
    for refusal in ["tools", "history", "depth"] {
        assert_eq!(open(&scrape, "narrow", refusal), 0.0, "{refusal}");
    }
    assert_eq!(scrape.all_errors("narrow"), 0.0, "single-turn probes fit");
}
