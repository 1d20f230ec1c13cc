//! The stream-to-numbers defects a review found (issue 24, items 11 to 18), each a stream
//! fed to `probe::StreamReader` in reads at chosen arrival times, as the probe's network
//! loop feeds it, then measured.

use crate::common;

use std::time::Duration;

use inferprobe::backend::BackendKind;
use inferprobe::endpoint::Limits;
use inferprobe::error::ProbeError;
use inferprobe::probe::StreamReader;
use inferprobe::record::{Measurement, RequestRecord};
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

fn limits() -> Limits {
    Limits {
        max_event_bytes: 1 << 20,
        max_response_bytes: 1 << 24,
        max_events: 1 << 16,
    }
}

/// Feed `reads` (arrival in ms after t0, the bytes of that read) to `backend`'s reader,
/// as the probe does; the body ends at the last read unless the stream ended itself.
fn measure(backend: BackendKind, reads: &[(u64, String)]) -> Result<Measurement, ProbeError> {
    let t0 = Instant::now();
    let mut record = RequestRecord::new(t0);
    let mut reader = StreamReader::new(backend.backend().as_ref(), limits());
    let mut last = t0;
    for (ms, bytes) in reads {
        last = t0 + MS * *ms as u32;
        if reader.read(last, bytes.as_bytes(), &mut record)? {
            return record.measure(None);
        }
    }
    reader.end(last, &mut record)?;
    record.measure(None)
}

fn category(result: Result<Measurement, ProbeError>) -> &'static str {
    match result {
        Ok(_) => "success",
        Err(e) => e.category().as_str(),
    }
}

fn sse(data: &str) -> String {
    format!("data: {data}\n\n")
}

fn chat(content: &str) -> String {
    sse(&format!(
        r#"{{"choices":[{{"index":0,"delta":{{"content":"{content}"}},"finish_reason":null}}]}}"#
    ))
}

fn role() -> String {
    sse(
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
    )
}

fn chat_end(completion_tokens: u64) -> String {
    sse(&format!(
        r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"length"}}],"usage":{{"prompt_tokens":3,"completion_tokens":{completion_tokens}}}}}"#
    )) + "data: [DONE]\n\n"
}

/// Item 11: every event of one read was stamped with the read's instant and each later one
/// became an ITL of 0. " a" at 100 ms, then " b", " c", " d" in one read at 400 ms are
/// three tokens over 300 ms.
#[test]
fn events_read_together_are_one_arrival() {
    let m = measure(
        BackendKind::OpenAiChat,
        &[
            (10, role()),
            (100, chat(" a")),
            (400, chat(" b") + &chat(" c") + &chat(" d")),
            (401, chat_end(4)),
        ],
    )
    .unwrap();
    assert_eq!(m.ttft, Some(MS * 100));
    assert_eq!(m.itl, vec![(MS * 100, 3)]);
    assert_eq!(m.tpot, Some(MS * 100));
    assert!(!m.buffered);
}

/// Item 11, the extreme: a fully buffered body (nginx `proxy_buffering`, a compressing
/// hop) used to give TPOT 0 and pass as a fast stream. It is a finding: the user saw
/// nothing until the end; TPOT and ITL are not observed.
#[test]
fn a_buffered_stream_is_shown_not_timed() {
    let body = role() + &chat(" a") + &chat(" b") + &chat(" c") + &chat_end(3);
    let m = measure(BackendKind::OpenAiChat, &[(900, body)]).unwrap();
    assert!(m.buffered);
    assert_eq!(m.ttft, Some(MS * 900));
    assert_eq!((m.tpot, m.itl_observations()), (None, 0));
    // One event of one token is no evidence of buffering.
    let one = role() + &chat(" a") + &chat_end(1);
    assert!(
        !measure(BackendKind::OpenAiChat, &[(50, one)])
            .unwrap()
            .buffered
    );
}

/// Item 13: vLLM sends `""` for a token whose bytes it holds back; before the first
/// visible character that arrival was dropped, the count never matched the events and a
/// byte estimate invented a split. Every event here carried one token, 10 ms apart.
#[test]
fn held_back_bytes_before_the_first_character_are_tokens_of_it() {
    let m = measure(
        BackendKind::OpenAiChat,
        &[
            (10, role()),
            (20, chat("")),
            (30, chat("é")),
            (40, chat(" abc")),
            (50, chat(" d")),
            (51, chat_end(4)),
        ],
    )
    .unwrap();
    assert_eq!(m.timed_by.as_str(), "event");
    assert_eq!(m.ttft, Some(MS * 30));
    assert_eq!(m.itl, vec![(MS * 10, 1), (MS * 10, 1)]);
    assert_eq!(m.tpot, Some(MS * 10));
}

