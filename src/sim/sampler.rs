//! The simulator's sampler: how a request with `temperature > 0` that asks for random words
//! (the sampling check's prompt, docs/sampling.md) is answered. Each position has a
//! high-entropy distribution over a vocabulary larger than any top-20 list, drawn as vLLM
//! draws: temperature, then min-p, then top-k, then top-p, renormalized, and a token drawn
//! from what is left. Logprobs are reported raw (vLLM's default: before temperature and
//! truncation) or processed (llama.cpp's `post_sampling_probs`), as `--logprobs-mode`
//! says.
//!
//! The faults (`--sampler-fault`) are the ones real samplers have had: truncations
//! ignored, a temperature other than the one asked (applied ×2), greedy decoding forced,
//! a random generator stuck at one uniform draw, or at one noise vector for every step and
//! request (vLLM's exponential race, whose tokens each look well drawn), and a share of
//! tokens drawn from outside the nucleus (`--outside-rate`). Processed lists show what the faulty sampler
//! used, as a server's own would: a forced greedy lists one token.

use rand::{Rng, RngExt, SeedableRng};

use super::model::{hash, mix};

use super::model::ToyToken;

pub use super::model::{LogprobsMode, SamplerFault};

/// A sampled request's settings (0 and 1 for a truncation that is off).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    pub temperature: f64,
    pub top_k: u32,
    pub top_p: f64,
    pub min_p: f64,
    /// The request's seed: its draws are the seed's, so a seeded request is reproduced.
    pub seed: Option<u64>,
}

impl Eq for Sampling {}

/// The vocabulary sampled from: more tokens than any top-20 list shows.
const WORDS: usize = 96;

fn word(i: usize) -> String {
    const STEMS: &[&str] = &[
        " amber", " basil", " cedar", " delta", " ember", " fjord", " gale", " heron", " indigo",
        " juniper", " kelp", " lumen", " maple", " nectar", " onyx", " pebble",
    ];
    let stem = STEMS[i % STEMS.len()];
    match i / STEMS.len() {
        0 => stem.to_owned(),
        n => format!("{stem}{n}"),
    }
}

/// One position's raw logprobs over the vocabulary, best first: a slow decline (many
/// plausible next words), the least likely far below. A pure function of `position` (the
/// weights, the prompt and the prefix), as a model's are.
fn raw_logprobs(position: u64) -> Vec<(usize, f64)> {
    let rng = &mut rand::rngs::StdRng::seed_from_u64(position);
    let mut order: Vec<usize> = (0..WORDS).collect();
    for i in (1..WORDS).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let mut logit: f64 = 0.0;
    let mut out: Vec<(usize, f64)> = Vec::with_capacity(WORDS);
    for &token in &order {
        out.push((token, logit));
        logit -= rng.random_range(0.02..0.35);
    }
    let max = out[0].1;
    let lse = max + out.iter().map(|&(_, l)| (l - max).exp()).sum::<f64>().ln();
    out.iter_mut().for_each(|(_, l)| *l -= lse);
    out
}

/// The processed probabilities of `raw` (best first) under `s`, in vLLM's order; 0 for a
/// token the truncation drops.
pub fn processed(raw: &[f64], s: &Sampling) -> Vec<f64> {
    let t = s.temperature.max(1e-6);
    let best = raw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut keep: Vec<bool> = raw.iter().map(|_| true).collect();
    if s.min_p > 0.0 {
        let floor = best + t * s.min_p.ln();
        keep.iter_mut()
            .zip(raw)
            .for_each(|(k, &l)| *k &= l >= floor);
    }
    if s.top_k > 0 {
        keep.iter_mut()
            .enumerate()
            .for_each(|(i, k)| *k &= i < s.top_k as usize);
    }
    let weight = |i: usize| match keep[i] {
        true => ((raw[i] - best) / t).exp(),
        false => 0.0,
    };
    let mut w: Vec<f64> = (0..raw.len()).map(weight).collect();
    if s.top_p < 1.0 {
        let total: f64 = w.iter().sum();
        let mut above = 0.0;
        for x in &mut w {
            let mine = *x;
            if above / total >= s.top_p {
                *x = 0.0;
            }
            above += mine;
        }
    }
    let total: f64 = w.iter().sum();
    w.iter().map(|x| x / total).collect()
}

/// The index drawn from `probs` (best first) by inverse CDF at `u`.
fn inverse(probs: &[f64], u: f64) -> usize {
    let mut acc = 0.0;
    for (i, p) in probs.iter().enumerate() {
        acc += p;
        if u < acc && *p > 0.0 {
            return i;
        }
    }
    probs.iter().rposition(|p| *p > 0.0).unwrap_or(0)
}

