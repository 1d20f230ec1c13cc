//! One sampled token judged against the distribution its request asked for
//! (docs/sampling.md, "The support check" and "Calibration"): whether a correct sampler
//! could have drawn it at all, and, where the processed distribution is known exactly, its
//! randomized probability integral transform (PIT).
//!
//! Two readings of what a server lists:
//! - **raw** (vLLM's default `logprobs_mode = raw_logprobs`): log-softmax of the model's
//!   logits before temperature and truncation. The processed distribution is rebuilt here
//!   in vLLM's order: temperature, then min-p (relative to the likeliest token), then
//!   top-k, then top-p over what is left, renormalized. Exact when what the truncation
//!   keeps lies within the listed top-N; otherwise bounded by the mass the list leaves.
//! - **processed** (llama.cpp's `post_sampling_probs`): the listed values are the
//!   distribution the sampler drew from; a kept token has a probability above 0.
//!
//! Nothing here compares tokens by spelling: every rule reads logprob values, so a token
//! spelled opaquely (part of a character) is judged like any other. Values are compared
//! with a tolerance that covers float32 and bfloat16 rounding, and a boundary closer than
//! the tolerance is a tie, which a correct sampler may break either way: never outside.

use crate::logprobs::Position;

pub use crate::prompt::sampled::{Params, Semantics};

/// Whether the sampled token could have been drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    Inside,
    /// Outside the set the request allows: no correct sampler draws it.
    Outside,
    /// The list does not say (no logprob for the token, a truncation whose boundary lies
    /// beyond what is listed).
    Unknown,
}

impl Support {
    /// Outside read as inside (a verdict one reading alone cannot make).
    pub fn min_inside(self) -> Self {
        match self {
            Self::Outside => Self::Inside,
            other => other,
        }
    }
}

/// One position's judgement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Judged {
    pub support: Support,
    /// The processed probability of the tokens ordered before the sampled one (by
    /// probability, highest first) and of the sampled token's own value: the PIT is
    /// `below + v · own` for `v` uniform. `None` where the distribution is not known
    /// exactly.
    pub pit: Option<(f64, f64)>,
}

impl Judged {
    const UNKNOWN: Judged = Judged {
        support: Support::Unknown,
        pit: None,
    };
}

/// What a round's lists show of a server said to list raw logprobs: `Processed` when one
/// names a token of no chance (vLLM's -9999 for a token the truncation dropped), `Raw`
/// when one lists, with a logprob, a token the request's top-k or min-p drops (more than
/// top-k and a tie, or clearly below the min-p cut), `None` when they cannot tell.
pub fn listing_shown(positions: &[Position], p: &Params) -> Option<Semantics> {
    let mut raw = false;
    for position in positions {
        let values: Vec<f64> = position.top.iter().map(|&(_, lp)| lp).collect();
        if values.iter().any(|&lp| lp <= IMPOSSIBLE) {
            return Some(Semantics::Processed);
        }
        let finite: Vec<f64> = values.into_iter().filter(|lp| lp.is_finite()).collect();
        let Some(best) = finite.iter().copied().reduce(f64::max) else {
            continue;
        };
        raw |= p.top_k > 0 && finite.len() > p.top_k as usize + 1;
        if p.min_p > 0.0 {
            let cut = best + p.temperature * p.min_p.ln();
            raw |= finite.iter().any(|&lp| lp < cut - 2.0 * tolerance(cut));
        }
    }
    raw.then_some(Semantics::Raw)
}

/// A logprob's rounding: float32 serialisation, or bfloat16 logits (8 bits of mantissa:
/// 0.4% of the value).
fn tolerance(logprob: f64) -> f64 {
    0.005 + 0.004 * logprob.abs()
}

/// How close a cumulative probability may come to `top_p` and still be a tie (float32
/// cumulative sums, and the logprobs' own rounding carried into them).
const MASS_TOLERANCE: f64 = 2e-3;

/// Values below this are no probability: vLLM sends -9999 for a token of no chance.
pub(super) const IMPOSSIBLE: f64 = -1e3;

/// The largest vocabulary a model is assumed to have, where the unlisted mass must be
/// bounded at a temperature above 1 (Gemma's is 262,144).
pub const VOCAB_BOUND: f64 = 1_048_576.0;

/// Judge the sampled token at `position`, asked with `params`, listed as `semantics`.
pub fn judge(position: &Position, params: &Params, semantics: Semantics) -> Judged {
    let Some(own) = position.logprob.filter(|lp| lp.is_finite()) else {
        return Judged::UNKNOWN;
    };
    let listed: Vec<f64> = position
        .top
        .iter()
        .map(|&(_, lp)| lp)
        .filter(|lp| lp.is_finite() && *lp > IMPOSSIBLE)
        .collect();
    if listed.is_empty() {
        return Judged::UNKNOWN;
    }
    // A raw distribution lists no token of no chance among its best: a list that does
    // (vLLM's -9999 for a token the truncation dropped) is the processed one, whatever the
    // server was said to send (vLLM started with `--logprobs-mode processed_logprobs`).
    let dropped_listed = position.top.iter().any(|&(_, lp)| lp <= IMPOSSIBLE);
    match semantics {
        Semantics::Raw if !dropped_listed => raw(own, &listed, params),
        Semantics::Raw | Semantics::Processed => processed(own, &listed, params),
    }
}

