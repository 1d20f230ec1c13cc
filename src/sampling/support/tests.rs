use rand::{RngExt, SeedableRng};

use super::*;
use crate::logprobs::{Position, Token};
use crate::sampling::calibration::{BINS, statistic, tail};
use crate::sim::model::ModelFlags;
use crate::sim::sampler::{LogprobsMode, SamplerFault, Sampling};

fn params(temperature: f64, top_k: u32, top_p: f64, min_p: f64) -> Params {
    Params {
        temperature,
        top_k,
        top_p,
        min_p,
    }
}

fn sampling(p: &Params) -> Sampling {
    Sampling {
        temperature: p.temperature,
        top_k: p.top_k,
        top_p: p.top_p,
        min_p: p.min_p,
        seed: None,
    }
}

/// The simulator's sampled tokens, as the logprobs reader would hand them over.
fn positions(flags: &ModelFlags, p: &Params, n: usize, top_n: usize, seed: u64) -> Vec<Position> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    flags
        .sample(
            &format!("random words {seed}"),
            &sampling(p),
            n,
            top_n,
            &mut rng,
        )
        .into_iter()
        .map(|t| {
            let mut top: Vec<(Token, f64)> = t
                .top
                .iter()
                .map(|(text, lp)| (Token::new(text, None), *lp))
                .collect();
            top.sort_by(|a, b| b.1.total_cmp(&a.1));
            Position {
                token: Token::new(&t.text, None),
                logprob: Some(t.logprob),
                top,
            }
        })
        .collect()
}

/// What a run of positions reads: outside tokens, and the χ² tail of its PITs.
fn run(positions: &[Position], p: &Params, semantics: Semantics, seed: u64) -> (usize, f64, usize) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut counts = [0u32; BINS];
    let (mut outside, mut scored) = (0, 0);
    for position in positions {
        let judged = judge(position, p, semantics);
        outside += usize::from(judged.support == Support::Outside);
        if let Some((below, own)) = judged.pit {
            let u = below + rng.random::<f64>() * own;
            counts[((u * BINS as f64) as usize).min(BINS - 1)] += 1;
            scored += 1;
        }
    }
    (outside, tail(statistic(&counts), (BINS - 1) as f64), scored)
}

const GRID: [(f64, u32, f64, f64); 7] = [
    (0.5, 5, 0.9, 0.0),
    (1.0, 19, 1.0, 0.0),
    (1.0, 20, 1.0, 0.0),
    (1.5, 20, 0.5, 0.1),
    (1.0, 1, 1.0, 0.0),
    (1.0, 0, 0.9, 0.0),
    (0.7, 0, 1.0, 0.1),
];

#[test]
fn a_correct_sampler_is_never_outside_and_its_pits_are_uniform() {
    for mode in [LogprobsMode::Raw, LogprobsMode::Processed] {
        let flags = ModelFlags {
            logprobs_mode: mode,
            ..ModelFlags::default()
        };
        let semantics = match mode {
            LogprobsMode::Raw => Semantics::Raw,
            LogprobsMode::Processed => Semantics::Processed,
        };
        for (i, &(t, k, top_p, min_p)) in GRID.iter().enumerate() {
            let p = params(t, k, top_p, min_p);
            let positions = positions(&flags, &p, 4000, 20, i as u64);
            let (outside, p_value, scored) = run(&positions, &p, semantics, 99);
            assert_eq!(outside, 0, "{mode:?} {p:?}");
            assert!(p_value > 1e-4, "{mode:?} {p:?}: p {p_value}");
            // top-k within the list, or min-p cutting inside it, and no top-p whose two
            // readings (over top-k's tokens, or over all) may differ: nearly every position
            // scored (a near-tie at a boundary is not).
            if (k > 0 && k < 20 || min_p > 0.0) && top_p >= 1.0 {
                assert!(scored >= 3000, "{mode:?} {p:?}: {scored}");
            }
        }
    }
}

#[test]
fn each_fault_is_outside_or_miscalibrated() {
    let cases = [
        (SamplerFault::TopKIgnored, params(1.0, 5, 1.0, 0.0), true),
        (SamplerFault::TopPIgnored, params(1.0, 0, 0.5, 0.0), true),
        (SamplerFault::MinPIgnored, params(1.0, 0, 1.0, 0.2), true),
        (
            SamplerFault::OutsideNucleus,
            params(1.0, 20, 0.9, 0.0),
            true,
        ),
        (SamplerFault::Temperature, params(0.5, 19, 1.0, 0.0), false),
        (SamplerFault::Greedy, params(1.0, 19, 1.0, 0.0), false),
        (SamplerFault::StuckRng, params(1.0, 19, 1.0, 0.0), false),
    ];
    for (fault, p, outside_expected) in cases {
        let flags = ModelFlags {
            sampler_fault: fault,
            outside_rate: 0.05,
            ..ModelFlags::default()
        };
        // About a default window: 256 tokens.
        let positions = positions(&flags, &p, 256, 20, 5);
        let (outside, p_value, scored) = run(&positions, &p, Semantics::Raw, 6);
        eprintln!("{fault:?}: outside {outside}, scored {scored}, p {p_value}");
        if outside_expected {
            assert!(outside > 0, "{fault:?}: none outside");
        } else {
            assert_eq!(outside, 0, "{fault:?}");
            assert!(p_value < 1e-4, "{fault:?}: p {p_value}");
        }
    }
}

