//! The correctness canary: a replica that answers wrong with HTTP 200 at normal speed is an
//! outage no latency probe sees. Every `interval`, a target with `canary` set gets the next
//! of its prompts (round robin), exactly as written, greedy and seeded, with logprobs; the
//! answer is compared with a reference by the rule in [`compare`] (a golden file's, or the
//! one most replicas of its group give: [`book`]), or by its prompt's `expect` regex.
//!
//! A canary request is measured like any probe and counts in `requests_total`, the error
//! counters, `good_requests_total` and the token counters, but in no latency or token
//! histogram: a short fixed prompt is not the workload's shape. Its verdict is counted in
//! `inferprobe_canary_checks_total{result}`; a divergence or a wrong answer is logged and
//! shown on the status page with the prompt, the position, and the expected and received
//! tokens.

pub mod baseline;
pub mod book;
pub mod books;
mod explain;
pub mod lineage;
pub mod votes;
pub mod warmup;
pub use explain::{ALERT_WINDOW, DRIFT_NEEDS, WRONG_ANSWERS_NEED, describe, warnings};
pub mod compare;
pub mod record;
mod score;
pub mod structured;
pub use score::{Check, answer, greedy_prompt, prompt, score};

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::endpoint::canary::{CanaryPrompt, CanarySpec};
use crate::error::ProbeError;
use crate::metrics::{CanaryVerdict, CheckResult, InvalidReason, PairResult, TargetMetrics};
use crate::probe::{Outcome, Prober};
use crate::prompt::Greedy;
use crate::record::Measurement;
use crate::scheduler::Context;
use crate::status::{CanaryCheck, TargetStatus};
use book::{Book, Member};

/// Every canary request carries this seed: servers that honour it are reproducible.
pub const SEED: u64 = 1234;

/// How many intervals a pair's series outlive its other group's absence.
const PAIR_GRACE_INTERVALS: u32 = 10;

/// The least a check waits for its votes after its own answer.
const VOTE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Where a target's canary results go.
#[derive(Clone)]
pub struct Sinks {
    pub metrics: TargetMetrics,
    pub status: Arc<TargetStatus>,
    /// Its group's answers (for a learned reference).
    pub book: Arc<Book>,
    /// The golden file's answers are this replica's reference (its model and group are
    /// the golden file's); otherwise the learned one is.
    pub golden: bool,
    /// Where its block's baseline group is, for the rollout gate.
    pub baseline: baseline::Baseline,
    /// For a node-local block: the pool's replicas on other nodes, to vote.
    pub voters: Option<votes::Voters>,
}

/// What a replica's checks share: its place in its group's book, its warm-up.
struct Own {
    member: Arc<Member>,
    young: Young,
}

/// A replica's warm-up state (`warmup`).
struct Young {
    evidence: std::sync::Mutex<warmup::Evidence>,
    burst: warmup::Burst,
    pace: Arc<crate::ticker::Pace>,
    has_known: bool,
    tolerance: f64,
}

