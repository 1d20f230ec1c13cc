//! What a replica's first checks (the warm-up, `crate::ticker`) must gather before a rollout
//! gate may decide on them, and how their failures are counted.
//!
//! **Enough evidence.** A gate that passes a version on the share of its comparisons that
//! diverged, once ten are in, passes one that diverges on 17% of them 4 times in 10 (one
//! divergence in the first twelve is 8%). The shipped templates (config/rollouts/) decide on
//! a confidence bound instead: Wilson's score interval at [`Z`] (99%, one-sided) around the
//! share of diverged comparisons. Promoted when its upper bound is at most the tolerance
//! (`max-divergence`, 0.1): 49 comparisons without one divergence, 68 with one. Failed when
//! its lower bound is above it, once ten are in. Between the two, not yet (Argo Inconclusive,
//! a Flagger check that waits). The warm-up runs on, back to back, until each of this
//! replica's pairs is decided by that rule at `canary.max_divergence`, and once its known
//! answers are in, asks only the prompts that are compared (docs/canary.md, "Noise").
//!
//! **A burst is one fault.** A pod Ready before its port listens refuses its first checks
//! within milliseconds of each other. A failed warm-up check is held back (its request and
//! error are counted at once, as every probe's are; its verdict is not): if a check
//! succeeds within the burst window (a sixth of the interval, 10 s at the default 60 s),
//! the burst counts as one failed check; once failures have lasted the window, every one
//! counts from then on, and the burst before it once. After the warm-up, checks are an interval apart and each
//! failure counts at once.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::metrics::{CanaryVerdict, CheckResult, PairResult};

/// The most checks a warm-up runs, whatever its evidence (160 at four at once and 3 s an
/// answer is two minutes).
pub const MOST: usize = 160;
/// The most checks a warm-up of at least `least` runs (none when `least` is 0).
pub fn most(least: usize) -> usize {
    match least {
        0 => 0,
        least => least.max(MOST),
    }
}

/// Warm-up checks at once.
pub const AT_ONCE: u32 = 4;

/// The normal quantile of the templates' bounds: 99% one-sided.
pub const Z: f64 = 2.326;
/// The comparisons a failure verdict needs at least (the templates' `min-checks`).
pub const MIN_TO_FAIL: u64 = 10;
/// The known answers a warm-up gathers before it asks only compared prompts (the
/// templates' `min-known` is 3; one more for a failed request).
pub const KNOWN_ENOUGH: u64 = 4;

/// Wilson's score bounds on the share of `diverged` among `scored` comparisons, at [`Z`]:
/// (lower, upper). None with nothing scored.
pub fn bounds(diverged: u64, scored: u64) -> Option<(f64, f64)> {
    if scored == 0 {
        return None;
    }
    let (d, n, z2) = (diverged as f64, scored as f64, Z * Z);
    let spread = Z * (d * (n - d) / n + z2 / 4.0).sqrt();
    let centre = d + z2 / 2.0;
    Some(((centre - spread) / (n + z2), (centre + spread) / (n + z2)))
}

/// The templates' verdict on a pair: `Some(true)` within `tolerance`, `Some(false)` beyond
/// it, `None` not yet.
pub fn verdict(diverged: u64, scored: u64, tolerance: f64) -> Option<bool> {
    let (lower, upper) = bounds(diverged, scored)?;
    if upper <= tolerance {
        Some(true)
    } else if scored >= MIN_TO_FAIL && lower > tolerance {
        Some(false)
    } else {
        None
    }
}

/// One replica's scored comparisons per other group, and its scored known answers.
#[derive(Debug, Default)]
pub struct Evidence {
    /// Per other group: (diverged, scored).
    pairs: BTreeMap<String, (u64, u64)>,
    known: u64,
    /// Known-answer checks counted failed (no answer).
    known_failed: u64,
}

impl Evidence {
    pub fn add(&mut self, verdict: &CanaryVerdict) {
        for (group, result) in &verdict.baseline {
            let pair = self.pairs.entry(group.clone()).or_default();
            match result {
                PairResult::Match => pair.1 += 1,
                PairResult::Diverged => *pair = (pair.0 + 1, pair.1 + 1),
                PairResult::Unscored | PairResult::Failed => {}
            }
        }
        match verdict.known {
            Some(CheckResult::Match | CheckResult::WrongAnswer) => self.known += 1,
            Some(_) => self.known_failed += 1,
            None => {}
        }
    }

    /// Whether the known answers are in (`has_known`: the prompts have some), and more
    /// scored than failed: a gate's "2" (failed ≥ 3 and more than scored) must not stay
    /// for want of known prompts asked.
    fn known_in(&self, has_known: bool) -> bool {
        !has_known || (self.known >= KNOWN_ENOUGH && self.known > self.known_failed)
    }

    fn pairs_decided(&self, tolerance: f64) -> bool {
        self.pairs
            .values()
            .all(|&(d, n)| verdict(d, n, tolerance).is_some())
    }

