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

/// Whether two answers part where each was sure of its own token against the other's:
/// only then does an answer that follows one not also match the other. (Where one of
/// them was torn between the two tokens, an answer following the other would match it,
/// and a base model's answer would read `applied`.)
pub fn differ(a: &Reference, b: &Reference, margin: f64) -> bool {
    let diverged = |x, y| matches!(compare::answers(x, y, margin), Compared::Diverged(_));
    diverged(a, b) && diverged(b, a)
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
    let like_base = |base: &Reference| {
        matches!(
            compare::answers(base, answer, margin),
            Compared::Match { .. }
        )
    };
    let divergence = match compare::answers(adapter, answer, margin) {
        // Like both (a near-tie past the point where they part): nothing told.
        Compared::Match { .. } if like_base(base) => {
            return Verdict::Unscored("the answer is as like the base model's as the adapter's");
        }
        Compared::Match { .. } => return Verdict::Applied,
        Compared::Diverged(d) => d,
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

    /// Found on real vLLM: where the adapter's reference was torn between its token and
    /// the base's (0.005 nats) while the base was sure of its own (0.33), the base model's
    /// answer matched the adapter's reference and read `applied`.
    #[test]
    fn a_prompt_where_the_adapter_is_unsure_of_its_own_token_tells_nothing() {
        let at = |token: &str, lead: (&str, f64)| Position {
            token: Token::new(token, None),
            logprob: Some(-0.5),
            top: vec![
                (Token::new(token, None), -0.5),
                (Token::new(lead.0, None), -0.5 - lead.1),
            ],
        };
        let answer = |positions: Vec<Position>| Reference {
            text: String::new(),
            positions,
            finish_reason: Some("length".into()),
        };
        let adapter = answer(vec![at(" a", (" x", 2.0)), at(" b", (" q", 0.005))]);
        let base = answer(vec![at(" a", (" x", 2.0)), at(" q", (" b", 0.33))]);
        assert!(
            !differ(&adapter, &base, 0.05),
            "the adapter's was a near-tie"
        );
        assert_eq!(
            judge(&base, Some(&adapter), Some(&base), None, 0.05),
            Verdict::Uninformative
        );
        // Sure both ways, the same answers are told apart.
        let adapter = answer(vec![at(" a", (" x", 2.0)), at(" b", (" q", 0.2))]);
        assert!(differ(&adapter, &base, 0.05));
        assert!(matches!(
            judge(&base, Some(&adapter), Some(&base), None, 0.05),
            Verdict::BaseServed(_)
        ));
        assert_eq!(
            judge(&adapter, Some(&adapter), Some(&base), None, 0.05),
            Verdict::Applied
        );
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
