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
//!   put the received token at least `margin` nats below its own (it was sure that token is
//!   not the answer, and noise does not move a logprob that far): always so where it led
//!   its runner-up by `margin`, and also where it hesitated between two tokens and the
//!   answer is a third it held far less likely. Otherwise the received token was nearly as
//!   likely as the reference's, a flip noise can cause, and the comparison stops there with
//!   a match, since everything after it may legitimately differ. A token the reference did
//!   not list is bounded by the listed ones (they are the best) and by the probability mass
//!   they leave;
//! - an answer that ends early, where the reference was sure of one more token, diverges
//!   there too (unless it ended at its length limit); an answer that goes on where the
//!   reference stopped on its own diverges there if it was sure of going on (servers do
//!   not list the end token's logprob, so the answer's own margin is what tells).
//!
//! Example, margin 1.0: the reference is ` Paris` (−0.01; runner-up ` Lyon` −5.2) then
//! ` is` (−0.90; runner-up ` was` −0.92, then ` banana` −4.3). An answer ` Paris was …`
//! agrees at 0, differs at 1 where the reference held ` was` 0.02 nats below ` is`: a
//! match over one position. An answer ` Paris banana …` differs at 1 too, but the
//! reference held ` banana` 3.4 nats below: diverged at position 1. An answer ` Lyon …`
//! differs at 0, where the reference led by 5.19 nats: diverged at position 0, expected
//! ` Paris`, received ` Lyon`.
//!
//! This is the rule of vLLM's test helper `check_logprobs_close` (at the first mismatch
//! each side's token must be among the other's top-N, then stop), made one-sided and
//! quantitative.
//!
//! Positions where both answers agree are compared whatever their margin: an unsure
//! position that did not flip leaves both answers on the same prefix.
//!
//! A token spelled without its identity (vLLM gives a token that is one byte of a longer
//! character as `""` with no bytes) cannot be told from another such token: where both
//! answers have one, the comparison stops there with a match, as at a near-tie.

use crate::endpoint::canary::Reference;
use crate::logprobs::{Identity, Position, Token};

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
    /// How far, at least, the reference's own token led the received one there, in nats.
    pub lead: f64,
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

/// Compare `answer` with `reference` (both greedy answers to one prompt). `*_ended`: that
/// answer stopped on its own (EOS or a stop string), not at its length limit.
pub fn compare(
    reference: &[Position],
    answer: &[Position],
    reference_ended: bool,
    answer_ended: bool,
    margin: f64,
) -> Verdict {
    let mut drift: f64 = 0.0;
    for (i, expected) in reference.iter().enumerate() {
        let received = match answer.get(i) {
            Some(received) => received,
            None if answer_ended => {
                return judge(i, expected, None, margin, drift);
            }
            None => break,
        };
        match expected.token.identity(&received.token) {
            Identity::Same => {}
            Identity::Different => {
                return judge(i, expected, Some(&received.token), margin, drift);
            }
            // Both are parts of characters the server did not spell out: they may differ,
            // and everything after them with them, so nothing further can be judged.
            Identity::Unknown => return Verdict::Match { compared: i, drift },
        }
        if let (Some(a), Some(b)) = (expected.logprob, received.logprob) {
            drift = drift.max((a - b).abs());
        }
    }
    let compared = reference.len().min(answer.len());
    if let Some(received) = answer.get(reference.len()).filter(|_| reference_ended) {
        return judge_past_the_end(compared, received, margin, drift);
    }
    Verdict::Match { compared, drift }
}

/// The reference stopped where the answer went on. Servers do not list the end token's
/// logprob, so the answer's own certainty decides: a near-tie between stopping and going
/// on may fall either way, but an answer sure of going on (its token led its runner-up,
/// the end among them, by `margin`) where the reference stopped has lost its end of
/// sequence (a wrong chat template, a wrong EOS id).
fn judge_past_the_end(i: usize, received: &Position, margin: f64, drift: f64) -> Verdict {
    match received.margin() {
        Some(lead) if lead >= margin => Verdict::Diverged(Divergence {
            position: i,
            expected: "<end>".to_owned(),
            received: received.token.display(),
            lead,
            drift,
        }),
        _ => Verdict::Match { compared: i, drift },
    }
}

