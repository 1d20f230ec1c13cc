use super::*;
use crate::error::ErrorCategory;
use crate::record::TimedBy;

const MS: Duration = Duration::from_millis(1);

fn output() -> Chunk {
    Chunk {
        has_output: true,
        ..Chunk::default()
    }
}

fn with_usage(has_output: bool, completion: u64) -> Chunk {
    Chunk {
        has_output,
        completion_tokens: Some(completion),
        ..Chunk::default()
    }
}

/// A record whose events arrive at the given millisecond offsets from t0.
fn timeline(events: &[(u64, Chunk)], end_ms: u64, done: bool) -> RequestRecord {
    let t0 = Instant::now();
    let mut r = RequestRecord::new(t0);
    for &(ms, chunk) in events {
        r.on_chunk(t0 + MS * ms as u32, chunk);
    }
    r.end = Some(t0 + MS * end_ms as u32);
    r.done = done;
    r
}

#[test]
fn role_only_chunk_is_not_the_first_token() {
    let role = Chunk::default(); // {"delta":{"role":"assistant","content":""}}
    let r = timeline(&[(5, role), (100, output()), (110, output())], 120, true);
    assert!(r.has_token());
    let m = r.measure(None).unwrap();
    assert_eq!(m.ttft, Some(MS * 100));
    assert_eq!(m.e2el, MS * 120);
}

#[test]
fn one_gap_per_chunk_without_continuous_usage() {
    let final_usage = with_usage(false, 6);
    let events = [
        (10, output()),
        (30, output()),
        (60, output()),
        (61, final_usage),
    ];
    let m = timeline(&events, 62, true).measure(None).unwrap();
    assert_eq!(m.itl, vec![(MS * 20, 1), (MS * 30, 1)]);
    assert_eq!(
        m.output_tokens,
        Some(TokenCount::Usage(6)),
        "final usage wins over events"
    );
    // Three tokens were timed; the other three billed ones never arrived as events.
    assert_eq!(m.tpot, Some(MS * 50 / 2));
}

#[test]
fn tpot_counts_the_tokens_that_arrived_not_the_billed_ones() {
    // 1,000 hidden reasoning tokens billed in the final usage, 60 visible ones streamed
    // 10 ms apart (OpenAI Responses / o-series, Claude with thinking).
    let mut events: Vec<(u64, Chunk)> = (0..60).map(|i| (100 + 10 * i, output())).collect();
    events.push((700, with_usage(false, 1060)));
    let m = timeline(&events, 701, true).measure(None).unwrap();
    assert_eq!(m.output_tokens, Some(TokenCount::Usage(1060)), "billed");
    assert_eq!(m.tpot, Some(MS * 10), "not 590 ms / 1059");
    assert_eq!(m.itl_observations(), 59);
    let itl_sum: Duration = m.itl.iter().map(|&(gap, n)| gap * n).sum();
    assert_eq!(m.tpot, Some(itl_sum / 59), "TPOT is the mean ITL");

    // vLLM / llama.cpp with ignore_eos = false: the last chunk is an empty finish chunk and
    // completion_tokens counts the EOS that was never sent as text.
    let finish = Chunk {
        finished: true,
        ..Chunk::default()
    };
    let events = [
        (10, output()),
        (20, output()),
        (30, output()),
        (31, finish),
        (32, with_usage(false, 4)),
    ];
    let m = timeline(&events, 33, true).measure(None).unwrap();
    assert_eq!(m.output_tokens, Some(TokenCount::Usage(4)));
    assert_eq!(m.tpot, Some(MS * 10));
}

