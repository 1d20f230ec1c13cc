//! One round of the adapter check on one replica: what it lists, one prompt asked of the
//! base model and of the next adapters in turn, each answer judged and counted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;

use super::Sinks;
use super::fleet::Version;
use super::judge::{self, Verdict};
use crate::canary::book::Member;
use crate::canary::compare::{self, Verdict as Compared};
use crate::canary::lineage::Lineage;
use crate::endpoint::Target;
use crate::endpoint::adapters::{AdapterSpec, Recorded};
use crate::endpoint::canary::Reference;
use crate::error::ProbeError;
use crate::probe::{Outcome, Prober};
use crate::prompt::{Greedy, Prompt};

/// The recorded references, where they are this target's model's.
fn recorded<'a>(spec: &'a AdapterSpec, target: &Target) -> Option<&'a Recorded> {
    spec.golden.as_deref().filter(|g| g.model == target.model)
}

/// A listing of another replica counts this long at least (a replica that left).
const FRESH_AT_LEAST: Duration = Duration::from_secs(10);

/// What a replica's rounds carry from one to the next.
pub(super) struct Replica {
    id: String,
    created: Option<i64>,
    lineage: Option<Lineage>,
    base: Arc<Member>,
    members: HashMap<Version, Arc<Member>>,
    /// The next adapter's place in the checked list, and the next prompt.
    turn: usize,
    round: usize,
    /// What `/v1/models` listed last (name → path).
    here: BTreeMap<String, String>,
    /// Adapters this replica has listed since it was found: one it lists no more while
    /// another replica does was lost here (`missing`); one it never listed was placed
    /// elsewhere (a controller places adapters on some replicas) and is not asked here.
    seen: std::collections::HashSet<String>,
    /// Where this replica's listings are kept, to forget them when it goes.
    fleets: Arc<super::Fleets>,
    family: String,
    /// The adapters with series now, and how many were past the cap when last said.
    checked: Vec<String>,
    said_over: usize,
    /// llama-server's adapter ids by name, where it is one (`super::llama`).
    llama: Option<BTreeMap<String, i64>>,
}

impl Drop for Replica {
    /// A replica gone takes its listings with it: its adapters are not `missing` on the
    /// others for the minutes a stale listing would last.
    fn drop(&mut self) {
        self.fleets.forget(&self.family, &self.id);
    }
}

impl Replica {
    pub(super) fn new(target: &Target, sinks: &Sinks) -> Self {
        let lineage = Lineage::of(target);
        let base = sinks.fleets.book(&sinks.family, None);
        Self {
            id: target.id.clone(),
            created: target.created,
            base: Arc::new(base.join_at(&target.id, target.created, lineage.clone())),
            lineage,
            members: HashMap::new(),
            turn: 0,
            round: 0,
            here: BTreeMap::new(),
            seen: std::collections::HashSet::new(),
            fleets: Arc::clone(&sinks.fleets),
            family: sinks.family.clone(),
            checked: Vec::new(),
            said_over: 0,
            llama: None,
        }
    }

    fn member(&mut self, sinks: &Sinks, version: &Version) -> Arc<Member> {
        let (id, created, lineage) = (&self.id, self.created, &self.lineage);
        let member = self.members.entry(version.clone()).or_insert_with(|| {
            let book = sinks.fleets.book(&sinks.family, Some(version));
            Arc::new(book.join_at(id, created, lineage.clone()))
        });
        Arc::clone(member)
    }
}

/// The adapters of `model` in a `/v1/models` answer: entries whose `parent` is it, by
/// name, with the path they were loaded from.
pub(super) fn adapters_of(models: &serde_json::Value, model: &str) -> BTreeMap<String, String> {
    let entries = models.get("data").and_then(serde_json::Value::as_array);
    entries
        .into_iter()
        .flatten()
        .filter(|m| m.get("parent").and_then(serde_json::Value::as_str) == Some(model))
        .filter_map(|m| {
            let id = m.get("id")?.as_str()?;
            let root = m.get("root").and_then(serde_json::Value::as_str);
            (!id.is_empty() && id != model).then(|| (id.to_owned(), root.unwrap_or("").to_owned()))
        })
        .collect()
}

/// A request refused as naming no model the server has (vLLM's 404, a 400 that says so).
fn refused_as_unknown(e: &ProbeError) -> bool {
    let ProbeError::Status { status, body } = e else {
        return false;
    };
    let body = body.to_ascii_lowercase();
    status.as_u16() == 404
        || (status.as_u16() == 400
            && (body.contains("does not exist") || body.contains("not found")))
}

