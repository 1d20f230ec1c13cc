//! One round of the adapter check on one replica: its plan ([`super::plan`]) asked, the
//! base model and the chosen adapters at once, each answer judged and counted.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;

use super::Sinks;
use super::fleet::Version;
use super::judge::{self, Verdict};
use super::listing::refused_as_unknown;
use super::plan::{Replica, Turn, plan};
use crate::canary::book::Member;
use crate::canary::compare::{self, Verdict as Compared};
use crate::endpoint::Target;
use crate::endpoint::adapters::{AdapterSpec, Recorded};
use crate::endpoint::canary::Reference;
use crate::error::ProbeError;
use crate::probe::{Outcome, Prober};
use crate::prompt::Prompt;
/// The recorded references, where they are this target's model's.
fn recorded<'a>(spec: &'a AdapterSpec, target: &Target) -> Option<&'a Recorded> {
    spec.golden.as_deref().filter(|g| g.model == target.model)
}
/// One answer: `Ok(None)` for a request cut by shutdown.
async fn ask(
    prober: &Prober,
    spec: &AdapterSpec,
    text: &str,
    (model, extra): (
        &str,
        Option<Arc<serde_json::Map<String, serde_json::Value>>>,
    ),
    abort: &CancellationToken,
) -> Result<Option<Reference>, ProbeError> {
    let request_id = format!(
        "{}adapter-{:016x}",
        prober.target.request_id_prefix,
        rand::random::<u64>()
    );
    let prompt = Prompt {
        extra,
        ..crate::canary::greedy_prompt(text, model, spec.max_tokens, spec.top_logprobs)
    };
    let report = prober
        .probe_sampled(&request_id, &prompt, abort, true)
        .await;
    match report.outcome {
        Outcome::Cut => Ok(None),
        Outcome::Finished(Err(e)) => Err(e),
        Outcome::Finished(Ok(_)) => Ok(crate::canary::answer(&report)),
    }
}

/// One round. `None`: cut by shutdown; else whether every request was answered.
pub(super) async fn run(
    prober: &Prober,
    spec: &AdapterSpec,
    state: &Mutex<Replica>,
    sinks: &Sinks,
    abort: &CancellationToken,
) -> Option<bool> {
    let plan = plan(prober, spec, state, sinks).await;
    let target = &prober.target;
    // vLLM names an adapter in `model`; llama-server takes a `lora` list of ids, in which
    // an adapter it does not list cannot be named at all (`missing` without asking).
    let select = |name: Option<&str>| match &plan.llama {
        None => Some((name.unwrap_or(&target.model).to_owned(), None)),
        Some(ids) => {
            let all: Vec<i64> = ids.values().copied().collect();
            let chosen = match name {
                None => None,
                Some(name) => Some(*ids.get(name)?),
            };
            Some((
                target.model.clone(),
                Some(super::llama::selection(&all, chosen)),
            ))
        }
    };
    let base_selection = select(None);
    let base_asked = async {
        match &base_selection {
            Some((model, extra)) => {
                ask(prober, spec, &plan.prompt, (model, extra.clone()), abort).await
            }
            None => Ok(None),
        }
    };
    let selections: Vec<_> = plan
        .chosen
        .iter()
        .map(|((name, _), turn)| match turn {
            Turn::Ask => select(Some(name)),
            Turn::Missing | Turn::Gone => None,
        })
        .collect();
    let asked = join_all(selections.iter().map(|selection| async {
        match selection {
            Some((model, extra)) => {
                Some(ask(prober, spec, &plan.prompt, (model, extra.clone()), abort).await)
            }
            None => None,
        }
    }));
    let (base, answers) = tokio::join!(base_asked, asked);
    let mut ok = true;
    // The base model first: its answer and reference are what the adapters' are told from.
    let (own_base, base_reference) = match base {
        Ok(None) => return None,
        Ok(Some(answer)) => {
            let answer = Arc::new(answer);
            let book = sinks.fleets.book(&sinks.family, None);
            let base_member = Arc::clone(&state.lock().unwrap_or_else(|e| e.into_inner()).base);
            let reference = match recorded(spec, target).and_then(|g| g.base.get(&plan.prompt)) {
                Some(golden) => Ok(Arc::clone(golden)),
                None => book.observe(&base_member, &plan.prompt, Arc::clone(&answer), spec.margin),
            };
            let result = match &reference {
                _ if answer.positions.is_empty() => "unscored",
                Ok(r) => match compare::answers(r, &answer, spec.margin) {
                    Compared::Match { .. } => "match",
                    Compared::Diverged(d) => {
                        tracing::warn!(target = %target.id, prompt = %crate::error::snippet(&plan.prompt),
                            position = d.position, expected = d.expected.as_str(), received = d.received.as_str(),
                            "adapter check: the base model's answer diverged from its reference on a replica serving adapters");
                        let detail = format!(
                            "position {}: expected {:?}, received {:?}",
                            d.position, d.expected, d.received
                        );
                        show(sinks, "", "diverged", &plan.prompt, detail);
                        "diverged"
                    }
                },
                Err(_) => "unscored",
            };
            sinks.series.base(result);
            (Some(answer), reference.ok())
        }
        Err(e) => {
            ok = false;
            tracing::debug!(target = %target.id, category = e.category().as_str(), "adapter check: the base model's request failed");
            sinks.series.base("failed");
            show(
                sinks,
                "",
                "failed",
                &plan.prompt,
                e.category().as_str().into(),
            );
            (None, None)
        }
    };
    for ((version, turn), answer) in plan.chosen.iter().zip(answers) {
        let name = &version.0;
        let Some(answer) = answer else {
            // Not asked (see `Turn`): lost here, or going everywhere.
            state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .tried(version, &plan.prompt, false);
            if *turn == Turn::Gone {
                continue;
            }
            ok = false;
            sinks.series.check(name, "missing");
            show(
                sinks,
                name,
                "missing",
                &plan.prompt,
                "not listed here".into(),
            );
            continue;
        };
        let result = match answer {
            Ok(None) => return None,
            Ok(Some(answer)) => {
                let member = state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .member(sinks, version);
                let (result, informative, detail) = judged(
                    spec,
                    sinks,
                    (version, &member),
                    &plan.prompt,
                    answer,
                    (own_base.as_deref(), base_reference.as_deref()),
                    target,
                );
                if let Some(yes) = informative {
                    let mut replica = state.lock().unwrap_or_else(|e| e.into_inner());
                    let key = (version.clone(), plan.prompt.clone());
                    replica.marks.insert(key, (yes, Instant::now()));
                }
                (result, detail)
            }
            Err(e) if refused_as_unknown(&e) => {
                ok = false;
                let listed = plan.listed_here.contains_key(name);
                tracing::warn!(target = %target.id, adapter = %name, listed_here = listed,
                    error = %crate::report::redact(&e.to_string(), target),
                    "adapter check: a request for the adapter was refused as an unknown model");
                let result = if listed { "not_found" } else { "missing" };
                (result, crate::report::redact(&e.to_string(), target))
            }
            Err(e) => {
                ok = false;
                tracing::debug!(target = %target.id, adapter = %name, category = e.category().as_str(), "adapter check: the adapter's request failed");
                ("failed", e.category().as_str().into())
            }
        };
        let (result, detail) = result;
        let judged = matches!(result, "applied" | "base_served" | "diverged");
        state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .tried(version, &plan.prompt, judged);
        sinks.series.check(name, result);
        show(sinks, name, result, &plan.prompt, detail);
    }
    // What every checked adapter's prompts tell here.
    let replica = state.lock().unwrap_or_else(|e| e.into_inner());
    for version in &plan.checked {
        let file = recorded(spec, target);
        let golden = file.and_then(|g| g.adapter(&version.0, &version.1));
        let other = file.is_some_and(|g| g.other_version(&version.0, &version.1));
        let (yes, no) = match golden {
            Some(g) => (
                g.answers.len(),
                spec.prompts.len().saturating_sub(g.answers.len()),
            ),
            None => replica.counts(version, &spec.prompts),
        };
        sinks.series.prompts(&version.0, yes, no);
        sinks.series.recorded(&version.0, golden.is_some(), other);
    }
    Some(ok)
}

