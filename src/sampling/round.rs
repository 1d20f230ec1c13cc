//! One round of the sampler check: its request(s), the judgement of every sampled token
//! or of the answers' diversity, and what is counted and said.

use std::sync::Arc;

use opentelemetry::KeyValue;
use rand::RngExt;
use tokio_util::sync::CancellationToken;

use super::support::{self, Params, Support};
use super::twin::{self, Answered, DIVERSE_MIN_CHARS, Step, answer_text};
use super::{Calibration, State};
use crate::endpoint::sampling::{SamplingSpec, Server};
use crate::logprobs::Unreadable;
use crate::metrics::SamplerSeries;
use crate::otlp::CheckTrace;
use crate::probe::{Outcome, ProbeReport, Prober};
use crate::prompt::sampled::Sampled;
use crate::prompt::{Prompt, synthetic};

/// What a round asks.
pub(super) struct Asked<'a> {
    pub spec: &'a SamplingSpec,
    pub settings: Params,
    pub server: Server,
    /// A seeded pair after the round (the reproducibility report).
    pub seeded: bool,
}

/// A prompt whose next token has many plausible values on any model.
pub fn prompt_text(nonce: u64) -> String {
    format!(
        "{} Write a long list of random words, unrelated to each other, separated by spaces, as varied as you can. Do not explain. Begin:",
        synthetic::nonce(nonce)
    )
}

pub(super) async fn run(
    prober: &Prober,
    asked: Asked<'_>,
    (state, series): (&State, &Arc<SamplerSeries>),
    abort: &CancellationToken,
    mut trace: CheckTrace,
) -> Option<bool> {
    let target = &prober.target;
    let nonce: u64 = rand::random();
    let semantics = asked.server.semantics();
    let (params, top_logprobs, requests) = match semantics {
        Some(_) => (asked.settings, asked.spec.top_logprobs, 1),
        None => (
            Params {
                temperature: 1.0,
                top_k: 0,
                top_p: 1.0,
                min_p: 0.0,
            },
            0,
            asked.spec.samples,
        ),
    };
    let text = prompt_text(nonce);
    let prompt = Prompt {
        input_tokens: text.split_whitespace().count() as u32,
        text,
        input_exact: false,
        max_tokens: asked.spec.max_tokens,
        model: target.model.clone(),
        media: Ok(Vec::new()),
        greedy: None,
        sampled: Some(Sampled {
            params,
            top_logprobs,
            server: asked.server,
            seed: None,
        }),
        structure: None,
        cache_breakpoint: None,
        conversation: None,
        extra: None,
    };
    let mut answers = Vec::with_capacity(requests as usize);
    let mut last_id = String::new();
    // A server started with a fixed seed (llama-server's `--seed`) draws each answer alike
    // unless a request says otherwise: where the API takes one, each answer its own seed.
    let takes_seeds = matches!(
        target.backend,
        crate::endpoint::BackendKind::OpenAi | crate::endpoint::BackendKind::OpenAiChat
    );
    let seeds = semantics.is_none() && takes_seeds;
    for i in 0..requests {
        let request_id = format!("{}sampler-{nonce:016x}-{i}", target.request_id_prefix);
        let mut prompt = prompt.clone();
        if let Some(sampled) = prompt.sampled.as_mut().filter(|_| seeds) {
            sampled.seed = Some(rand::random::<u32>().into());
        }
        let report = prober
            .probe_traced(&request_id, &prompt, abort, trace.next())
            .await;
        trace.sent(target, &request_id, &report, Vec::new());
        match report.outcome {
            Outcome::Finished(Ok(_)) => answers.push(report),
            Outcome::Finished(Err(e)) => {
                let category = e.category().as_str();
                tracing::debug!(target = %target.id, request_id, error = %e, "sampler check failed");
                series.round(category);
                state.status.sampler_round(crate::status::SamplerRound {
                    request_id: request_id.clone(),
                    setting: params,
                    server: asked.server.as_str(),
                    result: category,
                });
                trace.finish(category, Some(e.to_string()));
                return Some(false);
            }
            Outcome::Cut => return None,
        }
        last_id = request_id;
    }
    let result = match semantics {
        Some(semantics) => {
            // vLLM lists every one asked for (a dropped token as -9999), but its
            // completions key them by text, so tokens spelled alike (parts of a
            // character) fold into one: a shorter list is missing some.
            let full = matches!(asked.server, Server::Vllm | Server::VllmProcessed)
                .then_some(asked.spec.top_logprobs as usize);
            let (judged, steps) = judge(
                &answers[0],
                (&params, semantics, full),
                (state, series),
                (&last_id, target.id.as_str()),
            );
            let text = answer_text(&answers[0]);
            let first = Answered {
                text: &text,
                steps: &steps,
            };
            // A request that allows one token is answered alike by any sampler.
            let one_token = params.top_k == 1 || params.temperature <= 0.0;
            match judged {
                "outside_support" | "invalid_logprobs" => judged,
                _ if one_token => judged,
                _ => match twin::twin(prober, &prompt, first, takes_seeds, abort, &mut trace)
                    .await?
                {
                    Some(repeated) => repeated,
                    None => judged,
                },
            }
        }
        None => diverse(&answers, (&last_id, target.id.as_str())),
    };
    series.round(result);
    state.status.sampler_round(crate::status::SamplerRound {
        request_id: last_id.clone(),
        setting: params,
        server: asked.server.as_str(),
        result,
    });
    trace.set(KeyValue::new(
        "inferprobe.sampler.server",
        asked.server.as_str(),
    ));
    if asked.seeded {
        let reproduced = seeded_pair(prober, &prompt, series, abort, &mut trace).await;
        trace.set(KeyValue::new("inferprobe.sampler.seed", reproduced));
    }
    trace.finish(result, None);
    Some(true)
}