/// What the replica lists (name → path), and llama-server's ids where it is one.
type Listing = (BTreeMap<String, String>, Option<BTreeMap<String, i64>>);

async fn listing(prober: &Prober, spec: &AdapterSpec) -> Result<Listing, String> {
    let model = &prober.target.model;
    let models = match spec.llama_cpp {
        Some(true) => None,
        _ => Some(prober.models(false).await?),
    };
    let owned_by_llama = models.iter().any(|m| {
        let entries = m.get("data").and_then(serde_json::Value::as_array);
        entries
            .into_iter()
            .flatten()
            .any(|e| e.get("owned_by").and_then(serde_json::Value::as_str) == Some("llamacpp"))
    });
    if spec.llama_cpp.unwrap_or(owned_by_llama) {
        let found = super::llama::adapters_of(&prober.models(true).await?);
        let here = found
            .iter()
            .map(|(n, (root, _))| (n.clone(), root.clone()))
            .collect();
        let ids = found.into_iter().map(|(n, (_, id))| (n, id)).collect();
        return Ok((here, Some(ids)));
    }
    let here = match (spec.discover, models) {
        (true, Some(models)) => adapters_of(&models, model),
        _ => BTreeMap::new(),
    };
    Ok((here, None))
}

/// What this round asks: the prompt, and the adapters (with their versions).
struct Plan {
    /// llama-server's adapter ids by name, where it is one.
    llama: Option<BTreeMap<String, i64>>,
    prompt: String,
    chosen: Vec<Version>,
    /// Every adapter with series.
    checked: Vec<Version>,
    listed_here: BTreeMap<String, String>,
}

/// Read the listing and choose this round's adapters; the series follow the adapters.
async fn plan(prober: &Prober, spec: &AdapterSpec, state: &Mutex<Replica>, sinks: &Sinks) -> Plan {
    let target = &prober.target;
    let listing = listing(prober, spec).await;
    let mut replica = state.lock().unwrap_or_else(|e| e.into_inner());
    match listing {
        Ok((here, ids)) => {
            replica.seen.extend(here.keys().cloned());
            replica.here = here;
            replica.llama = ids;
        }
        Err(e) => tracing::debug!(target = %target.id, error = %crate::report::redact(&e, target),
            "adapter check: the adapters' listing unread; the last one stands"),
    }
    let fresh = (spec.interval * 3).max(FRESH_AT_LEAST);
    let union = sinks
        .fleets
        .listed(&sinks.family, &replica.id, &replica.here, fresh);
    // Configured names first, then what the block lists, by name; the rest past the cap.
    let mut all: Vec<Version> = spec
        .names
        .iter()
        .map(|n| (n.clone(), union.get(n).cloned().unwrap_or_default()))
        .collect();
    all.extend(
        union
            .iter()
            .filter(|(n, _)| !spec.names.contains(n))
            .map(|(n, r)| (n.clone(), r.clone())),
    );
    let over = all.len().saturating_sub(spec.max_adapters);
    all.truncate(spec.max_adapters);
    sinks.series.listing(replica.here.len(), over);
    if over != replica.said_over {
        if over > 0 {
            tracing::info!(target = %target.id, checked = spec.max_adapters, unchecked = over,
                "adapter check: more adapters than max_adapters; the rest are counted in inferprobe_adapters_unchecked, never checked");
        }
        replica.said_over = over;
    }
    let names: Vec<String> = all.iter().map(|(n, _)| n.clone()).collect();
    if names != replica.checked {
        sinks.series.keep(&names);
        replica.checked = names;
    }
    replica.members.retain(|v, _| all.contains(v));
    sinks.fleets.forget_except(&sinks.family, &all);
    let prompt = spec.prompts[replica.round % spec.prompts.len()].clone();
    replica.round += 1;
    // The next adapters in turn, passing those this prompt tells nothing about.
    let mut chosen = Vec::new();
    let n = all.len();
    for k in 0..n {
        if chosen.len() == spec.per_round {
            break;
        }
        let at = (replica.turn + k) % n;
        let version = &all[at];
        // Configured names are expected everywhere; a listed adapter where it was placed.
        let placed = spec.names.contains(&version.0) || replica.seen.contains(&version.0);
        if !placed || sinks.fleets.informative(&sinks.family, version, &prompt) == Some(false) {
            continue;
        }
        chosen.push(version.clone());
        replica.turn = at + 1;
    }
    Plan {
        llama: replica.llama.clone(),
        prompt,
        chosen,
        checked: all,
        listed_here: replica.here.clone(),
    }
}

