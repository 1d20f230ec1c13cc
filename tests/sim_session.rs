//! The simulator plays an agent's conversation (issue 50, item 6) in the three chat
//! dialects, as the session check sends it: the whole history every turn, built here from
//! the simulator's own streamed answers. It calls the order tool for an id, quotes the
//! tracking code the result holds, talks in between, calls twice for two ids, quotes both;
//! its prefix cache spans the conversation; its faults, window and gateway routes do what
//! docs/simulator.md says.

use crate::common;

use std::time::Duration;

use common::start_sim;
use inferprobe::sim::{Fault, Route, SimConfig};
use serde_json::Value;

#[path = "sim_session/client.rs"]
mod client;

use client::{APIS, Api, Message, Reply, Session, code, result};

fn config() -> SimConfig {
    let mut config = SimConfig {
        ttft: Duration::from_millis(1),
        itl: Duration::from_millis(1),
        seed: Some(5),
        ..SimConfig::default()
    };
    // Anthropic caches nothing under its minimum: a short conversation is cached here.
    config.prefill.anthropic_min_cacheable = 1;
    config
}

const ASK: &str = "What is the tracking code of my order A-4821?";
const FOLLOW_UP: &str = "Thanks. Will it arrive before the weekend?";
const BOTH: &str = "Please look up orders B-1234 and C-5678 at once.";