/// The round's request twice more with one seed, its answers compared: `reproduced`,
/// `differed`, or `failed` (a request failed or was cut). Reported, never paged on: vLLM
/// reproduces a seeded request only under batch invariance, hosted APIs promise "best
/// effort".
async fn seeded_pair(
    prober: &Prober,
    prompt: &Prompt,
    series: &SamplerSeries,
    abort: &CancellationToken,
    trace: &mut CheckTrace,
) -> &'static str {
    let target = &prober.target;
    let nonce: u64 = rand::random();
    let mut prompt = prompt.clone();
    prompt.text = prompt_text(nonce);
    if let Some(sampled) = &mut prompt.sampled {
        sampled.seed = Some(rand::random::<u32>().into());
        sampled.top_logprobs = 0;
    }
    let mut texts = Vec::with_capacity(2);
    for i in 0..2 {
        let request_id = format!("{}sampler-seed-{nonce:016x}-{i}", target.request_id_prefix);
        let report = prober
            .probe_traced(&request_id, &prompt, abort, trace.next())
            .await;
        trace.sent(target, &request_id, &report, Vec::new());
        match report.outcome {
            Outcome::Finished(Ok(_)) => texts.push(report.record.response.text),
            Outcome::Finished(Err(_)) | Outcome::Cut => {
                series.seed("failed");
                return "failed";
            }
        }
    }
    let result = if texts[0] == texts[1] {
        "reproduced"
    } else {
        tracing::debug!(target = %target.id, "sampler check: a seeded request answered differently the second time");
        "differed"
    };
    series.seed(result);
    result
}

