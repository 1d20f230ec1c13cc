use crate::sim::Prefill;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;

const MS: Duration = Duration::from_millis(1);

fn request(chat: bool, max_tokens: u64, continuous: bool) -> SimRequest {
    SimRequest {
        dialect: if chat {
            Dialect::Chat
        } else {
            Dialect::Completions
        },
        model: "m".into(),
        prompt_tokens: 3,
        max_tokens,
        stream: true,
        include_usage: true,
        continuous_usage: continuous,
        media_items: 0,
        image_pixels: 0,
        prompt: String::new(),
        greedy: false,
        sampling: None,
        logprobs: None,
        structure: None,
        cached_tokens: None,
        reported_cached: None,
        cache_breakpoint: None,
        cache_written: None,
        block_ends: Vec::new(),
        conversation: Default::default(),
        session: None,
        replica: 0,
    }
}

fn config() -> SimConfig {
    SimConfig {
        ttft: MS * 100,
        itl: MS * 10,
        stall: MS * 5000,
        ..SimConfig::default()
    }
}

fn plan(req: &SimRequest, config: &SimConfig, fault: Option<Fault>) -> Vec<Step> {
    stream_plan(req, config, fault, &mut StdRng::seed_from_u64(1))
}

/// (offset, data payload) of each event; `None` data for a reset.
fn events(steps: &[Step]) -> Vec<(Duration, Option<String>)> {
    steps
        .iter()
        .map(|s| match &s.action {
            Action::Send(bytes) => {
                let text = std::str::from_utf8(bytes).unwrap();
                let line = text.lines().find(|l| l.starts_with("data:")).unwrap();
                let data = line.strip_prefix("data:").unwrap();
                (
                    s.at,
                    Some(data.strip_prefix(' ').unwrap_or(data).to_owned()),
                )
            }
            Action::Reset => (s.at, None),
        })
        .collect()
}

fn json(data: &str) -> Value {
    serde_json::from_str(data).unwrap()
}

#[test]
fn chat_timeline_role_chunk_first_then_tokens_on_schedule() {
    let steps = events(&plan(&request(true, 3, false), &config(), None));
    let offsets: Vec<_> = steps.iter().map(|(at, _)| *at).collect();
    assert_eq!(
        offsets,
        [
            Duration::ZERO,
            MS * 100,
            MS * 110,
            MS * 120,
            MS * 120,
            MS * 120
        ],
        "role, 3 tokens, usage, [DONE]"
    );
    let role = json(steps[0].1.as_deref().unwrap());
    assert_eq!(role["choices"][0]["delta"]["content"], "");
    let last = json(steps[3].1.as_deref().unwrap());
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    assert!(
        last.get("usage").is_none(),
        "no per-chunk usage unless asked"
    );
    let usage = json(steps[4].1.as_deref().unwrap());
    assert_eq!(usage["choices"], json("[]"));
    assert_eq!(usage["usage"]["completion_tokens"], 3);
    assert_eq!(steps[5].1.as_deref(), Some("[DONE]"));
    let token_writes: Vec<bool> = plan(&request(true, 3, false), &config(), None)
        .iter()
        .map(|s| s.token)
        .collect();
    assert_eq!(
        token_writes,
        [false, true, true, true, false, false],
        "the ground-truth timeline records the token chunks, not role, usage or [DONE]"
    );
}

