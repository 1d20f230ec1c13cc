//! A round's twin: the round's request asked again, shorter and without logprobs, its
//! answer compared with the round's. The faults whose every token looks well drawn (a
//! generator stuck for every request, greedy decoding behind a processed list that shows
//! one token) answer it alike, where the round's own probabilities say two draws rarely
//! are (docs/sampling.md, "The twin").

use tokio_util::sync::CancellationToken;

use crate::otlp::CheckTrace;
use crate::probe::{Outcome, ProbeReport, Prober};
use crate::prompt::Prompt;

/// Answers this short tell too little apart: a model may end at once every time.
pub const DIVERSE_MIN_CHARS: usize = 16;

/// What an answer says: its reasoning, then its text (a reasoning model samples both).
pub(super) fn answer_text(report: &ProbeReport) -> String {
    let r = &report.record.response;
    format!("{}{}", r.other_text, r.text)
}

/// Two draws agreeing less often than this, by the first one's own probabilities, agree
/// because the server did not draw.
const RARE: f64 = 1e-6;

/// What the judgement knows of one sampled token, for comparing its answer with another.
pub(super) struct Step {
    /// The token's bytes (where it ends in the answer); `None` for a token spelled
    /// without them (part of a character, as vLLM lists it: no text, no bytes).
    pub bytes: Option<usize>,
    /// The log of its probability in the distribution asked for, at most; `None` where
    /// not known, or where the list names it alone: a processed list cannot tell a
    /// sampler that truncated to one token from a model that left one.
    pub ln_own: Option<f64>,
    /// Its list names it alone where the request lets nothing truncate to one (top-k
    /// above 1, no top-p or min-p): a sampler that did not draw.
    pub lone: bool,
    /// Its list names it alone.
    pub single: bool,
}

/// The round's answer, as its twin is compared with it.
#[derive(Clone, Copy)]
pub(super) struct Answered<'a> {
    pub text: &'a str,
    pub steps: &'a [Step],
}

/// The round's request again, shorter and without logprobs (so no response cache answers
/// it with the first): a forced greedy decoding or a generator stuck for every request
/// (vLLM's exponential race with one noise vector) draws it alike, while each token of
/// either looks well drawn. Alike where the first answer's own probabilities make that
/// rarer than [`RARE`], or where the server's processed lists kept one token at every
/// step of a request that lets nothing truncate to one: `sampling_ignored`, unless a
/// third request with its own seed differs (`fixed_seed`: a server started with one seed
/// for every request, llama-server's `--seed`). Alike where the lists cannot say how
/// rare: `unscored` (a processed list of one token is a confident model or a truncation
/// to one). `None` (outer) when cut; `Some(None)` when the round's own result stands.
pub(super) async fn twin(
    prober: &Prober,
    prompt: &Prompt,
    first: Answered<'_>,
    takes_seeds: bool,
    abort: &CancellationToken,
    trace: &mut CheckTrace,
) -> Option<Option<&'static str>> {
    let target = &prober.target;
    let mut prompt = prompt.clone();
    // Past the first answer's leading tokens listed alone (a model sure of a preamble,
    // on a processed list): 16 that tell.
    let unknown = first.steps.iter().take_while(|s| s.single).count() as u32;
    prompt.max_tokens = (crate::endpoint::sampling::TWIN_TOKENS + unknown).min(prompt.max_tokens);
    if let Some(sampled) = &mut prompt.sampled {
        sampled.top_logprobs = 0;
    }
    let nonce: u64 = rand::random();
    let mut ask = async |prompt: &Prompt, which: &str| -> Option<Option<String>> {
        let request_id = format!("{}sampler-{which}-{nonce:016x}", target.request_id_prefix);
        let report = prober
            .probe_traced(&request_id, prompt, abort, trace.next())
            .await;
        trace.sent(target, &request_id, &report, Vec::new());
        match report.outcome {
            Outcome::Finished(Ok(_)) => Some(Some(answer_text(&report))),
            Outcome::Finished(Err(e)) => {
                tracing::debug!(target = %target.id, request_id, error = %e, "sampler check: the twin failed; the round is judged without it");
                Some(None)
            }
            Outcome::Cut => None,
        }
    };
    let Some(again) = ask(&prompt, "twin").await? else {
        return Some(None);
    };
    match repeat(first, &again) {
        Repeat::Differs | Repeat::Likely => return Some(None),
        Repeat::Unknown => return Some(Some("unscored")),
        Repeat::Rare => {}
    }
    if takes_seeds {
        if let Some(sampled) = &mut prompt.sampled {
            sampled.seed = Some(rand::random::<u32>().into());
        }
        // A seeded request that failed (an API refusing seeds) tells nothing against the
        // evidence: the repeat stands.
        let seeded = ask(&prompt, "twin-seeded").await?;
        if seeded.is_some_and(|seeded| repeat(first, &seeded) == Repeat::Differs) {
            tracing::info!(target = %target.id, "sampler check: unseeded requests draw alike and a seeded one does not: the server uses one seed for every request that names none");
            return Some(Some("fixed_seed"));
        }
    }
    tracing::warn!(target = %target.id, answer = %crate::error::snippet(&again),
        "sampler check: a sampled request asked twice drew the same answer, which its own probabilities make rare: greedy decoding forced or a stuck random generator");
    Some(Some("sampling_ignored"))
}

