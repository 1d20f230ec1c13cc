use std::time::Duration;

use super::{erlang_b, normal_cdf, sampler_warnings, significant};
use crate::endpoint::sampling::{Params, SamplingSpec, Server};

fn sampler(server: Server, top_logprobs: u32, max_tokens: u32) -> SamplingSpec {
    let p = |top_k| Params {
        temperature: 1.0,
        top_k,
        top_p: 1.0,
        min_p: 0.0,
    };
    SamplingSpec {
        interval: Duration::from_secs(60),
        settings: vec![p(19), p(5), p(0)],
        max_tokens,
        top_logprobs,
        server,
        window: 256,
        alpha: 1e-4,
        samples: 3,
        seed_every: 10,
    }
}

#[test]
fn the_sampler_check_warns_where_it_cannot_judge_its_settings() {
    // The defaults' top-k 19 under a list of 20, and 64 tokens: nothing to say.
    for server in [
        Server::Auto,
        Server::Vllm,
        Server::LlamaCpp,
        Server::Unknown,
    ] {
        assert!(sampler_warnings(&sampler(server, 20, 64)).is_empty());
    }
    // A list of 6 shows the 5 best others: top-k 5 is exact, 19 is not; top-k 0 is off.
    let warnings = sampler_warnings(&sampler(Server::Vllm, 6, 64));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "sampler.settings[0] (temperature 1, top_k 19, top_p 1, min_p 0): top_k = 19 is more than top_logprobs - 1 = 5;"
        ) && warnings[0].ends_with("set top_logprobs = 20 or more, or top_k = 5 or less"),
        "{}",
        warnings[0]
    );
    // Top-k 20 needs 21 listed, more than any server lists.
    let mut wide = sampler(Server::Auto, 20, 64);
    wide.settings[0].top_k = 20;
    let warnings = sampler_warnings(&wide);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].ends_with("set top_k = 19 or less (top_logprobs lists at most 20)"),
        "{}",
        warnings[0]
    );
    // Without logprobs no list is read: the top-k is never judged from one.
    assert!(sampler_warnings(&sampler(Server::Unknown, 6, 64)).is_empty());
    // Answers of under 16 tokens may be under the diversity test's 16 characters,
    // where it is used: never with a server whose logprobs are read.
    for (server, when) in [
        (Server::Unknown, "without logprobs the"),
        (Server::Auto, "without logprobs (server = auto"),
    ] {
        let warnings = sampler_warnings(&sampler(server, 20, 15));
        assert_eq!(warnings.len(), 1, "{server:?}: {warnings:?}");
        assert!(
            warnings[0].starts_with(&format!("sampler.max_tokens = 15: {when}"))
                && warnings[0].ends_with("set max_tokens = 16 or more"),
            "{}",
            warnings[0]
        );
    }
    assert!(sampler_warnings(&sampler(Server::Unknown, 20, 16)).is_empty());
    assert!(sampler_warnings(&sampler(Server::LlamaCpp, 20, 8)).is_empty());
}

#[test]
fn the_normal_distribution_and_significant_digits() {
    for (z, p) in [(0.0, 0.5), (-2.326, 0.01), (1.0, 0.8413), (-3.0, 0.00135)] {
        assert!((normal_cdf(z) - p).abs() < 1e-4, "{z}: {}", normal_cdf(z));
    }
    assert_eq!(significant(0.000_192_9), "0.000193");
    assert_eq!(significant(0.024_83), "0.0248");
    assert_eq!(significant(694.44), "694");
    assert_eq!(significant(0.009_999_999_999_998_9), "0.01");
    assert_eq!(significant(180.0), "180");
}

#[test]
fn erlang_b_gives_the_shares_docs_alerts_md_tabulates() {
    // docs/alerts.md, InferprobeProbesSkipped: (load, 2 slots, 4 slots).
    for (load, two, four) in [
        (0.35, 0.0434, 0.00044),
        (1.0, 0.2, 0.0154),
        (2.0, 0.4, 0.0952),
        (8.0, 0.7805, 0.5746),
    ] {
        let b: Vec<f64> = erlang_b(load).take(5).collect();
        assert_eq!(b[0], 1.0);
        assert!((b[2] - two).abs() < 5e-4, "{load}: {}", b[2]);
        assert!((b[4] - four).abs() < 5e-5, "{load}: {}", b[4]);
    }
}

#[test]
fn a_processed_server_needs_a_setting_that_only_top_k_truncates() {
    let telling = |w: &String| w.contains("none is top-k alone");
    // The helper's settings are top-k alone: nothing to say.
    let spec = sampler(Server::LlamaCpp, 20, 64);
    assert!(!sampler_warnings(&spec).iter().any(telling));
    // Every setting with a top-p or a min-p: a forced greedy reads unscored.
    let mut cut = spec.clone();
    for p in &mut cut.settings {
        p.top_p = 0.8;
    }
    assert!(sampler_warnings(&cut).iter().any(telling));
    // Raw lists tell it anyway (the distribution asked for is rebuilt).
    cut.server = Server::Vllm;
    assert!(!sampler_warnings(&cut).iter().any(telling));
}