#[test]
fn continuous_usage_is_cumulative_on_every_chunk() {
    let config = SimConfig {
        tokens_per_chunk: 2.into(),
        ..config()
    };
    let steps = events(&plan(&request(false, 5, true), &config, None));
    let usage: Vec<u64> = steps
        .iter()
        .filter_map(|(_, d)| d.as_deref().filter(|d| *d != "[DONE]"))
        .map(|d| json(d)["usage"]["completion_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(
        usage,
        [2, 4, 5, 5],
        "three chunks of 2, 2, 1 tokens, then the usage chunk"
    );
    let offsets: Vec<_> = steps.iter().map(|(at, _)| *at).take(3).collect();
    assert_eq!(
        offsets,
        [MS * 100, MS * 120, MS * 130],
        "k tokens take k·ITL"
    );
}

#[test]
fn mid_stream_faults_strike_after_at_least_one_token() {
    let req = request(true, 4, false);
    let tokens_before = |steps: &[(Duration, Option<String>)], upto: usize| {
        steps[..upto]
            .iter()
            .filter(|(_, d)| d.as_deref().is_some_and(|d| d.contains("content\":\" ")))
            .count()
    };

    let reset = events(&plan(&req, &config(), Some(Fault::Reset)));
    let (at, data) = reset.last().unwrap();
    assert!(data.is_none(), "ends with a reset");
    assert_eq!(*at, MS * 110);
    assert_eq!(tokens_before(&reset, reset.len()), 2);

    let error = events(&plan(&req, &config(), Some(Fault::ErrorEvent)));
    let n = error.len();
    assert!(json(error[n - 2].1.as_deref().unwrap())["error"]["message"].is_string());
    assert_eq!(error[n - 1].1.as_deref(), Some("[DONE]"));

    let stall = events(&plan(&req, &config(), Some(Fault::Stall)));
    let offsets: Vec<_> = stall.iter().map(|(at, _)| *at).collect();
    assert_eq!(offsets[1..5], [MS * 100, MS * 110, MS * 5120, MS * 5130]);

    let malformed = events(&plan(&req, &config(), Some(Fault::MalformedJson)));
    let bad = malformed.iter().find(|(_, d)| {
        serde_json::from_str::<Value>(d.as_deref().unwrap_or("")).is_err()
            && d.as_deref() != Some("[DONE]")
    });
    assert!(bad.is_some());

    let one_chunk = request(false, 1, false);
    let reset = events(&plan(&one_chunk, &config(), Some(Fault::Reset)));
    assert_eq!(reset.len(), 2, "the only token, then the reset");
}

#[test]
fn truncation_faults() {
    let req = request(false, 3, false);
    let empty = events(&plan(&req, &config(), Some(Fault::Empty)));
    assert_eq!(
        empty.last().unwrap().1.as_deref(),
        Some("[DONE]"),
        "ends properly"
    );
    for (_, data) in &empty[..empty.len() - 1] {
        let chunk = json(data.as_deref().unwrap());
        assert!(
            chunk["choices"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["text"] == ""),
            "no token: {chunk}"
        );
    }

    let no_done = events(&plan(&req, &config(), Some(Fault::NoDone)));
    assert_eq!(no_done.len(), 3, "tokens only");
    for (_, data) in &no_done {
        let chunk = json(data.as_deref().unwrap());
        assert!(chunk["choices"][0]["finish_reason"].is_null());
        assert!(chunk.get("usage").is_none());
    }

    let ttft = events(&plan(&req, &config(), Some(Fault::TtftStall)));
    assert_eq!(ttft[0].0, MS * 5100);
}

#[test]
fn output_length_and_jitter() {
    let fixed = SimConfig {
        output_tokens: std::num::NonZeroU32::new(2),
        ..config()
    };
    assert_eq!(output_tokens(&request(false, 50, false), &fixed), 2);
    let finish = events(&plan(&request(false, 50, false), &fixed, None));
    assert_eq!(
        json(finish[1].1.as_deref().unwrap())["choices"][0]["finish_reason"],
        "stop"
    );

    let jittery = SimConfig {
        jitter: 0.5,
        ..config()
    };
    let first = events(&plan(&request(false, 2, false), &jittery, None))[0].0;
    assert!(first >= MS * 50 && first <= MS * 150, "{first:?}");
}

#[test]
fn non_streamed_response() {
    let mut req = request(true, 4, false);
    req.stream = false;
    let (delay, body) = whole_response(&req, &config());
    assert_eq!(delay, MS * 130);
    assert_eq!(body["usage"]["completion_tokens"], 4);
    assert_eq!(
        body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count(),
        4
    );
}

fn dialect_events(dialect: Dialect, max_tokens: u64) -> Vec<String> {
    let req = SimRequest {
        dialect,
        include_usage: true,
        ..request(false, max_tokens, false)
    };
    events(&plan(&req, &config(), None))
        .into_iter()
        .map(|(_, data)| data.unwrap())
        .collect()
}

#[test]
fn every_dialect_renders_its_own_stream() {
    let tgi = dialect_events(Dialect::Tgi, 2);
    assert_eq!(tgi.len(), 2, "one event per token, no [DONE]");
    assert!(json(&tgi[0])["generated_text"].is_null());
    assert_eq!(json(&tgi[1])["details"]["generated_tokens"], 2);

    let triton = dialect_events(Dialect::Triton, 3);
    assert_eq!(triton.len(), 3, "no end marker");
    assert_eq!(json(&triton[2])["text_output"], " stream");

    let anthropic = dialect_events(Dialect::Anthropic, 2);
    let types: Vec<String> = anthropic
        .iter()
        .map(|d| json(d)["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        types,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );

    let responses = dialect_events(Dialect::Responses, 2);
    let last = json(responses.last().unwrap());
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(last["response"]["usage"]["output_tokens"], 2);
}

#[test]
fn events_carry_sse_event_names_where_the_dialect_uses_them() {
    let req = SimRequest {
        dialect: Dialect::Anthropic,
        ..request(false, 1, false)
    };
    let first = match &plan(&req, &config(), None)[0].action {
        Action::Send(bytes) => String::from_utf8(bytes.to_vec()).unwrap(),
        Action::Reset => unreachable!(),
    };
    assert!(
        first.starts_with("event: message_start\ndata: {"),
        "{first}"
    );
}

#[test]
fn media_lengthen_the_time_to_first_token() {
    let config = SimConfig {
        prefill: Box::new(Prefill {
            per_image: MS * 300,
            per_megapixel: MS * 100,
            ..Prefill::default()
        }),
        ..config()
    };
    let text_only = request(true, 2, false);
    assert_eq!(first_token(&text_only, &config), MS * 100);
    let with_media = SimRequest {
        media_items: 3,
        image_pixels: 2_500_000,
        ..text_only
    };
    assert_eq!(first_token(&with_media, &config), MS * (100 + 900 + 250));
    let steps = events(&plan(&with_media, &config, None));
    assert_eq!(
        steps[1].0,
        MS * 1250,
        "the first token, after the role chunk"
    );
    let (delay, _) = whole_response(&with_media, &config);
    assert_eq!(delay, MS * 1260);
    // Without the flags, media cost nothing; a client's absurd counts saturate.
    assert_eq!(first_token(&with_media, &SimConfig::default()), MS * 50);
    let absurd = SimRequest {
        media_items: u64::MAX,
        image_pixels: u64::MAX,
        ..with_media
    };
    assert_eq!(
        first_token(&absurd, &config),
        MS * 100 + Duration::from_secs(24 * 3600)
    );
}

/// The prefill of the prompt tokens the prefix cache did not serve (issue 35, item 5).
#[test]
fn uncached_prompt_tokens_lengthen_the_time_to_first_token() {
    let config = SimConfig {
        prefill: Box::new(Prefill {
            per_token: MS,
            ..Prefill::default()
        }),
        ..config()
    };
    let cold = SimRequest {
        prompt_tokens: 200,
        cached_tokens: Some(0),
        reported_cached: None,
        cache_breakpoint: None,
        cache_written: None,
        ..request(true, 2, false)
    };
    let warm = SimRequest {
        cached_tokens: Some(192),
        reported_cached: None,
        cache_breakpoint: None,
        cache_written: None,
        ..cold.clone()
    };
    let unreported = SimRequest {
        cached_tokens: None,
        reported_cached: None,
        cache_breakpoint: None,
        cache_written: None,
        ..cold.clone()
    };
    assert_eq!(first_token(&cold, &config), MS * 300);
    assert_eq!(first_token(&warm, &config), MS * 108);
    assert_eq!(first_token(&unreported, &config), MS * 300);
}
