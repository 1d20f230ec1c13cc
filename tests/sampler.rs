//! The sampler check (issue 57) against the simulator: a healthy sampler reads `ok` with
//! every token inside its support and calibrated windows; each fault is told within two
//! windows at the default settings; a server whose logprobs are not established, and one
//! that ignores temperature, are judged by the diversity of their answers.

use crate::common;

use std::time::Duration;

use common::{Scrape, start_daemon, start_sim};
use inferprobe::sim::SimConfig;
use inferprobe::sim::sampler::{LogprobsMode, SamplerFault};

fn sim_config(fault: SamplerFault, mode: LogprobsMode) -> SimConfig {
    let mut config = SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::ZERO,
        ..SimConfig::default()
    };
    config.model.sampler_fault = fault;
    config.model.outside_rate = 0.05;
    config.model.logprobs_mode = mode;
    config
}

fn config(url: &str, backend: &str, extra: &str) -> String {
    format!(
        r#"
        [[targets]]
        name = "s"
        url = "{url}"
        model = "m"
        backend = "{backend}"
        rate = 1e-6
        sampler = {{ interval = "20ms"{extra} }}
        "#
    )
}

fn count(s: &Scrape, name: &str, result: &str) -> f64 {
    s.sum(name, &[("result", result)])
}

fn rounds(s: &Scrape, result: &str) -> f64 {
    count(s, "inferprobe_sampler_checks_total", result)
}

