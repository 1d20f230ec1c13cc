use std::time::Duration;

use super::*;
use crate::record::{TimedBy, TokenCount};

fn spec() -> PrefixCacheSpec {
    PrefixCacheSpec {
        interval: Duration::from_secs(60),
        prefix_tokens: 1024,
        block_tokens: None,
        reuse_gap: Duration::ZERO,
        hit_share: 0.5,
        speedup: 1.5,
        objective: None,
        priced_writes: false,
    }
}

/// A request of `prompt` tokens, `cached` of them reported cached, its first token at
/// `ttft_ms`.
fn request(ttft_ms: u64, prompt: u64, cached: Option<u64>) -> Measurement {
    Measurement {
        ttft: Some(Duration::from_millis(ttft_ms)),
        tpot: None,
        itl: Vec::new(),
        timed_by: TimedBy::Event,
        buffered: false,
        e2el: Duration::from_millis(ttft_ms + 5),
        output_tokens: Some(TokenCount::Usage(1)),
        prompt_tokens: Some(prompt),
        cached_prompt_tokens: cached,
        answer: Default::default(),
    }
}

/// A 1,024-token prefix after the nonce, and a question: 1,040 prompt tokens.
fn measured(ttft_ms: u64, cached: Option<u64>) -> Measurement {
    request(ttft_ms, 1040, cached)
}

const HIT_REPORTED: Known = Known {
    reported_before: true,
    cold_written: None,
};

fn verdict(spec: &PrefixCacheSpec, cold: &Measurement, warm: &Measurement) -> Verdict {
    judge(spec, Some(cold), Some(warm), Known::default()).verdict
}

#[test]
fn usage_judges_where_the_server_reports_it() {
    let cold = measured(63, Some(0));
    // vLLM: whole 16-token blocks of a 1,024-token prefix after an 8-token nonce.
    let warm = measured(60, Some(1024));
    assert_eq!(verdict(&spec(), &cold, &warm), Verdict::Hit(Rule::Usage));
    // Reported and short: a miss, however fast (a warm GPU is not a cache hit).
    let short = measured(10, Some(16));
    assert_eq!(verdict(&spec(), &cold, &short), Verdict::Miss);
    assert_eq!(
        verdict(&spec(), &cold, &measured(10, Some(0))),
        Verdict::Miss
    );
}

#[test]
fn what_every_request_has_cached_is_not_the_prefix() {
    // A template with a 600-token system prompt before the nonce: cached for the cold
    // request too, so 600 on the warm one is a miss, and 600 + 1,024 a hit.
    let cold = request(63, 1640, Some(600));
    assert_eq!(
        verdict(&spec(), &cold, &request(60, 1640, Some(600))),
        Verdict::Miss
    );
    assert_eq!(
        verdict(&spec(), &cold, &request(20, 1640, Some(1616))),
        Verdict::Hit(Rule::Usage)
    );
}

#[test]
fn ttft_judges_where_the_server_says_nothing_and_never_calls_a_miss() {
    let cold = measured(63, None);
    assert_eq!(
        verdict(&spec(), &cold, &measured(17, None)),
        Verdict::Hit(Rule::Ttft)
    );
    // Not faster by 1.5×: cannot tell, so not a miss.
    let unclear = verdict(&spec(), &cold, &measured(50, None));
    assert_eq!(unclear, Verdict::Unreported);
    assert_eq!((unclear.result(), unclear.rule()), ("unreported", "ttft"));
    assert_eq!(
        judge(&spec(), None, Some(&cold), Known::default()).verdict,
        Verdict::Failed
    );
    assert_eq!(Verdict::Failed.rule(), "none");
}

/// Item 1: vLLM's decode side behind a prefill/decode split reports `prompt_tokens − 1`
/// cached on every request, the cold one included. Its count says nothing about the cache:
/// the pair is judged by TTFT and the reason kept.
#[test]
fn a_cold_request_reporting_its_prefix_cached_is_judged_by_ttft() {
    let cold = measured(80, Some(1039));
    let fast = judge(
        &spec(),
        Some(&cold),
        Some(&measured(30, Some(1039))),
        Known::default(),
    );
    assert_eq!(fast.verdict, Verdict::Hit(Rule::Ttft));
    assert_eq!(fast.set_aside, Some(SetAside::ColdCached));
    let slow = judge(
        &spec(),
        Some(&cold),
        Some(&measured(75, Some(1039))),
        Known::default(),
    );
    assert_eq!(
        (slow.verdict, slow.set_aside),
        (Verdict::Unreported, Some(SetAside::ColdCached)),
        "never a miss"
    );
    // SGLang's double count, capped at the prompt: the same.
    let capped = judge(
        &spec(),
        Some(&measured(80, Some(1040))),
        Some(&measured(79, Some(1040))),
        Known::default(),
    );
    assert_eq!(capped.verdict, Verdict::Unreported);
    // llama.cpp reusing most of an earlier prefix at shifted positions: 700 of 1,040.
    let reused = judge(
        &spec(),
        Some(&measured(80, Some(700))),
        Some(&measured(78, Some(1030))),
        Known::default(),
    );
    assert_eq!(reused.set_aside, Some(SetAside::ColdCached));
    // A cold request with less than half the prefix cached is trusted: a miss is a miss.
    let partly = judge(
        &spec(),
        Some(&measured(80, Some(400))),
        Some(&measured(78, Some(400))),
        Known::default(),
    );
    assert_eq!((partly.verdict, partly.set_aside), (Verdict::Miss, None));
}

