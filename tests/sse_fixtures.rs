//! Real transcripts captured from vLLM and llama.cpp's server (tests/fixtures/):
//! the SSE decoder must give identical events for every way the bytes can be split, the
//! OpenAI parser must read them as DESIGN.md measures them, and the whole daemon must
//! measure a replay of each one correctly.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use inferprobe::backend::{BackendKind, StreamEvent};
use inferprobe::prompt::TokenCounter;
use inferprobe::record::{Measurement, RequestRecord, TokenCount};
use inferprobe::sse::{SseDecoder, SseEvent};
use proptest::prelude::*;
use tokio::time::Instant;

use common::replay::{Capture, serve};
use common::start_daemon;

const STREAMS: &[&str] = &[
    "llama-server/chat-usage",
    "llama-server/chat-nousage",
    "llama-server/completions-usage",
    "llama-server/completions-nousage",
    "vllm/chat-usage",
    "vllm/chat-continuous-usage",
    "vllm/completions-usage",
    "vllm/completions-continuous-usage",
    "vllm/completions-nousage",
    "vllm/completions-n2",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn body(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(format!("{name}.sse"))).unwrap()
}

fn decode(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::default();
    let mut events = Vec::new();
    for chunk in chunks {
        decoder.push(chunk, &mut events).unwrap();
    }
    assert!(
        !decoder.has_partial_event(),
        "transcripts end on an event boundary"
    );
    events
}

#[test]
fn every_single_split_point_gives_the_same_events() {
    for name in STREAMS {
        let bytes = body(name);
        let whole = decode(&[&bytes]);
        assert!(whole.len() >= 9, "{name}: {} events", whole.len());
        assert_eq!(whole.last().unwrap().data, "[DONE]", "{name}");
        for split in 0..=bytes.len() {
            let (a, b) = bytes.split_at(split);
            assert_eq!(decode(&[a, b]), whole, "{name} split at byte {split}");
        }
    }
}

#[test]
fn two_split_points_and_single_bytes_give_the_same_events() {
    for name in STREAMS {
        let bytes = body(name);
        let whole = decode(&[&bytes]);
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(decode(&singles), whole, "{name} byte by byte");
        // Every pair of split points at a stride (every pair would be ~10^7 decodes).
        for i in (0..bytes.len()).step_by(7) {
            for j in (i..bytes.len()).step_by(13) {
                let parts = [&bytes[..i], &bytes[i..j], &bytes[j..]];
                assert_eq!(decode(&parts), whole, "{name} split at {i} and {j}");
            }
        }
    }
}