impl super::model::ModelFlags {
    /// `n` sampled tokens with `top_k` alternatives each, as `--sampler-fault` and
    /// `--logprobs-mode` say.
    pub fn sample(
        &self,
        prompt: &str,
        s: &Sampling,
        n: usize,
        top_n: usize,
        rng: &mut impl Rng,
    ) -> Vec<ToyToken> {
        let mut prefix = mix(self.weights_seed ^ hash(0, prompt.as_bytes()));
        let mut seeded = s.seed.map(rand::rngs::StdRng::seed_from_u64);
        let rng: &mut dyn rand::Rng = match &mut seeded {
            Some(seeded) => seeded,
            None => rng,
        };
        let applied = match self.sampler_fault {
            SamplerFault::TopKIgnored => Sampling { top_k: 0, ..*s },
            SamplerFault::TopPIgnored => Sampling { top_p: 1.0, ..*s },
            SamplerFault::MinPIgnored => Sampling { min_p: 0.0, ..*s },
            SamplerFault::Temperature => Sampling {
                temperature: s.temperature * 2.0,
                ..*s
            },
            _ => *s,
        };
        // The stuck generator's noise: one exponential per vocabulary word, never redrawn.
        let stuck = &mut rand::rngs::StdRng::seed_from_u64(0x57);
        let noise: Vec<f64> = (0..WORDS)
            .map(|_| -(1.0 - stuck.random::<f64>()).ln())
            .collect();
        (0..n)
            .map(|_| {
                let ranked = raw_logprobs(prefix);
                let raw: Vec<f64> = ranked.iter().map(|&(_, l)| l).collect();
                let asked = processed(&raw, s);
                let mut drawn = processed(&raw, &applied);
                if self.sampler_fault == SamplerFault::Greedy {
                    drawn = (0..raw.len())
                        .map(|i| f64::from(u8::from(i == 0)))
                        .collect();
                }
                let pick = match self.sampler_fault {
                    SamplerFault::Greedy => 0,
                    SamplerFault::StuckRng => inverse(&drawn, 0.37),
                    // argmax p / q, q exponential: an exact draw were q fresh each step.
                    SamplerFault::StuckRace => (0..raw.len())
                        .filter(|&i| drawn[i] > 0.0)
                        .max_by(|&a, &b| {
                            let score = |i: usize| drawn[i] / noise[ranked[i].0];
                            score(a).total_cmp(&score(b))
                        })
                        .unwrap_or(0),
                    SamplerFault::OutsideNucleus if rng.random::<f64>() < self.outside_rate => {
                        // The most likely of the tokens the request does not allow.
                        asked.iter().position(|p| *p == 0.0).unwrap_or(0)
                    }
                    _ => inverse(&drawn, rng.random::<f64>()),
                };
                let (values, listed): (Vec<f64>, Vec<usize>) = match self.logprobs_mode {
                    LogprobsMode::Raw => (raw.clone(), (0..raw.len()).collect()),
                    LogprobsMode::Processed => {
                        let lp: Vec<f64> = drawn
                            .iter()
                            .map(|&p| if p > 0.0 { p.ln() } else { -9999.0 })
                            .collect();
                        let kept = (0..raw.len()).filter(|&i| drawn[i] > 0.0).collect();
                        (lp, kept)
                    }
                };
                // vLLM lists the sampled token and the N − 1 best others: a token drawn
                // below the top N takes the last place.
                let mut shown: Vec<usize> = listed.iter().copied().take(top_n).collect();
                if !shown.contains(&pick) && listed.contains(&pick) && !shown.is_empty() {
                    shown.pop();
                    shown.push(pick);
                }
                let top = shown
                    .iter()
                    .map(|&i| (word(ranked[i].0), values[i]))
                    .collect();
                let text = word(ranked[pick].0);
                prefix = hash(prefix, text.as_bytes());
                let logprob = match self.sampler_fault {
                    SamplerFault::InvalidLogprobs => 0.5,
                    _ => values[pick],
                };
                ToyToken { text, logprob, top }
            })
            .collect()
    }
}

/// Whether a prompt is the sampling check's: it asks for random words.
pub fn asks_for_random_words(prompt: &str) -> bool {
    prompt.contains("random words")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_correct_sampler_draws_in_proportion() {
        let raw = [-1.0, -1.5, -2.0, -2.5, -3.0];
        let s = Sampling {
            temperature: 0.5,
            top_k: 3,
            top_p: 1.0,
            min_p: 0.0,
            seed: None,
        };
        let p = processed(&raw, &s);
        assert_eq!(p[3], 0.0);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        // At temperature 0.5, 0.5 nats apart is e^-1 apart.
        assert!((p[1] / p[0] - (-1.0f64).exp()).abs() < 1e-12);
        // top-p 0.7 over e^0, e^-1, e^-2: the first holds 0.665, so the second stays.
        let p = processed(&raw, &Sampling { top_p: 0.7, ..s });
        assert!(p[1] > 0.0 && p[2] == 0.0, "{p:?}");
        let flags = super::super::model::ModelFlags::default();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let tokens = flags.sample("random words", &s, 200, 20, &mut rng);
        assert_eq!(tokens.len(), 200);
        assert!(tokens.iter().all(|t| t.top.len() == 20));
    }
}