/// Item 3: with the server's block size known, only the prefix's whole blocks are
/// expected back. A 300-token prefix on 128-token blocks: 256 cacheable, so 128 is a hit
/// (a share of 300 would have asked for 150).
#[test]
fn block_rounding_expects_whole_blocks() {
    let spec = PrefixCacheSpec {
        prefix_tokens: 300,
        block_tokens: Some(128),
        ..spec()
    };
    let cold = request(30, 316, Some(0));
    assert_eq!(
        verdict(&spec, &cold, &request(20, 316, Some(128))),
        Verdict::Hit(Rule::Usage)
    );
    assert_eq!(
        verdict(&spec, &cold, &request(20, 316, Some(0))),
        Verdict::Miss
    );
    let unknown = PrefixCacheSpec {
        block_tokens: None,
        ..spec
    };
    assert_eq!(
        verdict(&unknown, &cold, &request(20, 316, Some(128))),
        Verdict::Miss
    );
}

/// Item 6: a provider that sends cached tokens only on a hit. Before any count, a response
/// without one says nothing; once the target has reported one, it says 0.
#[test]
fn absence_is_zero_once_the_server_has_reported() {
    let cold = measured(63, None);
    let warm = measured(62, None);
    let unknown = judge(&spec(), Some(&cold), Some(&warm), Known::default());
    assert_eq!(unknown.verdict, Verdict::Unreported);
    let known = judge(&spec(), Some(&cold), Some(&warm), HIT_REPORTED);
    assert_eq!(known.verdict, Verdict::Miss);
    let hit = judge(
        &spec(),
        Some(&cold),
        Some(&measured(20, Some(1024))),
        HIT_REPORTED,
    );
    assert_eq!(hit.verdict, Verdict::Hit(Rule::Usage));
    // No usage at all (a stream cut before it): still unknown, judged by TTFT.
    let mut no_usage = measured(62, None);
    no_usage.prompt_tokens = None;
    assert_eq!(
        judge(&spec(), Some(&cold), Some(&no_usage), HIT_REPORTED).verdict,
        Verdict::Unreported
    );
}

/// Item 2: Anthropic says what the cold request wrote to its cache. Nothing written and
/// nothing read is a prefix the model does not cache (below its minimum): not a miss. A
/// prefix written and not read is.
#[test]
fn nothing_written_is_no_miss() {
    let cold = measured(63, Some(0));
    let warm = measured(60, Some(0));
    let unwritten = Known {
        cold_written: Some(0),
        ..Known::default()
    };
    let judged = judge(&spec(), Some(&cold), Some(&warm), unwritten);
    assert_eq!(
        (judged.verdict, judged.set_aside),
        (Verdict::Unreported, Some(SetAside::NotWritten))
    );
    let written = Known {
        cold_written: Some(1030),
        ..Known::default()
    };
    assert_eq!(
        judge(&spec(), Some(&cold), Some(&warm), written).verdict,
        Verdict::Miss
    );
    assert_eq!(
        judge(
            &spec(),
            Some(&cold),
            Some(&measured(20, Some(1030))),
            written
        )
        .verdict,
        Verdict::Hit(Rule::Usage)
    );
}

/// After a review: a server that reported before and stops (a flag dropped in a rollout, a
/// gateway to a replica that does not report) is no cold cache where TTFT shows the saving.
#[test]
fn a_missing_count_with_the_prefill_saved_is_a_hit_by_ttft() {
    let cold = measured(213, None);
    let fast = judge(&spec(), Some(&cold), Some(&measured(9, None)), HIT_REPORTED);
    assert_eq!(fast.verdict, Verdict::Hit(Rule::Ttft));
    let slow = judge(
        &spec(),
        Some(&cold),
        Some(&measured(200, None)),
        HIT_REPORTED,
    );
    assert_eq!(slow.verdict, Verdict::Miss);
    // A reported 0 stays a miss however fast (a warm GPU is not a cache hit).
    let zero = judge(
        &spec(),
        Some(&cold),
        Some(&measured(9, Some(0))),
        HIT_REPORTED,
    );
    assert_eq!(zero.verdict, Verdict::Miss);
}

/// After a review: the set-aside rule does not move with `hit_share` (at 1.0 it once set
/// nothing aside and every P/D pair missed), and a small prompt count is no claim.
#[test]
fn setting_aside_asks_half_the_prefix_whatever_the_hit_share() {
    let strict = PrefixCacheSpec {
        hit_share: 1.0,
        ..spec()
    };
    let pd = judge(
        &strict,
        Some(&measured(80, Some(1039))),
        Some(&measured(30, Some(1039))),
        Known::default(),
    );
    assert_eq!(
        (pd.verdict, pd.set_aside),
        (Verdict::Hit(Rule::Ttft), Some(SetAside::ColdCached))
    );
    // Usage counting only the tail (10 prompt tokens, 0 cached): not set aside.
    let tail = judge(
        &spec(),
        Some(&request(80, 10, Some(0))),
        Some(&request(20, 10, Some(1024))),
        Known::default(),
    );
    assert_eq!(
        (tail.verdict, tail.set_aside),
        (Verdict::Hit(Rule::Usage), None)
    );
}
