use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;

fn answer(flags: &ModelFlags, prompt: &str, seed: u64) -> Vec<ToyToken> {
    flags.generate(prompt, 32, 5, &mut StdRng::seed_from_u64(seed))
}

fn texts(tokens: &[ToyToken]) -> Vec<&str> {
    tokens.iter().map(|t| t.text.as_str()).collect()
}

#[test]
fn the_same_weights_answer_alike_and_other_weights_do_not() {
    let healthy = ModelFlags::default();
    let a = answer(&healthy, "Tell me about rivers.", 1);
    assert_eq!(
        a,
        answer(&healthy, "Tell me about rivers.", 2),
        "rng-independent"
    );
    assert_eq!(a.len(), 32);
    assert!(a.iter().all(|t| t.top.len() == 5 && t.top[0].0 == t.text));
    assert!(a.iter().all(|t| t.top.windows(2).all(|w| w[0].1 >= w[1].1)));
    let probabilities: f64 = a[0].top.iter().map(|(_, lp)| lp.exp()).sum();
    assert!(probabilities > 0.0 && probabilities <= 1.0 + 1e-9);
    assert_ne!(
        texts(&a),
        texts(&answer(&healthy, "Tell me about stones.", 1))
    );
    let other = ModelFlags {
        weights_seed: 7,
        ..ModelFlags::default()
    };
    let differ = (0..20)
        .filter(|i| {
            let prompt = format!("prompt {i}");
            answer(&healthy, &prompt, 0)[0].text != answer(&other, &prompt, 0)[0].text
        })
        .count();
    assert!(
        differ >= 15,
        "other weights chose the same first token on {} of 20",
        20 - differ
    );
}

#[test]
fn near_ties_are_a_minority_and_only_they_flip() {
    let healthy = ModelFlags::default();
    let noisy = ModelFlags {
        near_tie_flips: 1.0,
        ..ModelFlags::default()
    };
    let (mut positions, mut ties, mut flipped_prompts) = (0, 0, 0);
    for i in 0..200 {
        let prompt = format!("prompt number {i}");
        let a = answer(&healthy, &prompt, 0);
        let b = answer(&noisy, &prompt, 0);
        let first_tie = a.iter().position(|t| t.top[0].1 - t.top[1].1 < NEAR_TIE);
        ties += a
            .iter()
            .filter(|t| t.top[0].1 - t.top[1].1 < NEAR_TIE)
            .count();
        positions += a.len();
        let first_difference = a.iter().zip(&b).position(|(x, y)| x.text != y.text);
        // Everything before the first near-tie is identical; a difference starts at one.
        assert_eq!(first_difference, first_tie, "{prompt}");
        if let (Some(i), Some(_)) = (first_difference, first_tie) {
            flipped_prompts += 1;
            assert_eq!(b[i].text, a[i].top[1].0, "the runner-up won");
            assert!((b[i].logprob - a[i].top[1].1).abs() < NEAR_TIE);
        }
        for (x, y) in a.iter().zip(&b).take(first_difference.unwrap_or(32)) {
            assert!((x.logprob - y.logprob).abs() <= 2e-4, "noise is small");
        }
    }
    let share = ties as f64 / positions as f64;
    assert!(
        (0.04..0.14).contains(&share),
        "near-ties at {share} of positions"
    );
    assert!(flipped_prompts > 40, "{flipped_prompts}");
}

#[test]
fn corruption_replaces_sure_tokens_and_reports_them_sure() {
    let corrupt = ModelFlags {
        corrupt_rate: 0.2,
        ..ModelFlags::default()
    };
    let healthy = ModelFlags::default();
    let mut replaced = 0;
    for i in 0..50 {
        let prompt = format!("prompt {i}");
        let (a, b) = (answer(&healthy, &prompt, 3), answer(&corrupt, &prompt, 3));
        if let Some(i) = a.iter().zip(&b).position(|(x, y)| x.text != y.text) {
            replaced += 1;
            assert!(a[i].top[0].1 - a[i].top[1].1 >= 1.5, "only sure tokens");
            assert_eq!(
                b[i].logprob, a[i].logprob,
                "reported as sure as the right one"
            );
        }
    }
    assert!(replaced > 40, "{replaced} of 50 answers corrupted");
}

#[test]
fn known_answers_are_right_unless_garbled() {
    let healthy = ModelFlags::default();
    let a = answer(&healthy, "What is 17 + 25? Answer with the number.", 0);
    assert_eq!(a[0].text, " 42");
    let garbled = ModelFlags {
        garble: true,
        ..ModelFlags::default()
    };
    let g = answer(&garbled, "What is 17 + 25? Answer with the number.", 0);
    let text: String = g.iter().map(|t| t.text.as_str()).collect();
    assert!(!text.contains("42") && !text.is_ascii(), "{text}");
}
