//! One adapter answer judged (docs/adapters.md, "The rule"): against the adapter's
//! reference and the base model's, by the canary's comparison
//! ([`crate::canary::compare`]). A prompt on which the two references agree tells
//! nothing about whether the adapter is applied and is not judged.

use crate::canary::compare::{self, Divergence, Verdict as Compared};
use crate::endpoint::canary::Reference;

#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The answer follows the adapter's reference.
    Applied,
    /// It does not, and follows the base model's: the adapter is not applied.
    BaseServed(Divergence),
    /// It follows neither.
    Diverged(Divergence),
    /// The adapter's reference is the base's on this prompt.
    Uninformative,
    Unscored(&'static str),
}

/// Whether two answers part where one of them was sure (either way round).
pub fn differ(a: &Reference, b: &Reference, margin: f64) -> bool {
    let diverged = |x, y| matches!(compare::answers(x, y, margin), Compared::Diverged(_));
    diverged(a, b) || diverged(b, a)
}

/// Judge `answer`, the adapter's, given its reference, the base model's reference, and
/// the base model's answer on the same replica this round (where the base's reference is
/// not known yet, or the base itself is broken here).
pub fn judge(
    answer: &Reference,
    adapter: Option<&Reference>,
    base: Option<&Reference>,
    own_base: Option<&Reference>,
    margin: f64,
) -> Verdict {
    let Some(adapter) = adapter else {
        return Verdict::Unscored("no reference for the adapter yet");
    };
    let Some(base) = base.or(own_base) else {
        return Verdict::Unscored("no base model answer to tell the adapter's from");
    };
    if !differ(adapter, base, margin) {
        return Verdict::Uninformative;
    }
    let divergence = match compare::answers(adapter, answer, margin) {
        Compared::Match { .. } => return Verdict::Applied,
        Compared::Diverged(d) => d,
    };
    let like_base = |base: &Reference| {
        matches!(
            compare::answers(base, answer, margin),
            Compared::Match { .. }
        )
    };
    if like_base(base) || own_base.is_some_and(like_base) {
        Verdict::BaseServed(divergence)
    } else {
        Verdict::Diverged(divergence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logprobs::{Position, Token};

    /// An answer of `words`, each held sure (2 nats over the runner-up " x").
    fn sure(words: &[&str]) -> Reference {
        let position = |w: &&str| Position {
            token: Token::new(w, None),
            logprob: Some(-0.1),
            top: vec![(Token::new(w, None), -0.1), (Token::new(" x", None), -2.1)],
        };
        Reference {
            text: words.concat(),
            positions: words.iter().map(position).collect(),
            finish_reason: Some("length".into()),
        }
    }

    #[test]
    fn an_answer_is_judged_by_which_reference_it_follows() {
        let adapter = sure(&[" a", " b", " c"]);
        let base = sure(&[" a", " q", " r"]);
        let j = |answer: &Reference| judge(answer, Some(&adapter), Some(&base), None, 1.0);
        assert_eq!(j(&adapter), Verdict::Applied);
        assert!(matches!(j(&base), Verdict::BaseServed(d) if d.position == 1));
        assert!(matches!(j(&sure(&[" z", " z", " z"])), Verdict::Diverged(d) if d.position == 0));
        // The base model broken here: an answer like this replica's own base answer is
        // still the base's.
        let broken_base = sure(&[" m", " n", " o"]);
        assert!(matches!(
            judge(
                &broken_base,
                Some(&adapter),
                Some(&base),
                Some(&broken_base),
                1.0
            ),
            Verdict::BaseServed(_)
        ));
    }

    #[test]
    fn a_prompt_where_adapter_and_base_agree_tells_nothing() {
        let same = sure(&[" a", " b"]);
        assert_eq!(
            judge(&same, Some(&same), Some(&same), None, 1.0),
            Verdict::Uninformative
        );
        assert_eq!(
            judge(&same, None, Some(&same), None, 1.0),
            Verdict::Unscored("no reference for the adapter yet")
        );
        assert!(matches!(
            judge(&same, Some(&same), None, None, 1.0),
            Verdict::Unscored(_)
        ));
    }
}
