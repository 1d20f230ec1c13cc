//! Reasoning models (issue 59, item 4): the reasoning tokens each answer spent, counted
//! from usage or, where usage says nothing, from the streamed reasoning; the time to the
//! answer's first visible token beside the TTFT; and an answer that was reasoning alone,
//! cut at its budget, counted as `reasoning_exhausted`, not as a success. The simulator's
//! `--reasoning N` streams the first N tokens as reasoning.

use crate::common;

use std::time::Duration;

use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::SimConfig;

const TTFT: Duration = Duration::from_millis(20);
const ITL: Duration = Duration::from_millis(10);

async fn reasoner(reasoning: u32, usage: bool) -> common::Sim {
    start_sim(SimConfig {
        ttft: TTFT,
        itl: ITL,
        reasoning,
        usage,
        ..SimConfig::default()
    })
    .await
}

fn target(name: &str, backend: &str, url: &str) -> String {
    format!(
        "[[targets]]\nname = \"{name}\"\nbackend = \"{backend}\"\nurl = \"{url}\"\nmodel = \"m\"\nrate = 8\noutput_tokens = 16\n"
    )
}

fn mean(s: &Scrape, name: &str, target: &str) -> f64 {
    let (sum, count) = s.histogram(name, target);
    sum / count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_tokens_the_answers_first_token_and_an_answer_never_given() {
    // 6 of 16 tokens reasoning, over chat and the Responses API; then the same without
    // usage (counted from the stream); then 100 of 16: reasoning alone.
    let (chat, responses, silent, exhausted) = (
        reasoner(6, true).await,
        reasoner(6, true).await,
        reasoner(6, false).await,
        reasoner(100, true).await,
    );
    let toml = [
        target("chat", "openai-chat", &chat.url()),
        target("responses", "openai-responses", &responses.url()),
        target("silent", "openai-chat", &silent.url()),
        target("exhausted", "openai-chat", &exhausted.url()),
        target("tolerated", "openai-chat", &exhausted.url()),
        "reasoning_exhausted = \"success\"\n".into(),
    ]
    .concat();
    let daemon = start_daemon(&toml).await;
    let answered = ["chat", "responses", "silent"];
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            answered.iter().all(|t| s.successes(t) >= 6.0)
                && s.requests("exhausted") >= 6.0
                && s.requests("tolerated") >= 3.0
        })
        .await;
    daemon.stop().await;

    for t in answered {
        assert_eq!(s.all_errors(t), 0.0, "{t}\n{}", s.text);
        // Every success spent 6 tokens reasoning: said by usage, or seen in the stream.
        let reasoning = s.sum("inferprobe_reasoning_tokens_total", &[("target", t)]);
        assert_eq!(reasoning, 6.0 * s.successes(t), "{t}\n{}", s.text);
        assert_eq!(
            s.sum("inferprobe_output_tokens_total", &[("target", t)]),
            16.0 * s.successes(t),
            "{t}"
        );
        // The first token is the first reasoning token; the answer's comes 6 tokens later.
        let ttft = mean(&s, "inferprobe_time_to_first_token_seconds", t);
        let answer = mean(&s, "inferprobe_time_to_first_answer_token_seconds", t);
        let (_, answers) = s.histogram("inferprobe_time_to_first_answer_token_seconds", t);
        assert_eq!(answers, s.successes(t), "{t}: one per answer");
        let later = answer - ttft;
        let expected = (ITL * 6).as_secs_f64();
        assert!(
            (expected * 0.8..expected + 0.05).contains(&later),
            "{t}: the answer came {later:.3}s after the first token, expected about {expected}"
        );
    }

    // Reasoning alone, cut at the budget: a failure of its own, never a success.
    assert_eq!(s.successes("exhausted"), 0.0, "{}", s.text);
    assert_eq!(
        s.errors("exhausted", "reasoning_exhausted"),
        s.requests("exhausted"),
        "{}",
        s.text
    );
    // Unless the target says such an answer is a success.
    assert_eq!(s.all_errors("tolerated"), 0.0, "{}", s.text);
    assert_eq!(
        s.successes("tolerated"),
        s.requests("tolerated"),
        "{}",
        s.text
    );
}

/// A model that does not reason has no reasoning series and no answer histogram: they are
/// made on the first reasoning answer, not zero-filled for every target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_does_not_reason_has_no_reasoning_series() {
    let plain = reasoner(0, true).await;
    let daemon = start_daemon(&target("plain", "openai-chat", &plain.url())).await;
    let s = daemon
        .wait_for(Duration::from_secs(20), |s| s.successes("plain") >= 4.0)
        .await;
    daemon.stop().await;
    for family in [
        "inferprobe_reasoning_tokens_total",
        "inferprobe_time_to_first_answer_token_seconds_count",
    ] {
        assert_eq!(s.matching(family, &[]).count(), 0, "{family}\n{}", s.text);
    }
}