#[test]
fn the_tokenizer_counts_reasoning_and_tool_calls_too() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tokenizer/tiny-bpe.json");
    let counter = TokenCounter::load(&path).unwrap();
    let mut r = timeline(&[(10, output()), (20, output()), (30, output())], 31, true);
    r.response.text = "the answer".into();
    let visible = counter.count("the answer").unwrap();
    let m = r.measure(Some(&counter)).unwrap();
    assert_eq!(m.output_tokens, Some(TokenCount::Tokenizer(visible)));

    r.response.other_text = "let me think about the question first".into();
    let reasoning = counter.count(&r.response.other_text).unwrap();
    let m = r.measure(Some(&counter)).unwrap();
    assert_eq!(
        m.output_tokens,
        Some(TokenCount::Tokenizer(visible + reasoning))
    );

    // A tool-only answer: no visible text at all, yet tokens arrived.
    r.response.text.clear();
    r.response.other_text = r#"get_weather{"city": "Paris"}"#.into();
    let m = r.measure(Some(&counter)).unwrap();
    let tool = counter.count(&r.response.other_text).unwrap();
    assert!(tool > 0);
    assert_eq!(m.output_tokens, Some(TokenCount::Tokenizer(tool)));
}

#[test]
fn continuous_usage_splits_a_k_token_gap_into_k_observations() {
    let events = [
        (1, with_usage(false, 0)), // role chunk with usage
        (10, with_usage(true, 3)),
        (40, with_usage(true, 6)),
        (70, with_usage(true, 9)),
        (71, with_usage(false, 9)), // final usage-only chunk: not a token
    ];
    let m = timeline(&events, 72, true).measure(None).unwrap();
    assert_eq!(m.ttft, Some(MS * 10));
    assert_eq!(m.itl, vec![(MS * 10, 3), (MS * 10, 3)]);
    assert_eq!(m.itl_observations(), 6);
    assert_eq!(m.output_tokens, Some(TokenCount::Usage(9)));
    // The first event's three tokens arrived at once: 60 ms over the six after it.
    assert_eq!(m.tpot, Some(MS * 10));
    assert_eq!(m.timed_by, TimedBy::Usage);
}

#[test]
fn itl_time_is_conserved_when_a_text_chunk_carries_no_new_token() {
    let events = [
        (10, with_usage(true, 1)),
        (20, with_usage(true, 1)), // detokenizer flush: text, no new token
        (40, with_usage(true, 2)),
    ];
    let m = timeline(&events, 41, true).measure(None).unwrap();
    let total: Duration = m.itl.iter().map(|&(gap, n)| gap * n).sum();
    assert_eq!(total, MS * 30);
}

#[test]
fn event_count_is_the_fallback_token_count() {
    let m = timeline(&[(10, output()), (20, output())], 21, true)
        .measure(None)
        .unwrap();
    assert_eq!(m.output_tokens, Some(TokenCount::Events(2)));
    assert_eq!(m.tpot, Some(MS * 10));
}

#[test]
fn single_token_has_no_tpot_and_no_itl() {
    let m = timeline(&[(10, output())], 11, true).measure(None).unwrap();
    assert_eq!(m.tpot, None);
    assert!(m.itl.is_empty());
}

#[test]
fn no_token_is_empty_response_even_with_done() {
    let err = timeline(&[(1, Chunk::default())], 2, true)
        .measure(None)
        .unwrap_err();
    assert_eq!(err.category(), ErrorCategory::EmptyResponse);
}

#[test]
fn finish_reason_without_done_is_a_proper_end() {
    let finish = Chunk {
        finished: true,
        ..output()
    };
    assert!(
        timeline(&[(1, output()), (2, finish)], 3, false)
            .measure(None)
            .is_ok()
    );
}

#[test]
fn tokens_without_any_end_marker_are_interrupted() {
    let err = timeline(&[(1, output()), (2, output())], 3, false)
        .measure(None)
        .unwrap_err();
    assert_eq!(err.category(), ErrorCategory::StreamInterrupted);
}

#[test]
fn a_stream_cut_before_its_first_token_is_interrupted_not_empty() {
    // The server process was killed after the role chunk: no token, no [DONE].
    let err = timeline(&[(1, Chunk::default())], 2, false)
        .measure(None)
        .unwrap_err();
    assert_eq!(err.category(), ErrorCategory::StreamInterrupted);
    assert!(err.to_string().contains("before its first token"), "{err}");
    let err = timeline(&[], 2, false).measure(None).unwrap_err();
    assert_eq!(err.category(), ErrorCategory::StreamInterrupted);
}

