use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;

const MS: Duration = Duration::from_millis(1);

fn request(chat: bool, max_tokens: u64, continuous: bool) -> SimRequest {
    SimRequest {
        chat,
        model: "m".into(),
        prompt_tokens: 3,
        max_tokens,
        stream: true,
        include_usage: true,
        continuous_usage: continuous,
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
                let data = text
                    .strip_prefix("data: ")
                    .unwrap()
                    .strip_suffix("\n\n")
                    .unwrap();
                (s.at, Some(data.to_owned()))
            }
            Action::Reset => (s.at, None),
        })
        .collect()
}

fn json(data: &str) -> Value {
    serde_json::from_str(data).unwrap()
}

#[test]
fn parses_both_request_shapes() {
    let chat = br#"{"model":"x","messages":[{"role":"user","content":"a b c"}],"max_completion_tokens":7,"max_tokens":3,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}"#;
    let req = parse_request(true, chat).unwrap();
    assert_eq!(req.max_tokens, 7, "max_completion_tokens wins");
    assert_eq!(req.prompt_tokens, 3);
    assert!(req.stream && req.include_usage && req.continuous_usage);

    let completion = br#"{"model":"x","prompt":"one two","max_tokens":5}"#;
    let req = parse_request(false, completion).unwrap();
    assert_eq!(
        (req.max_tokens, req.prompt_tokens, req.stream),
        (5, 2, false)
    );

    assert!(parse_request(false, br#"{"model":"x"}"#).is_err());
    assert!(parse_request(true, b"{not json").is_err());
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
}

#[test]
fn continuous_usage_is_cumulative_on_every_chunk() {
    let config = SimConfig {
        tokens_per_chunk: 2,
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
    assert!(plan(&req, &config(), Some(Fault::Empty)).is_empty());

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
        output_tokens: Some(2),
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
    let (delay, body) = complete_response(&req, &config());
    assert_eq!(delay, MS * 130);
    let body: Value = serde_json::from_slice(&body).unwrap();
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