/// What a twin's answer tells.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Repeat {
    /// Not the same (or too short to tell).
    Differs,
    /// The same, where two draws rarely are: the server did not draw.
    Rare,
    /// The same, as the first answer's probabilities say two draws often are.
    Likely,
    /// The same, with no probability to tell how often two draws are.
    Unknown,
}

/// Whether `again` repeats the first answer, and how rarely two draws would.
fn repeat(first: Answered<'_>, again: &str) -> Repeat {
    let (short, long) = match first.text.len() <= again.len() {
        true => (first.text, again),
        false => (again, first.text),
    };
    if short.chars().count() < DIVERSE_MIN_CHARS || !long.starts_with(short) {
        return Repeat::Differs;
    }
    // The first answer's tokens within the common part.
    let (mut end, mut ln_p, mut unknown, mut lone, mut n) = (0, 0.0, false, true, 0);
    for step in first.steps {
        let Some(bytes) = step.bytes else {
            // Where the common part ends is no longer known: what follows may not be in it.
            unknown = true;
            break;
        };
        end += bytes;
        if end > short.len() {
            break;
        }
        match step.ln_own {
            Some(ln) => ln_p += ln,
            None => unknown = true,
        }
        lone &= step.lone;
        n += 1;
    }
    if n == 0 {
        Repeat::Unknown
    } else if ln_p < RARE.ln() || lone {
        Repeat::Rare
    } else if unknown {
        Repeat::Unknown
    } else {
        Repeat::Likely
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(words: &[(&str, Option<f64>, bool)]) -> (String, Vec<Step>) {
        let text = words.iter().map(|w| w.0).collect();
        let steps = words
            .iter()
            .map(|&(w, ln_own, lone)| Step {
                bytes: Some(w.len()),
                ln_own,
                lone,
                single: lone,
            })
            .collect();
        (text, steps)
    }

    #[test]
    fn a_repeat_is_judged_by_how_rarely_two_draws_agree() {
        let words = [" amber", " basil", " cedar", " delta", " ember", " fjord"];
        let at = |ln_own: Option<f64>, lone: bool| {
            let (text, steps) = steps(&words.map(|w| (w, ln_own, lone)));
            let first = Answered {
                text: &text,
                steps: &steps,
            };
            // The twin stopped after four words (its 16 tokens), the first went on.
            let again: String = words[..4].concat();
            (
                repeat(first, &again),
                repeat(first, " amber basil quartz delta"),
            )
        };
        // Four words at 1/100 each: 1e-8, rarer than two draws agree.
        assert_eq!(
            at(Some(0.01f64.ln()), false),
            (Repeat::Rare, Repeat::Differs)
        );
        // Four words at 0.9 each: a confident model answers alike.
        assert_eq!(at(Some(0.9f64.ln()), false).0, Repeat::Likely);
        // No probability known (a processed list of one token): cannot tell.
        assert_eq!(at(None, false).0, Repeat::Unknown);
        // One token listed where the request lets nothing cut to one: not drawn.
        assert_eq!(at(None, true).0, Repeat::Rare);
        // A token spelled without its bytes ends what is known of the common part: the
        // two sure words before it are all the product has.
        let (text, mut known) = steps(&words.map(|w| (w, Some(0.01f64.ln()), false)));
        known[0].ln_own = Some(0.0);
        known[1].ln_own = Some(0.0);
        known[2].bytes = None;
        let first = Answered {
            text: &text,
            steps: &known,
        };
        assert_eq!(repeat(first, &words[..4].concat()), Repeat::Unknown);
        known[0].ln_own = Some(-20.0);
        let first = Answered {
            text: &text,
            steps: &known,
        };
        assert_eq!(repeat(first, &words[..4].concat()), Repeat::Rare);
        // Too short to tell.
        let (text, steps) = self::steps(&[(" a", Some(-9.0), false), (" b", Some(-9.0), false)]);
        let first = Answered {
            text: &text,
            steps: &steps,
        };
        assert_eq!(repeat(first, " a b"), Repeat::Differs);
    }
}