/// [`compare`] of two whole answers, each ended as its `finish_reason` says.
pub fn answers(reference: &Reference, answer: &Reference, margin: f64) -> Verdict {
    compare(
        &reference.positions,
        &answer.positions,
        reference.ended(),
        answer.ended(),
        margin,
    )
}

fn judge(
    i: usize,
    expected: &Position,
    received: Option<&Token>,
    margin: f64,
    drift: f64,
) -> Verdict {
    // An early end is judged by the runner-up: servers spell their end token differently
    // (or not at all) among the alternatives.
    let lead = match received {
        Some(token) => expected.lead_over(token),
        None => expected.margin(),
    };
    match lead {
        Some(lead) if lead >= margin => Verdict::Diverged(Divergence {
            position: i,
            expected: expected.token.display(),
            received: received.map_or_else(|| "<end>".to_owned(), Token::display),
            lead,
            drift,
        }),
        // The reference held the received token nearly as likely as its own (or did not
        // say): a flip noise can cause.
        _ => Verdict::Match { compared: i, drift },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn listed(text: &str, logprob: f64, alternatives: &[(&str, f64)]) -> Position {
        let mut top = vec![(Token::new(text, None), logprob)];
        top.extend(
            alternatives
                .iter()
                .map(|&(t, lp)| (Token::new(t, None), lp)),
        );
        Position {
            token: Token::new(text, None),
            logprob: Some(logprob),
            top,
        }
    }

    #[test]
    fn the_documented_example() {
        let reference = [
            listed(" Paris", -0.01, &[(" Lyon", -5.2)]),
            listed(" is", -0.90, &[(" was", -0.92), (" banana", -4.3)]),
        ];
        let flip = [
            position(" Paris", -0.011, -5.2),
            position(" was", -0.91, -0.92),
        ];
        let verdict = compare(&reference, &flip, false, false, 1.0);
        assert!(
            matches!(verdict, Verdict::Match { compared: 1, .. }),
            "{verdict:?}"
        );
        assert!((verdict.drift() - 0.001).abs() < 1e-12);
        let third = [
            position(" Paris", -0.01, -5.2),
            position(" banana", -0.2, -3.0),
        ];
        let Verdict::Diverged(d) = compare(&reference, &third, false, false, 1.0) else {
            panic!("a token the reference held far below its own is a divergence");
        };
        assert_eq!((d.position, d.received.as_str()), (1, " banana"));
        assert!((d.lead - 3.4).abs() < 1e-9, "{}", d.lead);
        let wrong = [position(" Lyon", -0.01, -5.2)];
        let Verdict::Diverged(d) = compare(&reference, &wrong, false, false, 1.0) else {
            panic!("a confident difference is a divergence");
        };
        assert_eq!(
            (d.position, d.expected.as_str(), d.received.as_str()),
            (0, " Paris", " Lyon")
        );
        assert!((d.lead - 5.19).abs() < 1e-9);
    }

    /// A token the reference did not list had no more than the least listed one, nor more
    /// than the mass the listed ones leave; with a short list nothing bounds it, and an
    /// unsure reference then stops the comparison as before.
    #[test]
    fn an_unlisted_token_is_bounded_by_the_list() {
        let unsure = [listed(" is", -0.9, &[(" was", -0.92), (" the", -3.0)])];
        let answer = [position(" zebra", -0.1, -4.0)];
        let Verdict::Diverged(d) = compare(&unsure, &answer, false, false, 1.0) else {
            panic!("a token below the least listed one is far below the reference's");
        };
        assert!((d.lead - 2.1).abs() < 1e-9, "{}", d.lead);
        // Listed mass 0.94: an unlisted token had at most 0.06, however short the list.
        let mass_bound = -0.6 - (1.0f64 - (-0.6f64).exp() - (-0.95f64).exp()).ln();
        let two = [listed(" is", -0.6, &[(" was", -0.95)])];
        let Verdict::Diverged(d) = compare(&two, &answer, false, false, 1.0) else {
            panic!("{:?}", compare(&two, &answer, false, false, 1.0));
        };
        assert!((d.lead - mass_bound).abs() < 1e-9, "{}", d.lead);
        // Two listed tokens of 22% each leave 56% unaccounted for: a third may have been as
        // likely as either, so no verdict.
        let torn = [listed(" is", -1.5, &[(" was", -1.52)])];
        assert!(matches!(
            compare(&torn, &answer, false, false, 1.0),
            Verdict::Match { compared: 0, .. }
        ));
    }

    #[test]
    fn agreement_past_a_near_tie_is_still_compared() {
        let reference = [position(" a", -0.69, -0.70), position(" b", -0.01, -6.0)];
        let answer = [position(" a", -0.70, -0.69), position(" c", -0.01, -6.0)];
        assert!(
            matches!(compare(&reference, &answer, false, false, 1.0), Verdict::Diverged(d) if d.position == 1)
        );
    }

    #[test]
    fn an_early_end_diverges_only_where_the_reference_was_sure_and_not_at_the_limit() {
        let reference = [position(" a", -0.01, -6.0), position(" b", -0.01, -6.0)];
        let short = [position(" a", -0.01, -6.0)];
        assert!(
            matches!(compare(&reference, &short, false, true, 1.0), Verdict::Diverged(d) if d.received == "<end>")
        );
        assert_eq!(
            compare(&reference, &short, false, false, 1.0),
            Verdict::Match {
                compared: 1,
                drift: 0.0
            }
        );
        // A longer answer than the reference: compared over the reference.
        assert!(matches!(
            compare(&short, &reference, false, false, 1.0),
            Verdict::Match { compared: 1, .. }
        ));
    }

    /// A replica that no longer stops (a wrong chat template or EOS id) goes on, sure of
    /// its tokens, where the reference ended: before, the walk over the reference's tokens
    /// found nothing and called it a match.
    #[test]
    fn an_answer_sure_of_going_on_where_the_reference_stopped_diverges() {
        let reference = [position(" Paris", -0.01, -6.0), position(".", -0.01, -6.0)];
        let runaway = [
            position(" Paris", -0.01, -6.0),
            position(".", -0.01, -6.0),
            position("<|eot_id|>", -0.02, -5.0),
        ];
        let Verdict::Diverged(d) = compare(&reference, &runaway, true, false, 1.0) else {
            panic!("{:?}", compare(&reference, &runaway, true, false, 1.0));
        };
        assert_eq!(
            (d.position, d.expected.as_str(), d.received.as_str()),
            (2, "<end>", "<|eot_id|>")
        );
        // Torn between stopping and going on: a flip noise can cause.
        let torn = [
            position(" Paris", -0.01, -6.0),
            position(".", -0.01, -6.0),
            position(" It", -0.70, -0.71),
        ];
        assert!(matches!(
            compare(&reference, &torn, true, false, 1.0),
            Verdict::Match { compared: 2, .. }
        ));
        // A reference cut at its length limit says nothing of what came next.
        assert!(matches!(
            compare(&reference, &runaway, false, false, 1.0),
            Verdict::Match { compared: 2, .. }
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
            position(" other", -0.3, -0.31),
        ];
        let verdict = compare(&reference, &answer, false, false, 1.0);
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
            compare(&reference, &answer, false, false, 1.0),
            Verdict::Match {
                compared: 1,
                drift: 0.0
            }
        );
        // Against a token of whole text it is a different token: judged as usual.
        let whole = [position(" a", -0.01, -6.0), position(" x", -0.01, -6.0)];
        let Verdict::Diverged(d) = compare(&reference, &whole, false, false, 1.0) else {
            panic!("an opaque token is not a whole word");
        };
        assert_eq!(
            (d.position, d.expected.as_str(), d.received.as_str()),
            (1, "<part of a character>", " x")
        );
    }
}