/// Judge every sampled token of one answer; its PITs go to the window.
fn judge(
    report: &ProbeReport,
    (params, semantics, full): (&Params, support::Semantics, Option<usize>),
    (state, series): (&State, &SamplerSeries),
    (request_id, target): (&str, &str),
) -> (&'static str, Vec<Step>) {
    let Some(logprobs) = &report.record.response.logprobs else {
        return ("unscored", Vec::new());
    };
    match &logprobs.unreadable {
        Some(Unreadable::Impossible(why)) => {
            tracing::warn!(target, request_id, error = %why,
                "sampler check: a logprob no distribution has (above 0, or not a number): the server's logprobs are wrong");
            return ("invalid_logprobs", Vec::new());
        }
        Some(why) => {
            tracing::warn!(target, request_id, error = %why, "sampler check: the logprobs are unreadable");
            return ("unscored", Vec::new());
        }
        None => {}
    }
    let semantics = match semantics {
        support::Semantics::Raw => {
            let mut listing = state.listing.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(shown) = support::listing_shown(&logprobs.positions, params) {
                // Processed wins for good: a raw list never names a token of no chance.
                if *listing != Some(support::Semantics::Processed) {
                    *listing = Some(shown);
                }
            }
            *listing
        }
        processed => Some(processed),
    };
    let (mut ok, mut outside, mut unscored) = (0u64, 0u64, 0u64);
    let mut pits = Vec::with_capacity(logprobs.positions.len());
    let mut steps = Vec::with_capacity(logprobs.positions.len());
    let mut rng = rand::rng();
    for (at, position) in logprobs.positions.iter().enumerate() {
        // Until the server's lists have shown they are raw (a token the request drops,
        // listed with a logprob), they may be processed ones, which read as raw would
        // apply temperature and truncation twice: a token is outside only if it is under
        // both readings, and no PIT is made.
        let mut judged = match semantics {
            Some(semantics) => support::judge(position, params, semantics),
            None => {
                let raw = support::judge(position, params, support::Semantics::Raw);
                let processed = support::judge(position, params, support::Semantics::Processed);
                let both = raw.support == Support::Outside && processed.support == Support::Outside;
                support::Judged {
                    support: if both {
                        Support::Outside
                    } else {
                        raw.support.min_inside()
                    },
                    pit: None,
                }
            }
        };
        if full.is_some_and(|n| position.top.len() < n) {
            // Tokens missing from the list: what is kept is bounded still, not known.
            judged.pit = None;
        }
        match judged.support {
            Support::Inside => ok += 1,
            Support::Unknown => unscored += 1,
            Support::Outside => {
                outside += 1;
                tracing::warn!(
                    target, request_id, position = at, token = %position.token.display(),
                    logprob = position.logprob.unwrap_or(f64::NAN),
                    temperature = params.temperature, top_k = params.top_k, top_p = params.top_p, min_p = params.min_p,
                    "sampler check: a token no correct sampler draws (outside the support the request allows)"
                );
            }
        }
        if let Some((below, own)) = judged.pit {
            pits.push(below + rng.random::<f64>() * own);
        }
        let single = position
            .top
            .iter()
            .filter(|&&(_, lp)| lp > support::IMPOSSIBLE)
            .count()
            == 1;
        steps.push(Step {
            bytes: (!position.token.is_opaque()).then(|| position.token.key().len()),
            ln_own: judged
                .pit
                .filter(|_| !single)
                .map(|(_, own)| own.max(f64::MIN_POSITIVE).ln()),
            lone: single && !params.may_keep_one(),
            single,
        });
    }
    series.tokens("ok", ok);
    series.tokens("outside_support", outside);
    series.tokens("unscored", unscored);
    state
        .status
        .sampler_tokens(request_id, ok, outside, unscored);
    let mut calibration = state.window.lock().unwrap_or_else(|e| e.into_inner());
    let Calibration { window, in_row } = &mut *calibration;
    for u in pits {
        if let Some(tested) = window.push(u) {
            *in_row = if tested.miscalibrated { *in_row + 1 } else { 0 };
            series.window((tested.chi2, tested.p_value, tested.miscalibrated), *in_row);
            state
                .status
                .sampler_window(tested.chi2, tested.p_value, *in_row);
            if tested.miscalibrated {
                tracing::warn!(
                    target,
                    chi2 = tested.chi2,
                    p_value = tested.p_value,
                    in_row = *in_row,
                    "sampler check: the sampled tokens are miscalibrated against the distribution asked for (a wrong temperature, greedy decoding, a stuck random generator)"
                );
            }
        }
    }
    let result = match (outside, ok) {
        (1.., _) => "outside_support",
        (0, 0) => "unscored",
        _ => "ok",
    };
    (result, steps)
}

/// Answers to one prompt at temperature 1: all the same means sampling was ignored.
fn diverse(answers: &[ProbeReport], (request_id, target): (&str, &str)) -> &'static str {
    let texts: Vec<String> = answers.iter().map(answer_text).collect();
    let Some(first) = texts.first() else {
        return "unscored";
    };
    if texts.iter().any(|t| t.chars().count() < DIVERSE_MIN_CHARS) {
        return "unscored";
    }
    if texts.iter().all(|t| t == first) {
        tracing::warn!(target, request_id, answers = texts.len(), answer = %crate::error::snippet(first),
            "sampler check: every answer at temperature 1 is the same: the sampling settings were ignored");
        return "sampling_ignored";
    }
    "ok"
}