/// A stuck exponential race (one noise vector for every step) draws each token as if
/// well drawn: calibration cannot see it, only two answers to one prompt being the same.
#[test]
fn a_stuck_race_is_calibrated_but_answers_alike() {
    let p = params(1.0, 19, 1.0, 0.0);
    let stuck = ModelFlags {
        sampler_fault: SamplerFault::StuckRace,
        ..ModelFlags::default()
    };
    let (outside, p_value, scored) = run(&positions(&stuck, &p, 256, 20, 5), &p, Semantics::Raw, 6);
    assert_eq!(outside, 0);
    assert!(scored > 200 && p_value > 1e-4, "{scored} {p_value}");
    let answer = |flags: &ModelFlags, seed: u64| -> Vec<String> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let tokens = flags.sample("random words", &sampling(&p), 16, 20, &mut rng);
        tokens.into_iter().map(|t| t.text).collect()
    };
    assert_eq!(answer(&stuck, 1), answer(&stuck, 2));
    let healthy = ModelFlags::default();
    assert_ne!(answer(&healthy, 1), answer(&healthy, 2));
}

fn position(own: f64, listed: &[f64]) -> Position {
    Position {
        token: Token::new("x", None),
        logprob: Some(own),
        top: listed
            .iter()
            .enumerate()
            .map(|(i, &lp)| (Token::new(&format!("t{i}"), None), lp))
            .collect(),
    }
}

#[test]
fn ties_and_rounding_at_a_boundary_are_never_outside() {
    // The sampled token ties the k-th (vLLM keeps every tie), or is the k+1-th within a
    // bfloat16 rounding of it.
    let listed = [-1.0, -1.2, -1.5, -1.5, -2.0];
    let p = params(1.0, 3, 1.0, 0.0);
    assert_eq!(
        judge(&position(-1.5, &listed), &p, Semantics::Raw).support,
        Support::Inside
    );
    let rounded = [-1.0, -1.2, -1.5, -1.504, -2.0];
    assert_eq!(
        judge(&position(-1.504, &rounded), &p, Semantics::Raw).support,
        Support::Inside
    );
    assert!(
        judge(&position(-1.504, &rounded), &p, Semantics::Raw)
            .pit
            .is_none()
    );
    // Clearly below the k-th: outside.
    assert_eq!(
        judge(&position(-2.0, &listed), &p, Semantics::Raw).support,
        Support::Outside
    );
    // top-p at its boundary: 0.5 of the mass above the token, asked 0.5.
    let half = [0.5f64.ln(), 0.25f64.ln(), 0.25f64.ln()];
    let p = params(1.0, 0, 0.5, 0.0);
    let at = judge(&position(0.25f64.ln(), &half), &p, Semantics::Raw);
    assert_eq!(at.support, Support::Inside, "{at:?}");
}

#[test]
fn vllm_chat_lists_the_sampled_token_first_and_drops_the_nth() {
    // The sampled token is the 30th; vLLM's chat lists it and the 19 best others. A top-p
    // of 0.9 over a flat distribution keeps far more than 20 tokens: nothing says it is
    // outside, and no PIT is made of a distribution not known.
    let mut listed: Vec<f64> = (0..19).map(|i| -3.5 - 0.01 * f64::from(i)).collect();
    let own = -3.8;
    listed.push(own);
    let p = params(1.0, 0, 0.9, 0.0);
    let judged = judge(&position(own, &listed), &p, Semantics::Raw);
    assert_eq!(
        judged,
        Judged {
            support: Support::Inside,
            pit: None
        }
    );
    // With top-k 20, the 20th is not listed: the sampled token cannot be judged outside.
    let p = params(1.0, 20, 1.0, 0.0);
    assert_eq!(
        judge(&position(own, &listed), &p, Semantics::Raw).support,
        Support::Inside
    );
    // With top-k 5, it is clearly outside.
    let p = params(1.0, 5, 1.0, 0.0);
    assert_eq!(
        judge(&position(own, &listed), &p, Semantics::Raw).support,
        Support::Outside
    );
}

#[test]
fn processed_lists_read_as_drawn() {
    let listed = [0.5f64.ln(), 0.3f64.ln(), 0.2f64.ln()];
    let p = params(1.0, 3, 1.0, 0.0);
    let j = judge(&position(0.3f64.ln(), &listed), &p, Semantics::Processed);
    assert_eq!(j.support, Support::Inside);
    let (below, own) = j.pit.unwrap();
    assert!((below - 0.5).abs() < 1e-9 && (own - 0.3).abs() < 1e-9);
    // A token the sampler gave no chance (llama.cpp's prob 0, vLLM's -9999).
    let j = judge(&position(-9999.0, &listed), &p, Semantics::Processed);
    assert_eq!(j.support, Support::Outside);
    // A list cut short (n_probs below what was kept): inside, no PIT.
    let j = judge(
        &position(0.3f64.ln(), &listed[..2]),
        &p,
        Semantics::Processed,
    );
    assert_eq!(
        j,
        Judged {
            support: Support::Inside,
            pit: None
        }
    );
}