    /// Whether the warm-up may end.
    pub fn settled(&self, has_known: bool, tolerance: f64) -> bool {
        self.known_in(has_known) && self.pairs_decided(tolerance)
    }

    /// Whether only compared prompts are still worth asking.
    pub fn compared_only(&self, has_known: bool, tolerance: f64) -> bool {
        self.known_in(has_known) && !self.pairs_decided(tolerance)
    }
}

/// A replica's failed checks in a burst, held back.
#[derive(Debug)]
pub struct Burst {
    window: Duration,
    state: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    /// When the burst's first failed request was sent.
    since: Option<Instant>,
    verdicts: Vec<CanaryVerdict>,
}

impl Burst {
    /// The burst window of a canary checked every `interval`.
    pub fn new(interval: Duration) -> Self {
        Self {
            window: interval / 6,
            state: Mutex::default(),
        }
    }

    /// A failed check's verdict: whether it counts now (`warming`: a warm-up's may be
    /// held), and the held ones that count now with it. `began`: when its request was sent
    /// (a check that timed out has lasted the window by itself).
    pub fn failed(
        &self,
        verdict: &CanaryVerdict,
        warming: bool,
        began: Instant,
    ) -> (bool, Vec<CanaryVerdict>) {
        let mut held = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let since = *held.since.get_or_insert(began);
        if now.duration_since(since) >= self.window || !warming {
            // A failure that lasts (or an interval's check) counts, and from now on every
            // one; the burst before it still counts once.
            let first = held.verdicts.drain(..).next();
            return (true, first.into_iter().collect());
        }
        held.verdicts.push(verdict.clone());
        (false, Vec::new())
    }

    /// A check that did not fail: a burst before it was one fault, its first.
    pub fn succeeded(&self) -> Option<CanaryVerdict> {
        let mut held = self.state.lock().unwrap_or_else(|e| e.into_inner());
        held.since = None;
        // The drain empties the list whether or not its rest is read.
        held.verdicts.drain(..).next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The figures docs/canary.md gives: 49 clean comparisons pass at 0.1, 68 with one
    /// divergence; 2 of 12 (17%) is no verdict either way; 5 of 12 fails.
    #[test]
    fn the_bound_needs_the_evidence_the_docs_say() {
        let first = |d| (1..1000).find(|&n| verdict(d, n, 0.1) == Some(true));
        assert_eq!(first(0), Some(49));
        assert_eq!(first(1), Some(68));
        assert_eq!(verdict(2, 12, 0.1), None);
        assert_eq!(verdict(1, 9, 0.1), None, "fewer than ten never fail");
        assert_eq!(verdict(5, 12, 0.1), Some(false));
        assert_eq!(verdict(0, 0, 0.1), None);
        let (lower, upper) = bounds(22, 130).unwrap();
        assert!(lower > 0.1 && upper < 0.27, "{lower} {upper}");
    }

    fn failed() -> CanaryVerdict {
        CanaryVerdict {
            result: CheckResult::Unscored,
            position: None,
            drift: None,
            baseline: vec![("v1".into(), PairResult::Failed)],
            known: None,
            structured: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_burst_is_one_fault_and_a_long_one_every_one() {
        let burst = Burst::new(Duration::from_secs(60));
        for _ in 0..5 {
            assert!(!burst.failed(&failed(), true, Instant::now()).0);
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        assert!(
            burst.succeeded().is_some(),
            "five failures in 5 s: one fault"
        );
        assert!(burst.succeeded().is_none());
        // Failing for 10 s: the held ones count with the one that crosses.
        for _ in 0..3 {
            assert!(!burst.failed(&failed(), true, Instant::now()).0);
            tokio::time::advance(Duration::from_secs(4)).await;
        }
        let (now, earlier) = burst.failed(&failed(), true, Instant::now());
        assert!(now);
        assert_eq!(earlier.len(), 1, "the burst before it counts once");
        assert!(burst.failed(&failed(), true, Instant::now()).0);
        // A check that took the window by itself (a timeout) counts at once.
        burst.succeeded();
        let began = Instant::now();
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(burst.failed(&failed(), true, began).0);
        // An interval's check counts at once.
        burst.succeeded();
        assert!(burst.failed(&failed(), false, Instant::now()).0);
    }

    #[test]
    fn the_evidence_settles_when_every_pair_is_decided() {
        let mut evidence = Evidence::default();
        let check = |pair: PairResult, known: Option<CheckResult>| CanaryVerdict {
            baseline: vec![("v1".into(), pair)],
            known,
            ..failed()
        };
        for _ in 0..4 {
            evidence.add(&check(PairResult::Unscored, Some(CheckResult::Match)));
        }
        assert!(evidence.compared_only(true, 0.1));
        for _ in 0..48 {
            evidence.add(&check(PairResult::Match, None));
        }
        assert!(!evidence.settled(true, 0.1));
        evidence.add(&check(PairResult::Match, None));
        assert!(evidence.settled(true, 0.1));
        assert!(!evidence.compared_only(true, 0.1));
    }
}