#[test]
fn whole_bodies_have_no_ttft_and_count_tokens() {
    let t0 = Instant::now();
    let mut r = RequestRecord::new(t0);
    r.end = Some(t0 + MS * 40);
    r.whole = Some(WholeBody {
        has_output: true,
        output_tokens: Some(12),
        prompt_tokens: Some(5),
        cached_prompt_tokens: None,
    });
    let m = r.measure(None).unwrap();
    assert_eq!((m.ttft, m.tpot, m.e2el), (None, None, MS * 40));
    assert!(m.itl.is_empty());
    assert_eq!(m.output_tokens, Some(TokenCount::Usage(12)));
    assert_eq!(m.prompt_tokens, Some(5));

    r.whole = Some(WholeBody {
        has_output: true,
        ..WholeBody::default()
    });
    assert_eq!(
        r.measure(None).unwrap().output_tokens,
        None,
        "embeddings: no output tokens"
    );
    r.whole = Some(WholeBody::default());
    let err = r.measure(None).unwrap_err();
    assert_eq!(err.category(), ErrorCategory::EmptyResponse);
}

#[test]
fn implausible_usage_is_invalid_not_a_billion_observations() {
    let err = timeline(&[(1, with_usage(true, u64::MAX))], 2, true)
        .measure(None)
        .unwrap_err();
    assert_eq!(err.category(), ErrorCategory::InvalidResponse);
}

/// A stream whose events carry `text` (appended as a parser would) at the given offsets,
/// then a final usage-only chunk; the record is not yet measured.
fn streamed(events: &[(u64, &str)], last: Chunk) -> RequestRecord {
    let t0 = Instant::now();
    let mut r = RequestRecord::new(t0);
    let mut end = 0;
    for &(ms, text) in events {
        r.response.text.push_str(text);
        r.on_chunk(t0 + MS * ms as u32, output());
        end = ms;
    }
    r.on_chunk(t0 + MS * (end + 1) as u32, last);
    r.end = Some(t0 + MS * (end + 2) as u32);
    r.done = true;
    r
}

/// `k` words of five bytes per event, events `gap` ms apart from 100 ms.
fn words(sizes: &[u64], gap: u64) -> Vec<(u64, String)> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &k)| (100 + gap * i as u64, " word".repeat(k as usize)))
        .collect()
}

fn borrowed(events: &[(u64, String)]) -> Vec<(u64, &str)> {
    events.iter().map(|(ms, t)| (*ms, t.as_str())).collect()
}

#[test]
fn a_final_total_is_shared_over_multi_token_events() {
    // 64 tokens, 4 per event, 40 ms apart (10 ms per token), usage only at the end: a
    // speculative-decoding server or vLLM --stream-interval 4 without per-chunk usage.
    let events = words(&[4; 16], 40);
    let m = streamed(&borrowed(&events), with_usage(false, 64))
        .measure(None)
        .unwrap();
    assert_eq!(m.timed_by, TimedBy::Estimate);
    assert_eq!(m.output_tokens, Some(TokenCount::Usage(64)));
    assert_eq!(
        m.itl_observations(),
        60,
        "one per token after the first event"
    );
    assert_eq!(m.itl, vec![(MS * 10, 4); 15]);
    assert_eq!(m.tpot, Some(MS * 10), "not 40 ms");

    // Varying: 2, 1, 3, 2 tokens per event, each token 10 ms.
    let sizes = [2, 1, 3, 2, 2, 1, 3, 2];
    let t0 = Instant::now();
    let mut r = RequestRecord::new(t0);
    let mut at = 100;
    for &k in &sizes {
        at += 10 * k;
        r.response.text.push_str(&" word".repeat(k as usize));
        r.on_chunk(t0 + MS * at as u32, output());
    }
    r.on_chunk(t0 + MS * (at + 1) as u32, with_usage(false, 16));
    (r.end, r.done) = (Some(t0 + MS * (at + 2) as u32), true);
    let m = r.measure(None).unwrap();
    let expected: Vec<_> = sizes[1..].iter().map(|&k| (MS * 10, k as u32)).collect();
    assert_eq!(m.itl, expected);
    assert_eq!(m.tpot, Some(MS * 10));
}