fn arguments_of(reply: &Reply) -> Vec<&str> {
    reply.calls.iter().map(|c| c.arguments.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_turns_in_every_dialect_with_the_cache_spanning_the_history() {
    let sim = start_sim(config()).await;
    for api in APIS {
        let mut session = Session::new(api, &sim.url());
        let turn1 = session.turn(Some(ASK)).await;
        assert_eq!(turn1.status, 200, "{api:?}: {}", turn1.body);
        assert_eq!(
            arguments_of(&turn1),
            [r#"{"order_id":"A-4821"}"#],
            "{api:?}"
        );
        assert_eq!(turn1.calls[0].name, "get_order_status");
        let prefix = if api == Api::Anthropic {
            "toolu_"
        } else {
            "call_"
        };
        assert!(
            turn1.calls[0].id.starts_with(prefix),
            "{api:?}: {:?}",
            turn1.calls
        );
        let turn2 = session.results(&turn1).await;
        assert!(
            turn2.calls.is_empty() && turn2.text.contains(&code("A-4821")),
            "{api:?}: {turn2:?}"
        );
        let turn3 = session.turn(Some(FOLLOW_UP)).await;
        assert!(
            turn3.calls.is_empty() && !turn3.text.is_empty(),
            "{api:?}: {turn3:?}"
        );
        let turn4 = session.turn(Some(BOTH)).await;
        assert_eq!(
            arguments_of(&turn4),
            [r#"{"order_id":"B-1234"}"#, r#"{"order_id":"C-5678"}"#],
            "{api:?}"
        );
        assert_ne!(turn4.calls[0].id, turn4.calls[1].id);
        assert_ne!(
            turn4.calls[0].id, turn1.calls[0].id,
            "ids are fresh per call"
        );
        let turn5 = session.results(&turn4).await;
        for order in ["B-1234", "C-5678"] {
            assert!(turn5.text.contains(&code(order)), "{api:?}: {turn5:?}");
        }
        // Each turn's prompt begins with the one before: the cache serves it, less at most
        // the last partial block of 16.
        let turns = [&turn1, &turn2, &turn3, &turn4, &turn5];
        for pair in turns.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            assert!(after.prompt_tokens > before.prompt_tokens, "{api:?}");
            assert!(
                after.cached + 16 > before.prompt_tokens,
                "{api:?}: {} cached of {}, the turn before had {}",
                after.cached,
                after.prompt_tokens,
                before.prompt_tokens
            );
            // Anthropic reads the entry the turn before wrote at its breakpoint, whole.
            if api == Api::Anthropic {
                assert_eq!(after.cached, before.prompt_tokens);
            }
        }
    }
}

/// Context-length wording the client classifies as `context_length`.
const WINDOW_WORDS: [&str; 4] = [
    "maximum context length",
    "max_model_len",
    "prompt is too long",
    "context_length_exceeded",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_break_the_turns_they_name() {
    let with = |fault: Fault| SimConfig {
        faults: vec![(fault, 1.0)],
        ..config()
    };
    let sim = start_sim(with(Fault::HistoryReject)).await;
    for api in APIS {
        let mut session = Session::new(api, &sim.url());
        let turn1 = session.turn(Some(ASK)).await;
        assert_eq!(turn1.status, 200, "{api:?}: the first turn has no history");
        let turn2 = session.results(&turn1).await;
        assert_eq!(turn2.status, 400, "{api:?}: {}", turn2.body);
        let error: Value = serde_json::from_str(&turn2.body).unwrap();
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("roles must alternate")
        );
        for words in WINDOW_WORDS {
            assert!(!turn2.body.contains(words), "{api:?}: {}", turn2.body);
        }
    }
    let sim = start_sim(with(Fault::IgnoreToolResults)).await;
    let mut session = Session::new(Api::Chat, &sim.url());
    let turn1 = session.turn(Some(ASK)).await;
    let turn2 = session.results(&turn1).await;
    assert!(
        !turn2.text.is_empty() && !turn2.text.contains("TRK-"),
        "{turn2:?}"
    );
    let sim = start_sim(with(Fault::NoParallelCalls)).await;
    for api in APIS {
        let mut session = Session::new(api, &sim.url());
        let turn = session.turn(Some(BOTH)).await;
        assert_eq!(arguments_of(&turn), [r#"{"order_id":"B-1234"}"#], "{api:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_refuses_what_exceeds_it_and_models_reports_it() {
    let sim = start_sim(SimConfig {
        max_model_len: Some(100),
        ..config()
    })
    .await;
    let models: Value = reqwest::get(format!("{}/v1/models", sim.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["max_model_len"], 100);
    let mut session = Session::new(Api::Chat, &sim.url());
    assert_eq!(session.turn(Some(ASK)).await.status, 200);
    // The depth turn: filler words until the prompt is past the window.
    let padding = vec!["filler"; 80].join(" ");
    let deep = session.turn(Some(&padding)).await;
    assert_eq!(deep.status, 400);
    let message = serde_json::from_str::<Value>(&deep.body).unwrap()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    let prompt: u64 = message
        .split(" in the messages")
        .next()
        .unwrap()
        .rsplit('(')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(prompt > 80, "{message}");
    assert_eq!(
        message,
        format!(
            "This model's maximum context length is 100 tokens. However, you requested {} tokens ({prompt} in the messages, 64 in the completion). Please reduce the length of the messages or completion.",
            prompt + 64
        )
    );
    // Without the flag, no window is reported.
    let open = start_sim(config()).await;
    let models: Value = reqwest::get(format!("{}/v1/models", open.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0].get("max_model_len"), None);
}

/// The replicas that served a five-turn chat session through a gateway of three.
async fn replicas_of_a_session(
    config: SimConfig,
    header: Option<&str>,
) -> (Vec<String>, Vec<Reply>) {
    let sim = start_sim(config).await;
    let mut session = Session::new(Api::Chat, &sim.url());
    if let Some(id) = header {
        session.headers.push(("x-session-id", id.to_owned()));
    }
    let turn1 = session.turn(Some(ASK)).await;
    let turn2 = session.results(&turn1).await;
    let turn3 = session.turn(Some(FOLLOW_UP)).await;
    let turn4 = session.turn(Some(BOTH)).await;
    let turn5 = session.results(&turn4).await;
    let turns = vec![turn1, turn2, turn3, turn4, turn5];
    (
        turns.iter().map(|t| t.served_by.clone().unwrap()).collect(),
        turns,
    )
}

fn gateway(route: Route) -> SimConfig {
    let mut config = config();
    config.gateway.replicas = 3;
    config.gateway.route = route;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_keep_or_move_a_session_and_replica_faults_stay_on_their_replica() {
    for (route, header) in [
        (Route::SessionHeader, Some("s-1")),
        (Route::FirstMessage, None),
    ] {
        let (served, turns) = replicas_of_a_session(gateway(route), header).await;
        assert!(
            served.iter().all(|r| *r == served[0]),
            "{route:?}: {served:?}"
        );
        // One replica's cache held the whole conversation.
        assert!(turns[4].cached + 16 > turns[3].prompt_tokens, "{route:?}");
    }
    let (served, _) = replicas_of_a_session(gateway(Route::RoundRobin), Some("s-1")).await;
    assert_eq!(
        served,
        [
            "replica-0",
            "replica-1",
            "replica-2",
            "replica-0",
            "replica-1"
        ]
    );
    // Without the header, session-header goes round robin.
    let (served, _) = replicas_of_a_session(gateway(Route::SessionHeader), None).await;
    assert_ne!(served[0], served[1]);
    // Replica 1 cannot render tool history; the others can.
    let mut config = gateway(Route::RoundRobin);
    config.gateway.replica_faults = vec![(1, Fault::HistoryReject, 1.0)];
    let sim = start_sim(config).await;
    let mut session = Session::new(Api::Chat, &sim.url());
    let turn1 = session.turn(Some(ASK)).await;
    assert_eq!(
        (turn1.status, turn1.served_by.as_deref()),
        (200, Some("replica-0"))
    );
    session.history.push(Message::Results(vec![(
        turn1.calls[0].id.clone(),
        result(&turn1.calls[0]),
    )]));
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let reply = session.turn(None).await;
        if reply.status == 200 {
            session.history.pop(); // the same turn again
        }
        statuses.push((reply.served_by.unwrap(), reply.status));
    }
    let expected = [
        ("replica-1", 400),
        ("replica-2", 200),
        ("replica-0", 200),
        ("replica-1", 400),
        ("replica-2", 200),
    ];
    assert_eq!(statuses, expected.map(|(r, s)| (r.to_owned(), s)));
}
