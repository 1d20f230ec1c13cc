//! What a replica's rounds carry from one to the next ([`Replica`]), and what one round
//! asks ([`plan`]): the listing read, the adapters placed on the replica (with series, to
//! the cap), the prompt, and the next adapters in turn that the prompt can tell from the
//! base model.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
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
/// A configured name a replica has never listed is expected there after this many
/// intervals (a controller loads adapters after the pod is ready).
const GRACE_INTERVALS: u32 = 3;
/// Judged answers (applied, base_served, diverged) a warm-up gets each adapter, unless it
/// has tried every prompt: more than a gate's `min-adapter-checks` (3), so one answer
/// left unscored does not hold the gate for a turn of the adapters.
const WARM_JUDGED: usize = 5;

/// What a replica's rounds carry from one to the next.
pub(super) struct Replica {
    id: String,
    created: Option<i64>,
    lineage: Option<Lineage>,
    pub(super) base: Arc<Member>,
    members: HashMap<Version, Arc<Member>>,
    /// When the replica was found (configured names are expected after a grace).
    found: Instant,
    /// The next adapter's place in the placed list, and the round (the prompt's turn).
    turn: usize,
    round: usize,
    /// What the listing said last (name → path).
    here: BTreeMap<String, String>,
    /// Adapters this replica has listed since it was found, while the block still lists
    /// them: one it lists no more was lost here (`missing`); one it never listed was placed
    /// elsewhere (a controller places adapters on some replicas) and is not asked here.
    seen: BTreeSet<String>,
    /// Per adapter version and prompt: whether its reference parts from the base's here,
    /// and since when (a prompt that tells nothing is passed over until the mark expires:
    /// the references it was judged by may have been a lone replica's).
    pub(super) marks: HashMap<(Version, String), (bool, Instant)>,
    /// Per adapter version: the prompts tried here (asked, or passed over as telling
    /// nothing) and the answers judged, for the warm-up ([`Self::warmed`]).
    tried: HashMap<Version, HashSet<String>>,
    judged: HashMap<Version, usize>,
    /// The adapter versions a warm-up has run for: one placed later gets its own.
    warmed_for: BTreeSet<Version>,
    /// The adapter versions placed here now.
    placed: Vec<Version>,
    /// Adapters placed here and not listed now, since when (said once).
    absent_since: HashMap<String, Instant>,
    /// Where this replica's listings are kept, to forget them when it goes.
    fleets: Arc<super::Fleets>,
    family: String,
    /// The adapters placed here with series now (to the cap), and how many were past the
    /// cap when last said.
    checked: Vec<String>,
    said_over: usize,
    /// The last listing could not be read (said once).
    unread: bool,
    /// llama-server's adapter ids by name, where it is one.
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
            found: Instant::now(),
            turn: 0,
            round: 0,
            here: BTreeMap::new(),
            seen: BTreeSet::new(),
            marks: HashMap::new(),
            tried: HashMap::new(),
            judged: HashMap::new(),
            warmed_for: BTreeSet::new(),
            placed: Vec::new(),
            absent_since: HashMap::new(),
            fleets: Arc::clone(&sinks.fleets),
            family: sinks.family.clone(),
            checked: Vec::new(),
            said_over: 0,
            unread: false,
            llama: None,
        }
    }

    /// An adapter's answer on `prompt` came in (or was passed over); `judged` when it was
    /// applied, base_served or diverged.
    pub(super) fn tried(&mut self, version: &Version, prompt: &str, judged: bool) {
        let tried = self.tried.entry(version.clone()).or_default();
        if !tried.contains(prompt) {
            tried.insert(prompt.to_owned());
        }
        if judged {
            *self.judged.entry(version.clone()).or_default() += 1;
        }
    }

    /// The adapters placed here that no warm-up has run for yet.
    fn pending(&self) -> impl Iterator<Item = &Version> {
        self.placed.iter().filter(|v| !self.warmed_for.contains(*v))
    }

    /// Whether every adapter placed here has had its warm-up: [`WARM_JUDGED`] answers
    /// judged, or every one of the `prompts` tried (those that tell it from the base may
    /// be a few). A replica just found is asked back to back until then, so a rollout's
    /// gate has each adapter's evidence within seconds however many there are.
    pub(super) fn warmed(&self, prompts: usize) -> bool {
        self.pending().all(|v| {
            self.judged.get(v).copied().unwrap_or(0) >= WARM_JUDGED
                || self.tried.get(v).map_or(0, HashSet::len) >= prompts
        })
    }

    /// Whether an adapter version is placed here that no warm-up has run for (loaded after
    /// the replica's warm-up, as controllers load adapters, or a new version).
    pub(super) fn needs_warmup(&self) -> bool {
        self.pending().next().is_some()
    }

    /// A warm-up ended (settled, or at its most): the adapters placed now have had theirs.
    pub(super) fn warm_ended(&mut self) {
        self.warmed_for.extend(self.placed.iter().cloned());
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
    /// The adapters whose turn it is, each with what its turn does.
    pub(super) chosen: Vec<(Version, Turn)>,
    /// Every adapter with series.
    pub(super) checked: Vec<Version>,
    pub(super) listed_here: BTreeMap<String, String>,
}
/// What an adapter's turn does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Turn {
    Ask,
    /// Placed here and not listed now, while another replica lists it (or a configured
    /// name): `missing`, counted without a request. A request would not tell: vLLM with
    /// `VLLM_SKIP_MODEL_NAME_VALIDATION` answers any name with the base model, and a LoRA
    /// resolver loads the adapter again, undoing an operator's unload.
    Missing,
    /// Not listed here now, and no other replica has listed it since: unloaded everywhere,
    /// going. Nothing counted.
    Gone,
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
    let read = match listing {
        Ok((here, ids)) => {
            replica.seen.extend(here.keys().cloned());
            replica.here = here;
            replica.llama = ids;
            replica.unread = false;
            true
        }
        // Said once per outage: the numbers below are the last listing's until it is read.
        Err(e) => {
            if !replica.unread {
                replica.unread = true;
                tracing::warn!(target = %target.id, error = %crate::report::redact(&e, target),
                    "adapter check: the adapters' listing cannot be read (unreachable, not JSON, or over 1 MiB); the last one stands until it is");
            }
            false
        }
    };
    let fresh = (spec.interval * 3).max(FRESH_AT_LEAST);
    // An unread listing is not this replica's news: the others' go on ageing.
    let here = read.then(|| replica.here.clone());
    let union = sinks
        .fleets
        .listed(&sinks.family, &replica.id, here.as_ref(), fresh);
    // An adapter the block lists no more is forgotten: loaded again later on another
    // replica only, it was placed there, not lost here.
    let Replica { seen, here, .. } = &mut *replica;
    seen.retain(|n| union.contains_key(n) || here.contains_key(n));
    // Configured names are expected once the replica listed them, or after a grace (a
    // controller loads adapters after the pod is ready); at once where the listing is not
    // followed (`discover = false`: the server lists no adapters).
    let due = !spec.discover || replica.found.elapsed() >= spec.interval * GRACE_INTERVALS;
    // Placed here: configured names first, then what this replica has listed, by name; the
    // rest past the cap. Each at the path this replica lists it at (its own version), else
    // the block's.
    let version = |n: &String| {
        let root = replica.here.get(n).or_else(|| union.get(n));
        (n.clone(), root.cloned().unwrap_or_default())
    };
    let mut placed: Vec<Version> = spec
        .names
        .iter()
        .filter(|n| due || replica.seen.contains(*n))
        .map(version)
        .collect();
    placed.extend(
        replica
            .seen
            .iter()
            .filter(|n| !spec.names.contains(n))
            .map(version),
    );
    let over = placed.len().saturating_sub(spec.max_adapters);
    placed.truncate(spec.max_adapters);
    sinks.series.listing(replica.here.len(), over);
    if over != replica.said_over {
        if over > 0 {
            tracing::info!(target = %target.id, checked = spec.max_adapters, unchecked = over,
                "adapter check: more adapters placed on the replica than max_adapters; the rest are counted in inferprobe_adapters_unchecked, never checked");
        }
        replica.said_over = over;
    }
    let names: Vec<String> = placed.iter().map(|(n, _)| n.clone()).collect();
    if names != replica.checked {
        sinks.series.keep(&names);
        replica.checked = names;
    }
    // What is kept per adapter goes with it.
    replica.members.retain(|v, _| placed.contains(v));
    replica.tried.retain(|v, _| placed.contains(v));
    replica.judged.retain(|v, _| placed.contains(v));
    replica.warmed_for.retain(|v| placed.contains(v));
    let Replica {
        absent_since, here, ..
    } = &mut *replica;
    absent_since.retain(|n, _| !here.contains_key(n) && placed.iter().any(|(p, _)| p == n));
    for (name, _) in &placed {
        if !replica.here.contains_key(name) && !replica.absent_since.contains_key(name) {
            replica.absent_since.insert(name.clone(), Instant::now());
            if !replica.here.is_empty() || replica.seen.contains(name) {
                tracing::warn!(target = %target.id, adapter = %name,
                    "adapter check: an adapter placed on this replica is not listed by it now: counted missing while another replica lists it or it is a configured name, else unloaded everywhere");
            }
        }
    }
    let ttl = spec.interval * MARK_INTERVALS;
    replica
        .marks
        .retain(|(v, _), (_, at)| placed.contains(v) && at.elapsed() < ttl);
    replica.placed = placed.clone();
    // While some adapters wait for their warm-up (placed after the others had theirs),
    // only they take turns: the others were judged already.
    let pending: Vec<Version> = replica.pending().cloned().collect();
    let turns = match pending.is_empty() || replica.warmed_for.is_empty() {
        true => placed.clone(),
        false => pending,
    };
    let at = prompt_at(
        replica.round,
        turns.len(),
        spec.per_round,
        spec.prompts.len(),
    );
    let prompt = spec.prompts[at].clone();
    replica.round += 1;
    // The next adapters in turn, passing those this prompt tells nothing about.
    let told_nothing = |version: &Version| {
        let mark = replica.marks.get(&(version.clone(), prompt.clone()));
        mark.is_some_and(|&(yes, _)| !yes)
    };
    let (picked, next) = choose(&turns, replica.turn, spec.per_round, |v| !told_nothing(v));
    let passed: Vec<Version> = turns.iter().filter(|v| told_nothing(v)).cloned().collect();
    replica.turn = next;
    // A configured name is asked unlisted only of a server whose listing names no adapter
    // (`discover = false`, or none listed here yet); any other unlisted adapter is
    // `missing` where another replica lists it after this one stopped, else going.
    let lists = spec.discover && !replica.seen.is_empty();
    let chosen = picked
        .into_iter()
        .map(|v| {
            let named = spec.names.contains(&v.0);
            let turn = if replica.here.contains_key(&v.0) || (named && !lists) {
                Turn::Ask
            } else if named {
                Turn::Missing
            } else {
                let since = replica
                    .absent_since
                    .get(&v.0)
                    .copied()
                    .unwrap_or_else(Instant::now);
                match sinks
                    .fleets
                    .listed_after(&sinks.family, &v.0, since, &replica.id)
                {
                    true => Turn::Missing,
                    false => Turn::Gone,
                }
            };
            (v, turn)
        })
        .collect();
    for version in passed {
        replica.tried(&version, &prompt, false);
    }
    Plan {
        llama: replica.llama.clone(),
        prompt,
        chosen,
        checked: placed,
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