/// Item 14: an event with no visible text is never the first token. vLLM with
/// `continuous_usage_stats` raises the count on a held-back byte at 100 ms; the character
/// arrives at 300 ms.
#[test]
fn ttft_is_taken_at_the_first_visible_character() {
    let usage = |content: &str, n: u64| {
        sse(&format!(
            r#"{{"choices":[{{"index":0,"delta":{{"content":"{content}"}},"finish_reason":null}}],"usage":{{"prompt_tokens":3,"completion_tokens":{n}}}}}"#
        ))
    };
    let m = measure(
        BackendKind::OpenAiChat,
        &[
            (10, role()),
            (100, usage("", 1)),
            (300, usage("é", 2)),
            (310, usage(" a", 3)),
            (311, chat_end(3)),
        ],
    )
    .unwrap();
    assert_eq!(m.timed_by.as_str(), "usage");
    assert_eq!(m.ttft, Some(MS * 300));
    assert_eq!(m.itl, vec![(MS * 10, 1)]);
    // TGI: a token with empty text that is not special is a held-back byte, not output.
    let tgi = |text: &str, id: u64| {
        sse(&format!(
            r#"{{"token":{{"id":{id},"text":"{text}","logprob":-0.1,"special":false}},"generated_text":null,"details":null}}"#
        ))
    };
    let tgi_end = sse(
        r#"{"token":{"id":9,"text":"","logprob":-0.1,"special":true},"generated_text":"é a","details":{"finish_reason":"eos_token","generated_tokens":4}}"#,
    );
    let m = measure(
        BackendKind::Tgi,
        &[
            (100, tgi("", 1)),
            (300, tgi("é", 2)),
            (310, tgi(" a", 3)),
            (320, tgi_end),
        ],
    )
    .unwrap();
    assert_eq!(m.ttft, Some(MS * 300));
}

fn anthropic(kind: &str, data: &str) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