fn windows(s: &Scrape, result: &str) -> f64 {
    count(s, "inferprobe_sampler_calibration_windows_total", result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_sampler_reads_ok_in_both_logprob_semantics() {
    for (mode, backend) in [
        (LogprobsMode::Raw, "openai-chat"),
        (LogprobsMode::Processed, "openai"),
    ] {
        let sim = start_sim(sim_config(SamplerFault::None, mode)).await;
        let daemon = start_daemon(&config(&sim.url(), backend, "")).await;
        // A round's tokens reach its window before its result is counted: a scrape between
        // the two sees the window without the round, so both are waited for.
        let s = daemon
            .wait_for(Duration::from_secs(60), |s| {
                windows(s, "ok") + windows(s, "miscalibrated") >= 4.0
                    && s.sum("inferprobe_sampler_checks_total", &[]) >= 16.0
            })
            .await;
        daemon.stop().await;
        assert_eq!(rounds(&s, "outside_support"), 0.0, "{mode:?}");
        assert_eq!(
            count(&s, "inferprobe_sampler_tokens_total", "outside_support"),
            0.0
        );
        assert!(rounds(&s, "ok") >= 16.0, "{mode:?}: {}", rounds(&s, "ok"));
        // Every round's twin drew its own answer.
        for result in [
            "sampling_ignored",
            "fixed_seed",
            "invalid_logprobs",
            "unscored",
        ] {
            assert_eq!(rounds(&s, result), 0.0, "{mode:?} {result}");
        }
        // Four windows at a false-alarm rate of 1e-4 each; the last one's figures.
        assert_eq!(windows(&s, "miscalibrated"), 0.0, "{mode:?}");
        let p_value = s.sum("inferprobe_sampler_calibration_p_value", &[]);
        let chi2 = s.sum("inferprobe_sampler_calibration_statistic", &[]);
        assert!(
            (1e-4..=1.0).contains(&p_value) && chi2 >= 0.0,
            "{p_value} {chi2}"
        );
        // 64 tokens a round, every one judged.
        assert!(count(&s, "inferprobe_sampler_tokens_total", "ok") >= 16.0 * 64.0);
        assert_eq!(
            count(&s, "inferprobe_sampler_tokens_total", "unscored"),
            0.0
        );
        // A seeded pair every 10 rounds: the simulator draws a seeded request from its seed.
        let seeds = |r| count(&s, "inferprobe_sampler_seed_checks_total", r);
        assert!(seeds("reproduced") >= 1.0, "{mode:?}");
        assert_eq!(seeds("differed") + seeds("failed"), 0.0, "{mode:?}");
        // Apart from latency: no probe of the target's own.
        assert_eq!(s.requests("s"), 0.0, "{mode:?}");
    }
}

/// How a fault is told.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Told {
    /// Tokens outside the support.
    Outside,
    /// Two windows in a row miscalibrated (or outside tokens, where a truncation depends
    /// on the temperature).
    Miscalibrated,
    /// The twin drew the same answer: `sampling_ignored`.
    Ignored,
    /// Logprobs no distribution has: `invalid_logprobs`.
    Invalid,
    /// Not at all: a processed list shows the distribution the faulty sampler used.
    Unseen,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_is_told_within_two_windows() {
    use SamplerFault as F;
    use Told::*;
    let raw = [
        (F::TopKIgnored, Outside),
        (F::TopPIgnored, Outside),
        (F::MinPIgnored, Outside),
        (F::OutsideNucleus, Outside),
        (F::Temperature, Miscalibrated),
        (F::Greedy, Ignored),
        (F::StuckRng, Ignored),
        (F::StuckRace, Ignored),
        (F::InvalidLogprobs, Invalid),
    ];
    let processed = [
        (F::TopKIgnored, Outside),
        (F::TopPIgnored, Unseen),
        (F::MinPIgnored, Outside),
        (F::OutsideNucleus, Outside),
        (F::Temperature, Unseen),
        (F::Greedy, Ignored),
        (F::StuckRng, Ignored),
        (F::StuckRace, Ignored),
        (F::InvalidLogprobs, Invalid),
    ];
    let cases = raw
        .map(|(f, t)| (f, t, LogprobsMode::Raw, "openai-chat"))
        .into_iter()
        .chain(processed.map(|(f, t)| (f, t, LogprobsMode::Processed, "openai")));
    for (fault, told, mode, backend) in cases {
        let sim = start_sim(sim_config(fault, mode)).await;
        let daemon = start_daemon(&config(&sim.url(), backend, "")).await;
        // Two default windows (256 PITs each, about 4 rounds of 64 tokens).
        let s = daemon
            .wait_for(Duration::from_secs(60), |s| {
                rounds(s, "outside_support") > 0.0
                    || rounds(s, "sampling_ignored") >= 2.0
                    || rounds(s, "invalid_logprobs") >= 2.0
                    || windows(s, "ok") + windows(s, "miscalibrated") >= 2.0
            })
            .await;
        daemon.stop().await;
        let outside = rounds(&s, "outside_support");
        let ignored = rounds(&s, "sampling_ignored");
        let miscalibrated = windows(&s, "miscalibrated") >= 2.0
            && s.sum("inferprobe_sampler_miscalibrated_windows_in_row", &[]) >= 2.0;
        let ok = match told {
            Outside => outside > 0.0,
            Miscalibrated => outside > 0.0 || miscalibrated,
            // Every round whose lists can tell, and none read ok.
            Ignored => ignored >= 2.0 && rounds(&s, "ok") == 0.0 && outside == 0.0,
            Unseen => outside == 0.0 && ignored == 0.0,
            Invalid => rounds(&s, "invalid_logprobs") >= 2.0 && rounds(&s, "ok") == 0.0,
        };
        assert!(
            ok,
            "{fault:?} {mode:?}: rounds outside {outside}, ignored {ignored}, ok {}, unscored {}, windows miscalibrated {}",
            rounds(&s, "ok"),
            rounds(&s, "unscored"),
            windows(&s, "miscalibrated")
        );
        // A seeded twin tells a fixed server seed apart: the simulator's faults draw alike
        // whatever the seed.
        assert_eq!(rounds(&s, "fixed_seed"), 0.0, "{fault:?} {mode:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_logprobs_answers_are_compared() {
    // Not established (the simulator is asked as an unknown server, through the Messages
    // API): three answers a round at temperature 1 differ.
    let sim = start_sim(sim_config(SamplerFault::None, LogprobsMode::Raw)).await;
    let daemon = start_daemon(&config(&sim.url(), "anthropic", "")).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| rounds(s, "ok") >= 5.0)
        .await;
    daemon.stop().await;
    assert_eq!(rounds(&s, "sampling_ignored"), 0.0);
    // A server that ignores temperature answers greedily: every answer the same.
    let sim = start_sim(sim_config(SamplerFault::Greedy, LogprobsMode::Raw)).await;
    let daemon = start_daemon(&config(&sim.url(), "openai-chat", ", server = \"unknown\"")).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            rounds(s, "sampling_ignored") >= 3.0
        })
        .await;
    daemon.stop().await;
    assert_eq!(rounds(&s, "ok"), 0.0);
}

/// A healthy replica over a day at the default rate (1,440 rounds of 64 tokens, time-scaled
/// to a round every few milliseconds): no outside token, and no two windows in a row
/// miscalibrated (two at all has a chance of 5e-4 at about 300 windows and `alpha` 1e-4), so no
/// sampler alert could fire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_day_fires_no_sampler_alert() {
    let sim = start_sim(sim_config(SamplerFault::None, LogprobsMode::Raw)).await;
    let daemon = start_daemon(&config(&sim.url(), "openai-chat", "").replace("20ms", "10ms")).await;
    let s = daemon
        .wait_for(Duration::from_secs(240), |s| {
            rounds(s, "ok") + rounds(s, "outside_support") >= 1440.0
        })
        .await;
    daemon.stop().await;
    assert_eq!(
        count(&s, "inferprobe_sampler_tokens_total", "outside_support"),
        0.0
    );
    assert_eq!(rounds(&s, "sampling_ignored"), 0.0);
    let windows_seen = windows(&s, "ok") + windows(&s, "miscalibrated");
    eprintln!(
        "a healthy day: {windows_seen} windows, {} miscalibrated, {} rounds ok, {} unscored",
        windows(&s, "miscalibrated"),
        rounds(&s, "ok"),
        rounds(&s, "unscored")
    );
    assert!(windows_seen >= 250.0, "{windows_seen}");
    assert!(
        windows(&s, "miscalibrated") <= 1.0,
        "{}",
        windows(&s, "miscalibrated")
    );
}