#[test]
fn one_token_per_event_is_unchanged_by_the_estimate() {
    let events = words(&[1; 20], 10);
    let m = streamed(&borrowed(&events), with_usage(false, 20))
        .measure(None)
        .unwrap();
    assert_eq!(m.timed_by, TimedBy::Event);
    assert_eq!(m.itl, vec![(MS * 10, 1); 19]);
    assert_eq!(m.tpot, Some(MS * 10));
}

#[test]
fn hidden_reasoning_is_not_shared_over_the_visible_events() {
    // 1,000 reasoning tokens billed and broken out in usage, 60 visible streamed 10 ms
    // apart, and packed two per event (30 events).
    let events = words(&[2; 30], 20);
    let billed = Chunk {
        reasoning_tokens: Some(1000),
        ..with_usage(false, 1060)
    };
    let m = streamed(&borrowed(&events), billed).measure(None).unwrap();
    assert_eq!(m.output_tokens, Some(TokenCount::Usage(1060)), "billed");
    assert_eq!(m.timed_by, TimedBy::Estimate);
    assert_eq!(m.tpot, Some(MS * 10));
    assert_eq!(m.itl_observations(), 58);

    // The same when the reasoning itself was streamed: then its tokens arrived, and the
    // total is shared over the reasoning events too.
    let mut r = streamed(&borrowed(&events), billed);
    r.response.reasoning_streamed = true;
    let m = r.measure(None).unwrap();
    assert_eq!(
        m.timed_by,
        TimedBy::Event,
        "1,060 tokens cannot fit in 300 bytes"
    );

    // Hidden and not broken out: more tokens than bytes of text, so not all of them
    // arrived; one per event rather than a made-up share.
    let m = streamed(&borrowed(&events), with_usage(false, 1060))
        .measure(None)
        .unwrap();
    assert_eq!(m.timed_by, TimedBy::Event);
    assert_eq!(m.tpot, Some(MS * 20));
}

#[test]
fn an_empty_eos_event_is_billed_but_not_timed() {
    // vLLM with ignore_eos = false: every token its own event, then the EOS as an empty
    // `stop` chunk; completion_tokens counts the EOS.
    let t0 = Instant::now();
    let mut r = RequestRecord::new(t0);
    for i in 0..10u32 {
        r.response.text.push_str(" word");
        r.on_chunk(t0 + MS * (100 + 10 * i), output());
    }
    r.response.finish_reason = Some("stop".into());
    let eos = Chunk {
        finished: true,
        ..Chunk::default()
    };
    r.on_chunk(t0 + MS * 200, eos);
    r.on_chunk(t0 + MS * 201, with_usage(false, 11));
    (r.end, r.done) = (Some(t0 + MS * 202), true);
    let m = r.measure(None).unwrap();
    assert_eq!(m.output_tokens, Some(TokenCount::Usage(11)));
    assert_eq!(m.itl, vec![(MS * 10, 1); 9], "no event got the EOS");
}

#[test]
fn the_tokenizer_counts_each_events_text() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tokenizer/tiny-bpe.json");
    let counter = TokenCounter::load(&path).unwrap();
    let texts = ["the answer", " is", " forty two and more words"];
    let counts: Vec<u64> = texts.iter().map(|t| counter.count(t).unwrap()).collect();
    assert!(counts[2] > 1, "{counts:?}");
    let events: Vec<(u64, &str)> = texts
        .iter()
        .enumerate()
        .map(|(i, &t)| (100 + 10 * i as u64, t))
        .collect();
    // No usage at all: the tokenizer is the only source.
    let m = streamed(&events, Chunk::default())
        .measure(Some(&counter))
        .unwrap();
    assert_eq!(m.timed_by, TimedBy::Tokenizer);
    let after: u64 = counts[1..].iter().sum();
    assert_eq!(m.itl_observations(), after);
    assert_eq!(m.tpot, Some((MS * 20).div_f64(after as f64)));

    // A usage total equal to the events: one each for certain, the tokenizer not asked.
    let m = streamed(&events, with_usage(false, 3))
        .measure(Some(&counter))
        .unwrap();
    assert_eq!(m.timed_by, TimedBy::Event);
    assert_eq!(m.itl_observations(), 2);
}
