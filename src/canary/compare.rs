//! The rule that decides whether a greedy answer is wrong, position by position against a
//! reference answer to the same prompt.
//!
//! Greedy decoding is not bitwise reproducible on GPUs: a different batch size changes the
//! reduction order, logprobs move by 1e-7 to 1e-2, and where the top two tokens are nearly
//! tied they may swap; after a swap the two answers continue from different prefixes and
//! may share nothing more. A canary that compared text would page on that. So:
//!
//! - walk both answers while their tokens agree, noting the largest logprob difference on
//!   the way (**drift**: a kernel going wrong shows here before it flips a token);
//! - at the first position where the tokens differ, it is a **divergence** if the reference
//!   led its runner-up there by at least `margin` nats (it was sure, and noise does not
//!   move a logprob that far); otherwise it is a near-tie that may flip, and the comparison
//!   stops there with a match, since everything after it may legitimately differ;
//! - an answer that ends early, where the reference was sure of one more token, diverges
//!   there too (unless it ended at its length limit).
//!
//! Example, margin 1.0: the reference is ` Paris` (−0.01; runner-up ` Lyon` −5.2) then
//! ` is` (−0.70; runner-up ` was` −0.72). An answer ` Paris was …` agrees at 0, differs at
//! 1 where the reference led by 0.02 nats: a match over one position. An answer ` Lyon …`
//! differs at 0, where the reference led by 5.19 nats: diverged at position 0, expected
//! ` Paris`, received ` Lyon`.
//!
//! Positions where both answers agree are compared whatever their margin: an unsure
//! position that did not flip leaves both answers on the same prefix.
//!
//! A token spelled without its identity (vLLM gives a token that is one byte of a longer
//! character as `""` with no bytes) cannot be told from another such token: where both
//! answers have one, the comparison stops there with a match, as at a near-tie.

use crate::logprobs::{Identity, Position};

/// What the comparison found.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// No confident difference: `compared` positions agreed before the end or a near-tie.
    Match {
        compared: usize,
        drift: f64,
    },
    Diverged(Divergence),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Divergence {
    pub position: usize,
    pub expected: String,
    /// The token received there, or `<end>` for an answer that stopped.
    pub received: String,
    /// How far the reference's token led its runner-up there, in nats.
    pub margin: f64,
    /// The largest logprob difference over the agreed positions before it.
    pub drift: f64,
}

impl Verdict {
    pub fn drift(&self) -> f64 {
        match self {
            Self::Match { drift, .. } => *drift,
            Self::Diverged(d) => d.drift,
        }
    }
}

/// Compare `answer` with `reference` (both greedy answers to one prompt). `answer_ended`:
/// the answer stopped on its own (EOS or a stop string), not at its length limit.
pub fn compare(
    reference: &[Position],
    answer: &[Position],
    answer_ended: bool,
    margin: f64,
) -> Verdict {
    let mut drift: f64 = 0.0;
    for (i, expected) in reference.iter().enumerate() {
        let received = match answer.get(i) {
            Some(received) => received,
            None if answer_ended => {
                return judge(i, expected, "<end>".into(), margin, drift);
            }
            None => break,
        };
        match expected.token.identity(&received.token) {
            Identity::Same => {}
            Identity::Different => {
                return judge(i, expected, received.token.display(), margin, drift);
            }
            // Both are parts of characters the server did not spell out: they may differ,
            // and everything after them with them, so nothing further can be judged.
            Identity::Unknown => return Verdict::Match { compared: i, drift },
        }
        if let (Some(a), Some(b)) = (expected.logprob, received.logprob) {
            drift = drift.max((a - b).abs());
        }
    }
    Verdict::Match {
        compared: reference.len().min(answer.len()),
        drift,
    }
}