impl Young {
    fn evidence(&self) -> std::sync::MutexGuard<'_, warmup::Evidence> {
        self.evidence.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Count a check: a failure of a warm-up's burst held back, the evidence told
/// ([`warmup`]).
async fn count(
    result: &Result<Measurement, ProbeError>,
    verdict: &CanaryVerdict,
    sinks: &Sinks,
    young: &Young,
    (warming, began): (bool, tokio::time::Instant),
) {
    let (now, earlier) = match result {
        Err(_) => young.burst.failed(verdict, warming, began),
        Ok(_) => (true, young.burst.succeeded().into_iter().collect()),
    };
    for held in &earlier {
        sinks.metrics.record_canary_verdict(held).await;
    }
    sinks
        .metrics
        .record_canary_request(result, now.then_some(verdict))
        .await;
    let mut evidence = young.evidence();
    // What the gate's series hold: the counted verdicts.
    for counted in earlier.iter().chain(now.then_some(verdict)) {
        evidence.add(counted);
    }
    young
        .pace
        .settle(evidence.settled(young.has_known, young.tolerance));
}

/// Check `prober`'s target every interval until `stop`. Each check runs as a probe task of
/// `ctx` (drained at shutdown like every probe); a check still running when the next is
/// due delays it rather than overlapping it.
pub async fn run(
    prober: Arc<Prober>,
    spec: Arc<CanarySpec>,
    sinks: Sinks,
    stop: CancellationToken,
    ctx: Context,
) {
    let target = Arc::clone(&prober.target);
    let member = Arc::new(sinks.book.join_at(
        &target.id,
        target.created,
        lineage::Lineage::of(&target),
    ));
    let plan = crate::ticker::Warmup {
        least: spec.warmup,
        most: warmup::most(spec.warmup),
        at_once: warmup::AT_ONCE,
    };
    let mut ticker = crate::ticker::Ticker::with_warmup(spec.interval, plan);
    let own = Arc::new(Own {
        member,
        young: Young {
            evidence: std::sync::Mutex::default(),
            burst: warmup::Burst::new(spec.interval),
            pace: ticker.pace(),
            has_known: spec.prompts.iter().any(CanaryPrompt::known),
            tolerance: spec.max_divergence,
        },
    });
    if spec.prompts.iter().any(CanaryPrompt::compared) {
        // Before the first check: a gate's query finds every result at 0, not nothing.
        open_pairs(&sinks, spec.interval);
    }
    let mut index = 0;
    loop {
        let Some((_, permit)) = ticker.tick(&stop).await else {
            return;
        };
        let warming = ticker.warming();
        let young = &own.young;
        let compared_only = warming
            && young
                .evidence()
                .compared_only(young.has_known, young.tolerance);
        let this = next_prompt(&spec.prompts, &mut index, compared_only);
        let (prober, spec, sinks, own) = (
            Arc::clone(&prober),
            Arc::clone(&spec),
            sinks.clone(),
            Arc::clone(&own),
        );
        let ctx_for_check = ctx.clone();
        ctx.probes.spawn(async move {
            let _permit = permit;
            let at = (this, warming);
            check(&prober, &spec, at, &sinks, &own, &ctx_for_check).await;
        });
    }
}

/// The prompts in turn from `index`; with `compared_only`, the next compared one (any,
/// if none is).
fn next_prompt(prompts: &[CanaryPrompt], index: &mut usize, compared_only: bool) -> usize {
    let n = prompts.len();
    let pick = (0..n)
        .map(|k| (*index + k) % n)
        .find(|&i| !compared_only || prompts[i].compared())
        .unwrap_or(*index % n);
    *index = pick + 1;
    pick
}

/// The other groups this replica is compared with now, their pair series opened (at 0 if
/// new; those of groups gone dropped).
fn open_pairs(sinks: &Sinks, interval: std::time::Duration) -> Vec<Option<String>> {
    let mut others = sinks.baseline.candidates();
    let present: Vec<String> = others.iter().map(baseline::label).collect();
    others.truncate(baseline::MAX_OTHERS);
    let pairs = crate::metrics::Pairs {
        compared: &present[..others.len()],
        present: &present,
        // A group gone this long is gone; less is a flap (`crate::metrics::gate`).
        grace: interval * PAIR_GRACE_INTERVALS,
    };
    sinks.metrics.open_canary_baselines(&pairs);
    others
}

/// One check of prompt `index`.
async fn check(
    prober: &Prober,
    spec: &Arc<CanarySpec>,
    (index, warming): (usize, bool),
    sinks: &Sinks,
    own: &Own,
    ctx: &Context,
) {
    let target = &prober.target;
    let canary_prompt = &spec.prompts[index];
    let request_id = Arc::new(format!(
        "{}canary-{:016x}",
        target.request_id_prefix,
        rand::random::<u64>()
    ));
    let others = if canary_prompt.compared() {
        open_pairs(sinks, spec.interval)
    } else {
        Vec::new()
    };
    // Votes are asked while the replica answers, never before, on their own task: the
    // comparison waits for them at most as long again as the replica took (a hung voter
    // must not hold every check; its answer, if it comes, serves the next ones).
    let votes = sinks.voters.clone().map(|voters| {
        // Other groups with no replica here: their replicas on other nodes answer for them.
        let mut groups = sinks.baseline.remote(&others);
        if canary_prompt.compared() && !sinks.golden {
            groups.push((voters.group.clone(), Arc::clone(&sinks.book)));
        }
        let (target, spec) = (Arc::clone(target), Arc::clone(spec));
        let (text, abort) = (canary_prompt.text.clone(), ctx.abort.clone());
        ctx.probes.spawn(async move {
            voters
                .ensure_all(groups, &target, &spec, &text, &abort)
                .await;
        })
    });
    let started = tokio::time::Instant::now();
    let mut prompt = prompt(spec, &canary_prompt.text, &target.model);
    if let Some(structure) = &canary_prompt.structure {
        // Judged by its schema: no logprobs to compare, so no greedy settings either.
        prompt.structure = Some(Arc::clone(structure));
        prompt.greedy = prompt.greedy.map(|g| Greedy {
            top_logprobs: 0,
            pinned: false,
            ..g
        });
        prompt.max_tokens = spec.structured_max_tokens;
    }
    let asked = async {
        let _in_flight = sinks.metrics.in_flight();
        prober
            .probe_sampled(&request_id, &prompt, &ctx.abort, ctx.sample())
            .await
    };
    let report = asked.await;
    if let Some(votes) = votes {
        let grace = started.elapsed().max(VOTE_GRACE);
        // Past it the votes go on alone; this check scores with what is in.
        let _ = tokio::time::timeout(grace, votes).await;
    }
    let Outcome::Finished(result) = &report.outcome else {
        return; // cut by shutdown: not counted, like any probe
    };
    match result {
        Ok(_) => own.young.pace.succeeded(),
        Err(_) => own.young.pace.failed(),
    }
    crate::report::log_probe(target, &request_id, result, &report);
    if let Some(spans) = &ctx.spans {
        if let Some(span) = crate::otlp::probe_span(target, &request_id, &report, result, true) {
            spans.offer(span);
        }
    }
    // Scoring compares the answer with each of the group's others (a millisecond at 500
    // replicas, under the book's lock): off the runtime's workers, which time streams.
    let (book, member, margin) = (
        Arc::clone(&sinks.book),
        Arc::clone(&own.member),
        spec.margin,
    );
    let spec = Arc::clone(spec);
    let (golden, baseline) = (sinks.golden, sinks.baseline.clone());
    let canary_prompt = canary_prompt.clone();
    let scored = tokio::task::spawn_blocking(move || {
        let check = score(
            &canary_prompt,
            &report,
            margin,
            |answer| match &canary_prompt.reference {
                Some(reference) if golden => Ok(Arc::clone(reference)),
                _ => book.observe(&member, &canary_prompt.text, answer, margin),
            },
        );
        let versus = baseline.check(&spec, &canary_prompt, &report, margin, &others);
        (canary_prompt, report, check, versus)
    });
    let Ok((canary_prompt, report, check, versus)) = scored.await else {
        return; // the runtime is shutting down
    };
    let Outcome::Finished(result) = &report.outcome else {
        return;
    };
    record(
        &target.id,
        &request_id,
        &canary_prompt,
        result,
        (&check, versus),
        (sinks, &own.young, (warming, started)),
    )
    .await;
}

async fn record(
    target: &str,
    request_id: &Arc<String>,
    prompt: &CanaryPrompt,
    result: &Result<Measurement, ProbeError>,
    (check, versus): (&Check, Vec<(String, PairResult)>),
    (sinks, young, warming): (&Sinks, &Young, (bool, tokio::time::Instant)),
) {
    let verdict = CanaryVerdict {
        result: check.result,
        position: check.divergence.as_ref().map(|d| d.position),
        drift: check.drift,
        baseline: versus,
        known: prompt.known().then_some(check.result),
        structured: prompt
            .structure
            .as_deref()
            .filter(|_| check.structured)
            .map(|s| (s.capability(), check.invalid)),
    };
    count(result, &verdict, sinks, young, warming).await;
    let prompt = crate::error::snippet(&prompt.text);
    match (&check.result, &check.divergence) {
        (CheckResult::Diverged, Some(d)) => tracing::warn!(
            target, request_id = %request_id, prompt, position = d.position,
            expected = d.expected.as_str(), received = d.received.as_str(),
            reference_lead = d.lead,
            "canary answer diverged from its reference where the reference was sure"
        ),
        (CheckResult::InvalidOutput, _) => tracing::warn!(
            target, request_id = %request_id, prompt,
            reason = check.invalid.map_or("", InvalidReason::as_str),
            detail = check.note.as_deref().unwrap_or(""),
            "canary's structured answer is one an agent could not use"
        ),
        (CheckResult::WrongAnswer, _) => tracing::warn!(
            target, request_id = %request_id, prompt, detail = check.note.as_deref().unwrap_or(""),
            "canary answered a known-answer prompt wrong"
        ),
        _ => tracing::debug!(
            target, request_id = %request_id, prompt, result = check.result.as_str(),
            drift = check.drift, note = check.note.as_deref(), "canary check"
        ),
    }
    sinks.status.push_canary(CanaryCheck {
        at: std::time::SystemTime::now(),
        request_id: Arc::clone(request_id),
        prompt,
        result: check.result.as_str(),
        divergence: check
            .divergence
            .as_ref()
            .map(|d| (d.position, d.expected.clone(), d.received.clone())),
        drift: check.drift,
        detail: check.note.clone(),
    });
}