/// The listed values are the sampler's own distribution: a token it kept has a
/// probability above 0, and the list is the whole distribution when it sums to 1. Its
/// order is the raw one (every transform is monotone), so top-k is checked on it too: a
/// sampled token clearly below the k-th listed was not among the k. So is min-p, whose
/// ratio to the best token renormalizing keeps: vLLM applies it after temperature,
/// llama.cpp before (the ratio then shows raised to 1 / T), and a token is outside only
/// below both floors. Top-p is not: a nucleus cut again cuts deeper, so an ignored top-p
/// cannot be seen on a processed list (nor a wrong temperature: the list shows the one
/// applied).
fn processed(own: f64, listed: &[f64], p: &Params) -> Judged {
    let outside = Judged {
        support: Support::Outside,
        pit: None,
    };
    if own <= IMPOSSIBLE {
        return outside;
    }
    if let Some(&kth) = (p.top_k > 0)
        .then(|| listed.get(p.top_k as usize - 1))
        .flatten()
    {
        if own < kth - tolerance(kth) {
            return outside;
        }
    }
    if p.min_p > 0.0 {
        let best = listed.iter().copied().fold(own, f64::max);
        let floor = best + p.min_p.ln().min(p.min_p.ln() / p.temperature.max(1e-6));
        if own < floor - tolerance(floor) {
            return outside;
        }
    }
    let total: f64 = listed.iter().map(|lp| lp.exp()).sum();
    let whole = (total - 1.0).abs() <= MASS_TOLERANCE * 5.0;
    let pit = whole
        .then(|| pit(own, listed, |lp| lp.exp() / total))
        .flatten();
    Judged {
        support: Support::Inside,
        pit,
    }
}

/// Rebuild the processed distribution from raw logprobs, in vLLM's order.
///
/// The sampled token's own entry is set apart from the list first: servers list the top N
/// (OpenAI, llama.cpp) or the sampled token and the top N − 1 others (vLLM's chat), and
/// either way every token not listed, other than the sampled one, is at most the least of
/// the others. Which of the two a list is cannot be told from it, so what is known is
/// decided from the list's length alone (the top `N − 1`), never from where the sampled
/// token fell: a PIT made only for some sampled tokens would not be uniform.
///
/// Top-p is judged both ways servers apply it: over what top-k left, renormalized (vLLM's
/// native and FlashInfer paths, llama.cpp), and over the whole mass intersected with top-k
/// (vLLM's ROCm aiter kernel, SGLang's FlashInfer path). A token is outside only if both
/// drop it, and a PIT is made only where both keep the same tokens.
fn raw(own: f64, listed: &[f64], p: &Params) -> Judged {
    let mut others = listed.to_vec();
    if let Some(i) = others.iter().position(|&lp| same_value(lp, own)) {
        others.remove(i);
    }
    let mut known = others.clone();
    known.push(own);
    known.sort_by(|a, b| b.total_cmp(a));
    let t = p.temperature;
    let best = known[0];
    // What no unlisted token exceeds (the sampled token's value when nothing else is listed).
    let least_other = others.last().copied().unwrap_or(own);
    let reach = listed.len().saturating_sub(1);
    let min_p = match p.min_p > 0.0 {
        true => best + t * p.min_p.ln(),
        false => f64::NEG_INFINITY,
    };
    let kth = (p.top_k > 0 && p.top_k as usize <= reach).then(|| known[p.top_k as usize - 1]);
    let threshold = kth.map_or(min_p, |k| k.max(min_p));
    if threshold.is_finite() && own < threshold - tolerance(threshold) {
        return Judged {
            support: Support::Outside,
            pit: None,
        };
    }
    let above_all = |cut: f64| {
        known
            .iter()
            .copied()
            .filter(move |&lp| lp >= cut - tolerance(cut))
    };
    let kept_known: Vec<f64> = above_all(threshold).collect();
    // Weights at temperature t, relative to the likeliest token.
    let w = |lp: f64| ((lp - best) / t).exp();
    // Unlisted tokens can be kept unless the cut is clearly above every one of them (a
    // tie with the k-th at the list's end is kept by vLLM, however many there are).
    let rest = |cut: f64| match cut > least_other + tolerance(least_other) {
        true => 0.0,
        false => unlisted_bound(&known, least_other, best, t),
    };
    let (seq_known, seq_rest): (f64, f64) =
        (kept_known.iter().map(|&lp| w(lp)).sum(), rest(threshold));
    let joint_known: f64 = above_all(min_p).map(w).sum();
    let joint_rest = rest(min_p);
    if p.top_p < 1.0 {
        // Kept iff the mass strictly above it is below top_p: the least that mass can
        // be is the known tokens clearly above it over the most the total can be.
        let above: f64 = kept_known
            .iter()
            .filter(|&&lp| lp > own + tolerance(own))
            .map(|&lp| w(lp))
            .sum();
        let most = (seq_known + seq_rest).max(joint_known + joint_rest);
        if above / most >= p.top_p + MASS_TOLERANCE {
            return Judged {
                support: Support::Outside,
                pit: None,
            };
        }
    }
    let inside = Judged {
        support: Support::Inside,
        pit: None,
    };
    // A value within the tolerance of the cut (besides the k-th itself, which is the cut)
    // may have been kept or not: the kept set is not known exactly.
    let near = known
        .iter()
        .filter(|&&lp| (lp - threshold).abs() < tolerance(threshold))
        .count();
    if threshold.is_finite() && near > usize::from(kth == Some(threshold)) {
        return inside;
    }
    // The kept set is exact where every reading keeps the same listed tokens and, where
    // unlisted tokens may weigh, the nucleus ends inside the list.
    let weights: Vec<f64> = kept_known.iter().map(|&lp| w(lp)).collect();
    let totals = [
        seq_known,
        seq_known + seq_rest,
        joint_known,
        joint_known + joint_rest,
    ];
    let Some(kept) = nucleus(&weights, p.top_p, totals[0]) else {
        return inside;
    };
    if totals[1..]
        .iter()
        .any(|&total| nucleus(&weights, p.top_p, total) != Some(kept))
    {
        return inside;
    }
    let unlisted_may_weigh = seq_rest > 0.0 || (p.top_p < 1.0 && joint_rest > 0.0);
    let ends_in_list = kept < weights.len() && kept_known[kept] >= least_other - 1e-9;
    if unlisted_may_weigh && !ends_in_list {
        return inside;
    }
    let allowed = &kept_known[..kept];
    let total: f64 = weights[..kept].iter().sum();
    Judged {
        support: Support::Inside,
        pit: pit(own, allowed, |lp| w(lp) / total),
    }
}