fn judge(i: usize, expected: &Position, received: String, margin: f64, drift: f64) -> Verdict {
    match expected.margin() {
        Some(m) if m >= margin => Verdict::Diverged(Divergence {
            position: i,
            expected: expected.token.display(),
            received,
            margin: m,
            drift,
        }),
        // The reference was not sure here (or did not say): a flip is allowed.
        _ => Verdict::Match { compared: i, drift },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logprobs::Token;

    fn position(text: &str, logprob: f64, runner_up: f64) -> Position {
        Position {
            token: Token::new(text, None),
            logprob: Some(logprob),
            top: vec![
                (Token::new(text, None), logprob),
                (Token::new(" other", None), runner_up),
            ],
        }
    }

    #[test]
    fn the_documented_example() {
        let reference = [
            position(" Paris", -0.01, -5.2),
            position(" is", -0.70, -0.72),
        ];
        let flip = [
            position(" Paris", -0.011, -5.2),
            position(" was", -0.71, -0.72),
        ];
        let verdict = compare(&reference, &flip, false, 1.0);
        assert!(
            matches!(verdict, Verdict::Match { compared: 1, .. }),
            "{verdict:?}"
        );
        assert!((verdict.drift() - 0.001).abs() < 1e-12);
        let wrong = [position(" Lyon", -0.01, -5.2)];
        let Verdict::Diverged(d) = compare(&reference, &wrong, false, 1.0) else {
            panic!("a confident difference is a divergence");
        };
        assert_eq!(
            (d.position, d.expected.as_str(), d.received.as_str()),
            (0, " Paris", " Lyon")
        );
        assert!((d.margin - 5.19).abs() < 1e-9);
    }

    #[test]
    fn agreement_past_a_near_tie_is_still_compared() {
        let reference = [position(" a", -0.69, -0.70), position(" b", -0.01, -6.0)];
        let answer = [position(" a", -0.70, -0.69), position(" c", -0.01, -6.0)];
        assert!(
            matches!(compare(&reference, &answer, false, 1.0), Verdict::Diverged(d) if d.position == 1)
        );
    }

    #[test]
    fn an_early_end_diverges_only_where_the_reference_was_sure_and_not_at_the_limit() {
        let reference = [position(" a", -0.01, -6.0), position(" b", -0.01, -6.0)];
        let short = [position(" a", -0.01, -6.0)];
        assert!(
            matches!(compare(&reference, &short, true, 1.0), Verdict::Diverged(d) if d.received == "<end>")
        );
        assert_eq!(
            compare(&reference, &short, false, 1.0),
            Verdict::Match {
                compared: 1,
                drift: 0.0
            }
        );
        // A longer answer than the reference: compared over the reference.
        assert!(matches!(
            compare(&short, &reference, false, 1.0),
            Verdict::Match { compared: 1, .. }
        ));
    }

    #[test]
    fn drift_is_the_largest_difference_over_the_agreed_prefix() {
        let reference = [
            position(" a", -0.10, -6.0),
            position(" b", -0.20, -6.0),
            position(" c", -0.3, -0.31),
        ];
        let answer = [
            position(" a", -0.13, -6.0),
            position(" b", -0.21, -6.0),
            position(" d", -0.3, -0.31),
        ];
        let verdict = compare(&reference, &answer, false, 1.0);
        assert!(matches!(verdict, Verdict::Match { compared: 2, .. }));
        assert!((verdict.drift() - 0.03).abs() < 1e-12);
    }

    fn opaque(logprob: f64, runner_up: f64) -> Position {
        Position {
            token: Token::new("", Some(Vec::new())),
            logprob: Some(logprob),
            top: vec![
                (Token::new("", Some(Vec::new())), logprob),
                (Token::new(" other", None), runner_up),
            ],
        }
    }

    /// vLLM spells every token that is part of a character as `""` without bytes. Two
    /// such tokens may differ; before, they compared equal, so a near-tie flip between two
    /// of them went unnoticed and the sure positions after it (now on different prefixes)
    /// were reported as a divergence: a false alarm on a healthy replica.
    #[test]
    fn tokens_spelled_without_identity_end_the_comparison() {
        let reference = [
            position(" a", -0.01, -6.0),
            opaque(-0.01, -6.0),
            position(" b", -0.01, -6.0),
        ];
        let answer = [
            position(" a", -0.01, -6.0),
            opaque(-0.01, -6.0),
            position(" c", -0.01, -6.0),
        ];
        assert_eq!(
            compare(&reference, &answer, false, 1.0),
            Verdict::Match {
                compared: 1,
                drift: 0.0
            }
        );
        // Against a token of whole text it is a different token: judged as usual.
        let whole = [position(" a", -0.01, -6.0), position(" x", -0.01, -6.0)];
        let Verdict::Diverged(d) = compare(&reference, &whole, false, 1.0) else {
            panic!("an opaque token is not a whole word");
        };
        assert_eq!(
            (d.position, d.expected.as_str(), d.received.as_str()),
            (1, "<part of a character>", " x")
        );
    }
}