#[test]
fn crlf_line_endings_give_the_same_events() {
    for name in STREAMS {
        let lf = body(name);
        let crlf = String::from_utf8(lf.clone()).unwrap().replace('\n', "\r\n");
        let crlf = crlf.as_bytes();
        let whole = decode(&[&lf]);
        assert_eq!(decode(&[crlf]), whole, "{name}");
        for split in 0..=crlf.len() {
            let (a, b) = crlf.split_at(split);
            assert_eq!(decode(&[a, b]), whole, "{name} CRLF split at {split}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_rechunking_gives_the_same_events(
        which in 0..STREAMS.len(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let bytes = body(STREAMS[which]);
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut parts = Vec::new();
        let mut start = 0;
        for p in points {
            parts.push(&bytes[start..p]);
            start = p;
        }
        parts.push(&bytes[start..]);
        prop_assert_eq!(decode(&parts), decode(&[&bytes]));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), split in any::<prop::sample::Index>()) {
        let mut decoder = SseDecoder::new(512);
        let mut events = Vec::new();
        let (a, b) = bytes.split_at(split.index(bytes.len() + 1));
        if decoder.push(a, &mut events).is_ok() {
            let _ = decoder.push(b, &mut events);
        }
        for kind in ["openai-chat", "tgi", "tensorrt-llm", "anthropic", "openai-responses", "openai-audio"] {
            let mut parser = BackendKind::from_name(kind).unwrap().backend().stream_parser();
            let mut info = Default::default();
            for event in &events {
                let _ = parser.on_event(event, &mut info);
            }
        }
    }
}

/// Parse a transcript with events 10 ms apart and measure it.
fn measure_transcript(name: &str) -> Measurement {
    measure_events(name, &decode(&[&body(name)]), None)
}

fn measure_events(
    name: &str,
    events: &[SseEvent],
    tokenizer: Option<&TokenCounter>,
) -> Measurement {
    let chat = name.contains("chat");
    let kind = if chat {
        BackendKind::OpenAiChat
    } else {
        BackendKind::OpenAi
    };
    let mut parser = kind.backend().stream_parser();
    let t0 = Instant::now();
    let mut record = RequestRecord::new(t0);
    for (i, event) in events.iter().enumerate() {
        let at = t0 + Duration::from_millis(10 * (i as u64 + 1));
        match parser.on_event(event, &mut record.response).unwrap() {
            StreamEvent::Chunk(chunk) => record.on_chunk(at, chunk),
            StreamEvent::KeepAlive => {}
            StreamEvent::Done(chunk) => {
                record.on_chunk(at, chunk);
                record.done = true;
                record.end = Some(at);
            }
        }
    }
    record.measure(tokenizer).unwrap()
}

/// (transcript, TTFT in events, output tokens, ITL observations, prompt tokens)
type Expected = (&'static str, u64, TokenCount, u64, Option<u64>);

#[test]
fn transcripts_are_measured_as_designed() {
    use TokenCount::{Events, Usage};
    let cases: &[Expected] = &[
        // Role-only first chunk (content null / "") is not the first token.
        ("llama-server/chat-usage", 2, Usage(8), 7, Some(28)),
        ("llama-server/chat-nousage", 2, Events(8), 7, None),
        // Usage inside the final (empty-text) chunk: not a token.
        ("llama-server/completions-usage", 1, Usage(8), 7, Some(7)),
        // llama.cpp sends usage on completions even when not asked.
        ("llama-server/completions-nousage", 1, Usage(8), 7, Some(7)),
        ("vllm/chat-usage", 2, Usage(8), 7, Some(29)),
        ("vllm/chat-continuous-usage", 2, Usage(8), 7, Some(26)),
        ("vllm/completions-usage", 1, Usage(8), 7, Some(6)),
        ("vllm/completions-continuous-usage", 1, Usage(8), 7, Some(6)),
        ("vllm/completions-nousage", 1, Events(8), 7, None),
        // One event per token, some with empty text: a token that is part of a character
        // spanning tokens (a random model emits many). Each empty event after the first
        // output is a token's arrival, so every token is timed by its own gap.
        ("vllm/completions-blank-deltas", 1, Usage(16), 15, Some(9)),
        ("vllm/chat-blank-deltas", 2, Usage(16), 15, Some(21)),
        // n = 2 (two choices interleaved) is refused at `check`; what the parser makes of
        // it anyway (choice 0 only) is in src/backend/tests/dialects.rs.
    ];
    for &(name, ttft_events, tokens, itl, prompt) in cases {
        let m = measure_transcript(name);
        let ttft = Duration::from_millis(10 * ttft_events);
        assert_eq!(m.ttft, Some(ttft), "{name} TTFT");
        assert_eq!(m.output_tokens, Some(tokens), "{name} output tokens");
        assert_eq!(m.itl_observations(), itl, "{name} ITL observations");
        assert_eq!(m.prompt_tokens, prompt, "{name} prompt tokens");
        assert!(
            m.itl
                .iter()
                .all(|&(gap, _)| gap == Duration::from_millis(10)),
            "{name}"
        );
    }
}

/// Cached prompt tokens as the real servers reported them (issue 35, item 1): llama.cpp's
/// usage `prompt_tokens_details.cached_tokens`, or its `timings.cache_n` when it sent no
/// usage; vLLM without `--enable-prompt-tokens-details` reports nothing, so nothing is read.
#[test]
fn cached_prompt_tokens_of_real_servers() {
    let cases = [
        ("llama-server/chat-usage", Some(0)),
        ("llama-server/chat-nousage", Some(11)),
        ("llama-server/completions-usage", Some(0)),
        ("llama-server/completions-nousage", Some(3)),
        ("vllm/chat-usage", None),
        ("vllm/completions-usage", None),
        ("vllm/chat-continuous-usage", None),
    ];
    for (name, cached) in cases {
        let m = measure_transcript(name);
        assert_eq!(m.cached_prompt_tokens, cached, "{name}");
    }
}

fn tokenizer() -> TokenCounter {
    TokenCounter::load(&fixtures().join("tokenizer/tiny-bpe.json")).unwrap()
}

/// With a tokenizer, vLLM's one-event-per-token stream is still timed per event: the
/// count is certain, and re-tokenizing the text would not be (a held-back byte comes out
/// as U+FFFD, three bytes the tokenizer counts as three tokens).
#[test]
fn a_tokenizer_does_not_override_one_token_per_event() {
    for name in ["vllm/completions-blank-deltas", "vllm/chat-blank-deltas"] {
        let m = measure_events(name, &decode(&[&body(name)]), Some(&tokenizer()));
        assert_eq!(m.itl_observations(), 15, "{name}");
        assert_eq!(m.tpot, Some(Duration::from_millis(10)), "{name}");
        assert_eq!(m.timed_by.as_str(), "event", "{name}");
    }
}

/// The same streams without their empty events (a server that sends nothing for a
/// held-back token): the tokenizer's counts of the text add up to more than the 16 tokens
/// billed, so the billed total rules and the counts only spread it. Before this rule the
/// tokenizer's sum was taken as the truth: more ITL observations than tokens generated and
/// a TPOT too low (seen on a real vLLM 0.32: probe TPOT 6.0 ms, the server's 9.2 ms).
#[test]
fn a_tokenizer_that_disagrees_with_the_billed_total_only_weighs_the_shares() {
    let counter = tokenizer();
    for name in ["vllm/completions-blank-deltas", "vllm/chat-blank-deltas"] {
        let events: Vec<SseEvent> = decode(&[&body(name)])
            .into_iter()
            .filter(|e| {
                !(e.data.contains(r#""text":"","#) || e.data.contains(r#""content":""}"#))
                    || e.data.contains("role")
            })
            .collect();
        let text: String = events.iter().map(|e| e.data.as_str()).collect();
        assert!(
            text.contains('\u{fffd}'),
            "{name}: the case needs a replacement character"
        );
        let m = measure_events(name, &events, Some(&counter));
        assert_eq!(m.output_tokens, Some(TokenCount::Usage(16)), "{name}");
        assert_eq!(m.timed_by.as_str(), "estimate", "{name}");
        let first_share = 16 - m.itl_observations();
        assert!(first_share >= 1, "{name}");
        assert_eq!(
            m.itl.iter().map(|&(_, k)| u64::from(k)).sum::<u64>(),
            m.itl_observations()
        );
        assert!(
            (13..=15).contains(&m.itl_observations()),
            "{name}: {} ITL observations for 16 tokens",
            m.itl_observations()
        );
    }
}

/// vLLM `--stream-interval 4`: the first token alone, then four per event (one of them
/// all held-back bytes, empty), 16 in all, no per-chunk usage. The billed total is spread
/// over the events by their text, so there is one ITL observation per token after the first
/// event, not one per event, and TPOT is the span over those tokens.
#[test]
fn multi_token_events_of_a_real_vllm_are_timed_per_token() {
    for (name, first_output_event) in [
        ("vllm/completions-stream-interval-4", 1),
        ("vllm/chat-stream-interval-4", 3),
    ] {
        let m = measure_transcript(name);
        assert_eq!(m.output_tokens, Some(TokenCount::Usage(16)), "{name}");
        assert_eq!(m.timed_by.as_str(), "estimate", "{name}");
        assert_eq!(
            m.ttft,
            Some(Duration::from_millis(10 * first_output_event)),
            "{name}"
        );
        let after_first = m.itl_observations();
        assert!((10..=15).contains(&after_first), "{name}: {after_first}");
        let span: Duration = m.itl.iter().map(|&(gap, k)| gap * k).sum();
        let tpot = m.tpot.unwrap();
        let error = (tpot.as_secs_f64() * after_first as f64 - span.as_secs_f64()).abs();
        assert!(
            error < 1e-6,
            "{name}: TPOT is the span over the tokens after the first"
        );
        // Per event it would have been 3 or 4 observations of 10 ms.
        assert!(tpot < Duration::from_millis(5), "{name}: {tpot:?}");
    }
}

/// A canary's greedy request with logprobs, streamed by vLLM 0.32 (the tiny random model:
/// most of its tokens are parts of characters, spelled `""`): every position is read, and
/// an answer compared with itself never diverges, the opaque tokens ending the comparison.
#[test]
fn vllm_logprobs_are_read_and_an_answer_matches_itself() {
    use inferprobe::canary::compare::{Verdict, compare};
    use inferprobe::record::Logprobs;
    for name in ["vllm/chat-logprobs", "vllm/completions-logprobs"] {
        let kind = if name.contains("chat") {
            BackendKind::OpenAiChat
        } else {
            BackendKind::OpenAi
        };
        let mut parser = kind.backend().stream_parser();
        let mut info = inferprobe::record::ResponseInfo {
            logprobs: Some(Logprobs::default()),
            ..Default::default()
        };
        for event in decode(&[&body(name)]) {
            parser.on_event(&event, &mut info).unwrap();
        }
        let logprobs = info.logprobs.unwrap();
        assert_eq!(logprobs.unreadable, None, "{name}");
        let positions = logprobs.positions;
        assert_eq!(positions.len(), 12, "{name}");
        assert!(
            positions
                .iter()
                .all(|p| p.logprob.is_some() && p.top.len() >= 3)
        );
        let first_opaque = positions.iter().position(|p| p.token.is_opaque());
        assert!(
            first_opaque.is_some(),
            "{name}: the case needs a byte token"
        );
        for margin in [0.0, 0.05, 1.0] {
            let verdict = compare(&positions, &positions, false, false, margin);
            assert_eq!(
                verdict,
                Verdict::Match {
                    compared: first_opaque.unwrap(),
                    drift: 0.0
                },
                "{name}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_measures_replays_of_real_servers() {
    const GAP: Duration = Duration::from_millis(30);
    let mut toml = String::from(
        "seed = 4\n[defaults]\nmodel = \"tiny\"\nrate = 5\nttft_timeout = \"2s\"\nstall_timeout = \"1s\"\nrequest_timeout = \"5s\"\n",
    );
    let errors = [
        ("vllm/completions-context-overflow", "context_length"),
        ("vllm/completions-model-not-found", "http_4xx"),
        ("vllm/completions-max-tokens-too-large", "context_length"),
        (
            "llama-server/completions-context-overflow",
            "context_length",
        ),
        ("llama-server/completions-bad-json", "http_5xx"),
        // A non-streamed JSON body where a stream was asked for.
        ("vllm/chat-nonstream", "invalid_response"),
    ];
    // n = 2 is refused at `check` (see src/backend/tests/dialects.rs).
    let streams: Vec<&str> = STREAMS
        .iter()
        .copied()
        .filter(|name| !name.ends_with("-n2"))
        .collect();
    let names: Vec<&str> = streams
        .iter()
        .copied()
        .chain(errors.iter().map(|e| e.0))
        .collect();
    for (i, name) in names.iter().enumerate() {
        let (dir, file) = name.split_once('/').unwrap();
        let addr = serve(Capture::load(&fixtures().join(dir), file), GAP).await;
        let backend = if name.contains("chat") {
            "openai-chat"
        } else {
            "openai"
        };
        toml += &format!(
            "[[targets]]\nname = \"r{i}\"\nbackend = \"{backend}\"\nurl = \"http://{addr}\"\n"
        );
    }
    let daemon = start_daemon(&toml).await;
    let n = names.len();
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            (0..n).all(|i| s.requests(&format!("r{i}")) >= 3.0)
        })
        .await;
    daemon.stop().await;

    for (i, name) in streams.iter().enumerate() {
        let t = format!("r{i}");
        assert_eq!(s.all_errors(&t), 0.0, "{name}:\n{}", s.text);
        let successes = s.successes(&t);
        let output = s.sum("inferprobe_output_tokens_total", &[("target", &t)]);
        assert_eq!(output, 8.0 * successes, "{name} output tokens");
        // Each event is sent GAP after the previous one; the role chunk is event 1.
        let events_before_first_token = if name.contains("chat") { 2.0 } else { 1.0 };
        let (ttft_sum, count) = s.histogram("inferprobe_time_to_first_token_seconds", &t);
        let ttft = ttft_sum / count;
        let floor = GAP.as_secs_f64() * events_before_first_token;
        assert!(ttft >= floor && ttft < floor + 0.025, "{name}: TTFT {ttft}");
        let (itl_sum, itl_count) = s.histogram("inferprobe_inter_token_latency_seconds", &t);
        assert_eq!(itl_count, 7.0 * successes, "{name} ITL count");
        let itl = itl_sum / itl_count;
        assert!((itl - GAP.as_secs_f64()).abs() < 0.01, "{name}: ITL {itl}");
    }
    for (j, (name, category)) in errors.iter().enumerate() {
        let t = format!("r{}", streams.len() + j);
        assert_eq!(
            s.errors(&t, category),
            s.requests(&t),
            "{name} should be {category}:\n{}",
            s.text
        );
    }
}