fn greedy_prompt(spec: &AdapterSpec, text: &str, model: &str) -> Prompt {
    Prompt {
        text: text.to_owned(),
        input_tokens: text.split_whitespace().count() as u32,
        input_exact: false,
        max_tokens: spec.max_tokens,
        model: model.to_owned(),
        media: Ok(Vec::new()),
        greedy: Some(Greedy {
            top_logprobs: spec.top_logprobs,
            seed: crate::canary::SEED,
            pinned: true,
        }),
        sampled: None,
        structure: None,
        cache_breakpoint: None,
        conversation: None,
        extra: None,
    }
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
        ..greedy_prompt(spec, text, model)
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
        .map(|(name, _)| select(Some(name)))
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
            (None, None)
        }
    };
    for (version, answer) in plan.chosen.iter().zip(answers) {
        let name = &version.0;
        let Some(answer) = answer else {
            // llama-server does not list it here: it cannot be asked for.
            ok = false;
            sinks.series.check(name, "missing");
            continue;
        };
        let result = match answer {
            Ok(None) => return None,
            Ok(Some(answer)) => {
                let member = state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .member(sinks, version);
                judged(
                    spec,
                    sinks,
                    (version, &member),
                    &plan.prompt,
                    answer,
                    (own_base.as_deref(), base_reference.as_deref()),
                    target,
                )
            }
            Err(e) if refused_as_unknown(&e) => {
                ok = false;
                let listed = plan.listed_here.contains_key(name);
                tracing::warn!(target = %target.id, adapter = %name, listed_here = listed,
                    error = %crate::report::redact(&e.to_string(), target),
                    "adapter check: a request for the adapter was refused as an unknown model");
                if listed { "not_found" } else { "missing" }
            }
            Err(e) => {
                ok = false;
                tracing::debug!(target = %target.id, adapter = %name, category = e.category().as_str(), "adapter check: the adapter's request failed");
                "failed"
            }
        };
        sinks.series.check(name, result);
    }
    // What every checked adapter's prompts tell, learned here or by another replica (which
    // may have found the last prompt this one will now pass).
    for version in &plan.checked {
        let golden = recorded(spec, target).and_then(|g| g.adapter(&version.0, &version.1));
        let (yes, no) = match golden {
            Some(g) => (
                g.answers.len(),
                spec.prompts.len().saturating_sub(g.answers.len()),
            ),
            None => sinks.fleets.counts(&sinks.family, version, &spec.prompts),
        };
        sinks.series.prompts(&version.0, yes, no);
        sinks.series.recorded(&version.0, golden.is_some());
    }
    Some(ok)
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
) -> &'static str {
    if answer.positions.is_empty() {
        return "unscored"; // no logprobs: nothing to compare by the rule
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
    if let Some(yes) = informative {
        sinks
            .fleets
            .set_informative(&sinks.family, version, prompt, yes);
    }
    let name = &version.0;
    let snippet = crate::error::snippet(prompt);
    match verdict {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapters_are_the_entries_whose_parent_is_the_model() {
        let models = serde_json::json!({"data": [
            {"id": "base", "parent": null, "root": "base"},
            {"id": "a", "parent": "base", "root": "/p/a"},
            {"id": "b", "parent": "base"},
            {"id": "c", "parent": "other"},
            {"id": "", "parent": "base"},
            {"id": 7, "parent": "base"},
        ]});
        let found = adapters_of(&models, "base");
        assert_eq!(found.len(), 2);
        assert_eq!(found["a"], "/p/a");
        assert_eq!(found["b"], "");
        assert!(adapters_of(&serde_json::json!("garbage"), "base").is_empty());
    }

    #[test]
    fn a_refusal_naming_no_model_is_told_from_other_failures() {
        let status = |code: u16, body: &str| ProbeError::Status {
            status: http::StatusCode::from_u16(code).unwrap_or_default(),
            body: body.into(),
        };
        assert!(refused_as_unknown(&status(404, "")));
        assert!(refused_as_unknown(&status(
            400,
            "The model `x` does not exist."
        )));
        assert!(!refused_as_unknown(&status(400, "max_tokens too large")));
        assert!(!refused_as_unknown(&status(500, "not found")));
    }
}