/// How many of `weights` (highest first) top-p keeps: each whose mass strictly above is
/// below `top_p`, out of `total`. `None` when a token's mass above is within the tolerance of `top_p`
/// (a correct sampler may keep it or not).
fn nucleus(weights: &[f64], top_p: f64, total: f64) -> Option<usize> {
    if top_p >= 1.0 {
        return Some(weights.len());
    }
    let mut above = 0.0;
    for (i, w) in weights.iter().enumerate() {
        let share = above / total;
        if (share - top_p).abs() < MASS_TOLERANCE {
            return None;
        }
        if share >= top_p {
            return Some(i);
        }
        above += w;
    }
    Some(weights.len())
}

/// The most the unlisted tokens can weigh at temperature `t` (relative to the likeliest
/// token): their raw mass is what the known values leave, and each is at most
/// `least_other`. No top-k bounds their count: tokens tied with the k-th are all kept.
fn unlisted_bound(known: &[f64], least_other: f64, best: f64, t: f64) -> f64 {
    let known_mass: f64 = known.iter().map(|lp| lp.exp()).sum();
    let rest = (1.0 - known_mass).max(0.0) + 1e-6;
    let (x_max, x_c) = (best.exp(), least_other.exp());
    let bound = if t <= 1.0 {
        // x^(1/t) ≤ x · x_c^(1/t − 1) for x ≤ x_c.
        (rest / x_c).min(VOCAB_BOUND) * (x_c / x_max).powf(1.0 / t)
    } else {
        // Concave: the most when spread evenly over as many tokens as can exist.
        VOCAB_BOUND * ((rest / VOCAB_BOUND).min(x_c) / x_max).powf(1.0 / t)
    };
    bound.max(0.0)
}

/// Values this close are one: the same float printed twice.
fn same_value(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 + 1e-6 * a.abs().max(b.abs())
}

/// The randomized PIT's pieces for a sampled value `own` among the `allowed` values
/// (highest first), each weighing `prob(lp)`. Tied values are one atom (a correct sampler
/// may order a tie either way), and atoms are ordered by value: the order is the
/// distribution's alone, so the PIT is uniform under a correct sampler. `None` when `own`
/// is none of the allowed values.
fn pit(own: f64, allowed: &[f64], prob: impl Fn(f64) -> f64) -> Option<(f64, f64)> {
    let mut below = 0.0;
    let mut atom = None;
    let mut i = 0;
    while i < allowed.len() {
        // An atom: a run of values each the same as the one before (single linkage).
        let mut j = i + 1;
        while j < allowed.len() && same_value(allowed[j - 1], allowed[j]) {
            j += 1;
        }
        let mass: f64 = allowed[i..j].iter().map(|&lp| prob(lp)).sum();
        if allowed[i..j].iter().any(|&lp| same_value(lp, own)) {
            atom = Some(mass);
            break;
        }
        below += mass;
        i = j;
    }
    let below = below.clamp(0.0, 1.0);
    atom.map(|mass| (below, mass.clamp(0.0, 1.0 - below)))
}

#[cfg(test)]
#[path = "support/tests.rs"]
mod tests;