/// A check on the status page.
fn show(sinks: &Sinks, adapter: &str, result: &'static str, prompt: &str, detail: String) {
    sinks.status.push_adapter(crate::status::AdapterCheck {
        at: std::time::SystemTime::now(),
        adapter: adapter.to_owned(),
        result,
        prompt: crate::error::snippet(prompt),
        detail,
    });
}

/// An adapter's answer judged and the prompt's worth recorded: the check's result.
fn judged(
    spec: &AdapterSpec,
    sinks: &Sinks,
    (version, member): (&Version, &Member),
    prompt: &str,
    answer: Reference,
    (own_base, base): (Option<&Reference>, Option<&Reference>),
    target: &Target,
) -> (&'static str, Option<bool>, String) {
    if answer.positions.is_empty() {
        // No logprobs: nothing to compare by the rule.
        return ("unscored", None, "the answer carried no logprobs".into());
    }
    let answer = Arc::new(answer);
    let verdict = match recorded(spec, target).and_then(|g| g.adapter(&version.0, &version.1)) {
        // Recorded on a trusted endpoint: a prompt it did not keep tells nothing.
        Some(golden) => match golden.answers.get(prompt) {
            Some(reference) => judge::judge(&answer, Some(reference), base, own_base, spec.margin),
            None => Verdict::Uninformative,
        },
        None => {
            let book = sinks.fleets.book(&sinks.family, Some(version));
            let reference = book
                .observe(member, prompt, Arc::clone(&answer), spec.margin)
                .ok();
            judge::judge(&answer, reference.as_deref(), base, own_base, spec.margin)
        }
    };
    let informative = match verdict {
        Verdict::Uninformative => Some(false),
        Verdict::Unscored(_) => None,
        _ => Some(true),
    };
    let name = &version.0;
    let snippet = crate::error::snippet(prompt);
    let detail = match &verdict {
        Verdict::BaseServed(d) | Verdict::Diverged(d) => format!(
            "position {}: expected {:?}, received {:?} (the reference led by {:.2} nats)",
            d.position, d.expected, d.received, d.lead
        ),
        Verdict::Uninformative => "the adapter's reference is the base model's here".into(),
        Verdict::Unscored(why) => (*why).into(),
        Verdict::Applied => String::new(),
    };
    let result = match verdict {
        Verdict::Applied => "applied",
        Verdict::BaseServed(d) => {
            tracing::warn!(target = %target.id, adapter = %name, prompt = %snippet, position = d.position,
                expected = d.expected.as_str(), received = d.received.as_str(),
                "adapter check: the adapter answered as the base model: it is not applied");
            "base_served"
        }
        Verdict::Diverged(d) => {
            tracing::warn!(target = %target.id, adapter = %name, prompt = %snippet, position = d.position,
                expected = d.expected.as_str(), received = d.received.as_str(),
                "adapter check: the adapter's answer diverged from its reference and from the base model's");
            "diverged"
        }
        Verdict::Uninformative => "unscored",
        Verdict::Unscored(why) => {
            tracing::debug!(target = %target.id, adapter = %name, why, "adapter check unscored");
            "unscored"
        }
    };
    (result, informative, detail)
}
