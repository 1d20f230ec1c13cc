//! What a replica's rounds carry from one to the next ([`Replica`]), and what one round
//! asks ([`plan`]): the listing read, the adapters with series kept to the cap, the next
//! prompt, and the next adapters in turn that were placed here and that the prompt can
//! tell from the base model.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Sinks;
use super::fleet::Version;
use super::listing::listing;
use crate::canary::book::Member;
use crate::canary::lineage::Lineage;
use crate::endpoint::Target;
use crate::endpoint::adapters::AdapterSpec;
use crate::probe::Prober;

/// A prompt's mark lasts this many intervals (30 minutes at the defaults).
const MARK_INTERVALS: u32 = 30;
/// A listing of another replica counts this long at least (a replica that left).
const FRESH_AT_LEAST: Duration = Duration::from_secs(10);
/// What a replica's rounds carry from one to the next.
pub(super) struct Replica {
    id: String,
    created: Option<i64>,
    lineage: Option<Lineage>,
    pub(super) base: Arc<Member>,
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
    /// Per adapter version and prompt: whether its reference parts from the base's here,
    /// and since when (a prompt that tells nothing is passed over until the mark expires:
    /// the references it was judged by may have been a lone replica's).
    pub(super) marks: HashMap<(Version, String), (bool, Instant)>,
    /// Per adapter: the prompts it has been asked here, or passed over for a prompt known to
    /// tell nothing (the warm-up runs until each placed adapter has had enough).
    pub(super) asked: HashMap<String, usize>,
    /// Where this replica's listings are kept, to forget them when it goes.
    fleets: Arc<super::Fleets>,
    family: String,
    /// The adapters with series now, and how many were past the cap when last said.
    checked: Vec<String>,
    said_over: usize,
    /// The last listing could not be read (said once).
    unread: bool,
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
    /// Of `prompts`, how many are known here to tell `version` from the base and how many
    /// not.
    pub(super) fn counts(&self, version: &Version, prompts: &[String]) -> (usize, usize) {
        prompts.iter().fold((0, 0), |(yes, no), p| {
            match self.marks.get(&(version.clone(), p.clone())) {
                Some((true, _)) => (yes + 1, no),
                Some((false, _)) => (yes, no + 1),
                None => (yes, no),
            }
        })
    }

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
            marks: HashMap::new(),
            asked: HashMap::new(),
            fleets: Arc::clone(&sinks.fleets),
            family: sinks.family.clone(),
            checked: Vec::new(),
            said_over: 0,
            unread: false,
            llama: None,
        }
    }

    /// Whether every adapter placed here has had `each` prompts: a replica just found is
    /// asked back to back until then, so a rollout's gate has each adapter's evidence
    /// within seconds however many adapters there are.
    pub(super) fn warmed(&self, spec: &AdapterSpec, each: usize) -> bool {
        self.checked
            .iter()
            .filter(|n| spec.names.contains(n) || self.seen.contains(*n))
            .all(|n| self.asked.get(n).copied().unwrap_or(0) >= each)
    }

    pub(super) fn member(&mut self, sinks: &Sinks, version: &Version) -> Arc<Member> {
        let (id, created, lineage) = (&self.id, self.created, &self.lineage);
        let member = self.members.entry(version.clone()).or_insert_with(|| {
            let book = sinks.fleets.book(&sinks.family, Some(version));
            Arc::new(book.join_at(id, created, lineage.clone()))
        });
        Arc::clone(member)
    }
}
/// What this round asks: the prompt, and the adapters (with their versions).
pub(super) struct Plan {
    /// llama-server's adapter ids by name, where it is one.
    pub(super) llama: Option<BTreeMap<String, i64>>,
    pub(super) prompt: String,
    pub(super) chosen: Vec<Version>,
    /// Every adapter with series.
    pub(super) checked: Vec<Version>,
    pub(super) listed_here: BTreeMap<String, String>,
}
/// Read the listing and choose this round's adapters; the series follow the adapters.
pub(super) async fn plan(
    prober: &Prober,
    spec: &AdapterSpec,
    state: &Mutex<Replica>,
    sinks: &Sinks,
) -> Plan {
    let target = &prober.target;
    let listing = listing(prober, spec).await;
    let mut replica = state.lock().unwrap_or_else(|e| e.into_inner());
    match listing {
        Ok((here, ids)) => {
            replica.seen.extend(here.keys().cloned());
            replica.here = here;
            replica.llama = ids;
            replica.unread = false;
        }
        // Said once per outage: the numbers below are the last listing's until it is read.
        Err(e) if !replica.unread => {
            replica.unread = true;
            tracing::warn!(target = %target.id, error = %crate::report::redact(&e, target),
                "adapter check: the adapters' listing cannot be read (unreachable, not JSON, or over 1 MiB); the last one stands until it is");
        }
        Err(_) => {}
    }
    let fresh = (spec.interval * 3).max(FRESH_AT_LEAST);
    let union = sinks
        .fleets
        .listed(&sinks.family, &replica.id, &replica.here, fresh);
    // Configured names first, then what the block lists, by name; the rest past the cap.
    // Each at the path this replica lists it at (its own version), else the block's.
    let version = |n: &String| {
        let root = replica.here.get(n).or_else(|| union.get(n));
        (n.clone(), root.cloned().unwrap_or_default())
    };
    let mut all: Vec<Version> = spec.names.iter().map(version).collect();
    all.extend(
        union
            .keys()
            .filter(|n| !spec.names.contains(n))
            .map(version),
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
    let ttl = spec.interval * MARK_INTERVALS;
    replica
        .marks
        .retain(|(v, _), (_, at)| all.contains(v) && at.elapsed() < ttl);
    // One prompt for a whole turn of the adapters, then the next: each adapter meets every
    // prompt in turn (a prompt per round would show an adapter asked every k-th round only
    // the prompts k apart, half of them or fewer where k and their number share a factor).
    let at = prompt_at(replica.round, all.len(), spec.per_round, spec.prompts.len());
    let prompt = spec.prompts[at].clone();
    replica.round += 1;
    // The next adapters in turn, passing those this prompt tells nothing about.
    let placed = |version: &Version| {
        // Configured names are expected everywhere; a listed adapter where it was placed.
        spec.names.contains(&version.0) || replica.seen.contains(&version.0)
    };
    let told_nothing = |version: &Version| {
        let mark = replica.marks.get(&(version.clone(), prompt.clone()));
        mark.is_some_and(|&(yes, _)| !yes)
    };
    let eligible = |version: &Version| placed(version) && !told_nothing(version);
    let (chosen, next) = choose(&all, replica.turn, spec.per_round, eligible);
    let passed: Vec<String> = all
        .iter()
        .filter(|v| placed(v) && told_nothing(v))
        .map(|(n, _)| n.clone())
        .collect();
    for name in passed {
        *replica.asked.entry(name).or_default() += 1;
    }
    replica.turn = next;
    Plan {
        llama: replica.llama.clone(),
        prompt,
        chosen,
        checked: all,
        listed_here: replica.here.clone(),
    }
}
/// The prompt of round `round`: one for each turn of `adapters` at `per_round` a round.
fn prompt_at(round: usize, adapters: usize, per_round: usize, prompts: usize) -> usize {
    let turn = adapters.div_ceil(per_round.max(1)).max(1);
    (round / turn) % prompts.max(1)
}
/// Up to `per_round` of `all` that are `eligible`, in turn from `start`, and where the next
/// round starts: each adapter once every ⌈n / per_round⌉ rounds when all are eligible.
fn choose(
    all: &[Version],
    start: usize,
    per_round: usize,
    eligible: impl Fn(&Version) -> bool,
) -> (Vec<Version>, usize) {
    let n = all.len();
    let mut chosen = Vec::new();
    let mut next = start;
    for k in 0..n {
        if chosen.len() == per_round {
            break;
        }
        let at = (start + k) % n;
        if eligible(&all[at]) {
            chosen.push(all[at].clone());
            next = at + 1;
        }
    }
    (chosen, next)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_adapter_is_chosen_once_in_as_many_rounds_as_it_takes() {
        for (n, per_round) in [
            (3usize, 2),
            (6, 2),
            (18, 2),
            (24, 3),
            (2, 2),
            (5, 1),
            (1, 4),
        ] {
            let all: Vec<Version> = (0..n).map(|i| (format!("a{i}"), String::new())).collect();
            let rounds = n.div_ceil(per_round);
            let mut start = 0;
            let mut asked = std::collections::BTreeMap::<String, usize>::new();
            for _ in 0..rounds * 4 {
                let (chosen, next) = choose(&all, start, per_round, |_| true);
                let distinct: std::collections::BTreeSet<_> = chosen.iter().collect();
                assert_eq!(
                    distinct.len(),
                    chosen.len(),
                    "{n}/{per_round}: one twice in a round"
                );
                for (name, _) in chosen {
                    *asked.entry(name).or_default() += 1;
                }
                start = next;
            }
            assert_eq!(asked.len(), n, "{n}/{per_round}: {asked:?}");
            // Fair: over four cycles no adapter is asked more than once more than another.
            let (least, most) = (asked.values().min(), asked.values().max());
            assert!(
                most.zip(least).is_some_and(|(m, l)| m - l <= 1),
                "{n}/{per_round}: {asked:?}"
            );
        }
        // Passing the ineligible, the others still take their turns.
        every_adapter_meets_every_prompt();
        let all: Vec<Version> = (0..4).map(|i| (format!("a{i}"), String::new())).collect();
        let (chosen, next) = choose(&all, 3, 2, |v| v.0 != "a0");
        assert_eq!(chosen, [all[3].clone(), all[1].clone()]);
        assert_eq!(next, 2);
    }

    /// With rounds and prompts in turn, each adapter meets every prompt, whatever the
    /// numbers share (20 adapters two a round and 8 prompts: each adapter every 10th round,
    /// which with a prompt per round would show it the even or the odd prompts only).
    fn every_adapter_meets_every_prompt() {
        for (n, per_round, prompts) in [(20usize, 2, 8), (6, 2, 9), (4, 2, 8), (1, 2, 5), (7, 3, 4)]
        {
            let all: Vec<Version> = (0..n).map(|i| (format!("a{i}"), String::new())).collect();
            let mut met = std::collections::BTreeSet::new();
            let mut start = 0;
            for round in 0..n.div_ceil(per_round) * prompts {
                let prompt = prompt_at(round, n, per_round, prompts);
                let (chosen, next) = choose(&all, start, per_round, |_| true);
                start = next;
                met.extend(chosen.into_iter().map(|(a, _)| (a, prompt)));
            }
            assert_eq!(met.len(), n * prompts, "{n}/{per_round}/{prompts}");
        }
    }
}