fn message_start(usage: &str) -> String {
    anthropic(
        "message_start",
        &format!(r#"{{"type":"message_start","message":{{"model":"claude","usage":{usage}}}}}"#),
    )
}

fn message_end(output_tokens: u64, reason: &str) -> String {
    anthropic(
        "message_delta",
        &format!(
            r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}"}},"usage":{{"output_tokens":{output_tokens}}}}}"#
        ),
    ) + &anthropic("message_stop", r#"{"type":"message_stop"}"#)
}

/// Item 12: Anthropic's `content_block_start` of a `tool_use` block (its name) was dropped
/// and the first `input_json_delta` is always `""`: a call without arguments was
/// `empty_response`, and with arguments TTFT skipped the header. Responses' function call
/// header likewise. Chat already counts a tool call's first delta as output.
#[test]
fn a_tool_calls_header_is_its_first_token_on_every_api() {
    let start = message_start(r#"{"input_tokens":12,"output_tokens":1}"#);
    let tool = anthropic(
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"get_time","input":{}}}"#,
    );
    let json = |partial: &str| {
        anthropic(
            "content_block_delta",
            &format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"input_json_delta","partial_json":"{partial}"}}}}"#
            ),
        )
    };
    let stop = anthropic(
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#,
    );
    let no_arguments = [
        (10, start.clone()),
        (100, tool.clone()),
        (110, json("") + &stop),
        (120, message_end(8, "tool_use")),
    ];
    let m = measure(BackendKind::Anthropic, &no_arguments).unwrap();
    assert_eq!(m.ttft, Some(MS * 100));
    let with_arguments = [
        (10, start),
        (100, tool),
        (110, json("")),
        (150, json(r#"{\"tz\": \"UTC\"}"#) + &stop),
        (160, message_end(12, "tool_use")),
    ];
    assert_eq!(
        measure(BackendKind::Anthropic, &with_arguments)
            .unwrap()
            .ttft,
        Some(MS * 100)
    );
    let responses = |data: &str| sse(data);
    let m = measure(
        BackendKind::OpenAiResponses,
        &[
            (10, responses(r#"{"type":"response.created","response":{}}"#)),
            (
                100,
                responses(
                    r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","name":"get_time","arguments":""}}"#,
                ),
            ),
            (
                150,
                responses(r#"{"type":"response.function_call_arguments.delta","delta":"{}"}"#),
            ),
            (
                160,
                responses(
                    r#"{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":5,"output_tokens":6}}}"#,
                ),
            ),
        ],
    )
    .unwrap();
    assert_eq!(m.ttft, Some(MS * 100));
}

/// Item 15: TensorRT-LLM/Triton ends on the body's end, and a body cut inside an event was
/// a success; on OpenAI, a usage chunk cut after the finish reason likewise.
#[test]
fn a_body_that_ends_inside_an_event_is_interrupted() {
    let trt = |text: &str| {
        sse(&format!(
            r#"{{"model_name":"ensemble","text_output":"{text}"}}"#
        ))
    };
    let whole = [(100, trt(" a")), (110, trt(" b"))];
    assert_eq!(
        category(measure(BackendKind::TensorRtLlm, &whole)),
        "success"
    );
    let cut = [
        (100, trt(" a")),
        (
            110,
            r#"data: {"model_name":"ensemble","text_out"#.to_owned(),
        ),
    ];
    assert_eq!(
        category(measure(BackendKind::TensorRtLlm, &cut)),
        "stream_interrupted"
    );
    let finished = sse(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#);
    let cut = [
        (100, chat(" a")),
        (
            110,
            finished + r#"data: {"choices":[],"usage":{"prompt_tok"#,
        ),
    ];
    assert_eq!(
        category(measure(BackendKind::OpenAiChat, &cut)),
        "stream_interrupted"
    );
}

/// Item 17: `input_tokens` leaves out the prompt read from and written to the cache.
#[test]
fn anthropic_prompt_tokens_include_the_cached_ones() {
    let start = message_start(
        r#"{"input_tokens":5,"cache_read_input_tokens":1500,"cache_creation_input_tokens":495,"output_tokens":1}"#,
    );
    let text = anthropic(
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
    );
    let m = measure(
        BackendKind::Anthropic,
        &[(10, start), (100, text), (110, message_end(1, "end_turn"))],
    )
    .unwrap();
    assert_eq!(m.prompt_tokens, Some(2000));
}

/// Item 18: a 200 `text/event-stream` body that is no SSE at all (a proxy's HTML 502
/// page) is an invalid response, as the error table says, not an interrupted stream.
#[test]
fn a_body_that_is_not_sse_is_an_invalid_response() {
    let html = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>nginx</body>\r\n</html>\r\n";
    let error = measure(BackendKind::OpenAiChat, &[(100, html.to_owned())]).unwrap_err();
    assert_eq!(error.category().as_str(), "invalid_response");
    assert!(error.to_string().contains("502 Bad Gateway"), "{error}");
    // A stream of keep-alive comments that then closes is SSE, cut: interrupted.
    let comments = [(100, ": ping\n\n".to_owned())];
    assert_eq!(
        category(measure(BackendKind::OpenAiChat, &comments)),
        "stream_interrupted"
    );
}

/// Item 16: Anthropic's `ping` events pushed the stall deadline back, so a generation
/// that stopped after its first token but kept pinging never hit `stall_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alives_do_not_count_as_progress() {
    let text = anthropic(
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
    );
    let mut body = message_start(r#"{"input_tokens":5}"#) + &text;
    for _ in 0..60 {
        body += &anthropic("ping", r#"{"type": "ping"}"#);
    }
    let addr = common::replay::serve(
        common::replay::Capture::stream(&body),
        Duration::from_millis(50),
    )
    .await;
    let toml = format!(
        r#"
        [[targets]]
        name = "t"
        backend = "anthropic"
        url = "http://{addr}"
        model = "claude"
        rate = 5
        ttft_timeout = "2s"
        stall_timeout = "400ms"
        request_timeout = "10s"
        "#
    );
    let daemon = common::start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| s.all_errors("t") >= 3.0)
        .await;
    daemon.stop().await;
    assert_eq!(s.errors("t", "stall_timeout"), s.all_errors("t"));
}

/// Issue 32, item 11: a finish chunk with empty text (`"content": ""` beside
/// `finish_reason`, as llama-server's completions end) carries no token unless the count
/// needs it (vLLM's held-back last token: tests/sse_fixtures.rs, `*-blank-deltas`). A held-back byte
/// at 100 ms belongs to `é` at 300 ms; then eight one-token events of 12 bytes 40 ms
/// apart, and the finish right after the last, usage 10: ITL 8 × 40 ms and TPOT 40 ms, as
/// with `"delta": {}` on the finish chunk. Counted as an arrival, the finish chunk made the
/// counts disagree and the byte estimate gave a word two tokens: 9 observations, TPOT 35.6 ms.
#[test]
fn an_empty_finish_chunk_carries_no_token() {
    let finish = |delta: &str| {
        sse(&format!(
            r#"{{"choices":[{{"index":0,"delta":{delta},"finish_reason":"length"}}],"usage":{{"prompt_tokens":3,"completion_tokens":10}}}}"#
        )) + "data: [DONE]\n\n"
    };
    for delta in [r#"{"content":""}"#, "{}"] {
        let mut reads = vec![(10, role()), (100, chat("")), (300, chat("é"))];
        for i in 1..=8u64 {
            reads.push((300 + 40 * i, chat(&format!(" twelve-by{i:02}"))));
        }
        reads.push((621, finish(delta)));
        let m = measure(BackendKind::OpenAiChat, &reads).unwrap();
        assert_eq!(m.ttft, Some(MS * 300), "{delta}");
        assert_eq!(m.itl, vec![(MS * 40, 1); 8], "{delta}");
        assert_eq!(m.tpot, Some(MS * 40), "{delta}");
    }
}