#[test]
fn nothing_to_judge_is_unknown() {
    let p = params(1.0, 5, 1.0, 0.0);
    let mut no_logprob = position(-1.0, &[-1.0]);
    no_logprob.logprob = None;
    assert_eq!(
        judge(&no_logprob, &p, Semantics::Raw).support,
        Support::Unknown
    );
    assert_eq!(
        judge(&position(-1.0, &[]), &p, Semantics::Raw).support,
        Support::Unknown
    );
}

#[test]
fn a_processed_list_said_to_be_raw_is_read_as_processed() {
    // vLLM with `--logprobs-mode processed_logprobs`, taken for the default: top-p 0.5 kept
    // two tokens of 0.4 and 0.3 (renormalized 0.571 and 0.429); read as raw, the second
    // would have 0.571 of the mass above it, over 0.5.
    let listed = [(0.4f64 / 0.7).ln(), (0.3f64 / 0.7).ln(), -9999.0, -9999.0];
    let p = params(1.0, 0, 0.5, 0.0);
    let j = judge(&position((0.3f64 / 0.7).ln(), &listed), &p, Semantics::Raw);
    assert_eq!(j.support, Support::Inside);
    assert!(j.pit.is_some());
}

/// Review of issue 57, R7: vLLM keeps every token tied with the k-th, so a tie at the end
/// of the list may be kept beyond it and top-p renormalizes over more than the list: a
/// token kept that way is not outside.
#[test]
fn a_tie_with_the_kth_at_the_list_end_may_be_kept_beyond_it() {
    // Twenty listed (0.82 of the mass), the 19th and 20th tied at -3.5; up to six unlisted
    // tokens may tie them too. The 17th has 0.854 of the listed mass above it at
    // temperature 0.7, but 0.717 with six ties kept.
    let mut listed: Vec<f64> = (0..18).map(|i| -3.0 - 0.02 * f64::from(i)).collect();
    listed.extend([-3.5, -3.5]);
    let own = listed[16];
    let p = params(0.7, 19, 0.8, 0.0);
    let j = judge(&position(own, &listed), &p, Semantics::Raw);
    assert_eq!(j.support, Support::Inside, "{j:?}");
}

/// R2: top-p applied over the whole mass intersected with top-k (vLLM's ROCm aiter
/// kernel, SGLang's FlashInfer path) keeps more than over top-k's tokens renormalized: a
/// token only the joint reading keeps is not outside, and no PIT is made where the two
/// readings keep different tokens.
#[test]
fn top_p_over_the_whole_mass_keeps_more_and_is_not_outside() {
    // Five listed of equal weight 0.1 each and the rest spread thin: over top-k 5
    // renormalized, the 4th has 0.6 above it (dropped at 0.5); over the whole mass, 0.3.
    let listed = vec![0.1f64.ln(); 5]
        .into_iter()
        .enumerate()
        .map(|(i, lp)| lp - 0.01 * i as f64)
        .chain((0..15).map(|i| 0.01f64.ln() - 0.01 * f64::from(i)))
        .collect::<Vec<_>>();
    let p = params(1.0, 5, 0.5, 0.0);
    let j = judge(&position(listed[3], &listed), &p, Semantics::Raw);
    assert_eq!(
        j,
        Judged {
            support: Support::Inside,
            pit: None
        }
    );
}

/// A processed list is in the raw order: a sampled token clearly below the k-th listed
/// was not among the k (llama.cpp behind a gateway that dropped `top_k`).
#[test]
fn a_processed_list_wider_than_top_k_shows_the_token_outside() {
    let listed: Vec<f64> = (0..10)
        .map(|i| (0.1f64).ln() - 0.1 * f64::from(i))
        .collect();
    let p = params(1.0, 3, 1.0, 0.0);
    let j = judge(&position(listed[6], &listed), &p, Semantics::Processed);
    assert_eq!(j.support, Support::Outside);
    let j = judge(&position(listed[2], &listed), &p, Semantics::Processed);
    assert_eq!(j.support, Support::Inside);
}

#[test]
fn min_p_is_checked_on_a_processed_list_under_either_order() {
    let listed = [-1.0, -1.5, -2.0, -3.0];
    let at = |own: f64, t: f64| {
        judge(
            &position(own, &listed),
            &params(t, 0, 1.0, 0.2),
            Semantics::Processed,
        )
        .support
    };
    // At temperature 1 both orders agree: e^-2 of the best is under 0.2, e^-1 is not.
    assert_eq!(at(-3.0, 1.0), Support::Outside);
    assert_eq!(at(-2.0, 1.0), Support::Inside);
    // At 0.5, llama.cpp's min-p before temperature keeps down to 0.2^2 of the best here.
    assert_eq!(at(-3.0, 0.5), Support::Inside);
    assert_eq!(at(-5.0, 0.5), Support::Outside);
}
