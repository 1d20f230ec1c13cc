//! The pace of the checks that run beside a target's workload (the canary, the prefix-cache
//! check): one every interval, the first at a random offset within it so a fleet's replicas
//! are not all checked at once, and never two at a time: a check still running when the
//! next is due delays it (a slow server is not sent more checks than it can answer).
//!
//! A **warm-up** may come first, for the canary of a replica just found, so a rollout's
//! gate gets its verdict in seconds rather than after ten intervals:
//! - checks run back to back, [`Warmup::at_once`] at a time (a young replica's few short
//!   greedy requests are nothing to a server that batches; at 3 s an answer, one at a time
//!   would take minutes to gather the evidence a gate needs);
//! - at least [`Warmup::least`] of them, then on until the checks say the evidence suffices
//!   ([`Pace::settle`]), at most [`Warmup::most`];
//! - a failed check is retried after a back-off (half a second, doubling, at most
//!   `interval / 15`), one at a time, so a port that refuses for its first seconds after
//!   Ready meets a few checks, not every one of the warm-up within milliseconds.
//!
//! Then the interval's pace.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use rand::RngExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

/// How many checks a warm-up runs, and how many at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Warmup {
    pub least: usize,
    pub most: usize,
    pub at_once: u32,
}

/// What the checks of a warm-up tell its ticker: how each ended, and when enough is known.
#[derive(Debug, Default)]
pub struct Pace {
    /// Failed checks since the last that succeeded.
    streak: AtomicU32,
    settled: AtomicBool,
}

impl Pace {
    pub fn succeeded(&self) {
        self.streak.store(0, Ordering::Relaxed);
    }

    pub fn failed(&self) {
        self.streak.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the evidence suffices, as the last check counted leaves it: the warm-up may
    /// end once its least is run and no check in flight undoes it.
    pub fn settle(&self, settled: bool) {
        self.settled.store(settled, Ordering::Relaxed);
    }

    fn streak(&self) -> u32 {
        self.streak.load(Ordering::Relaxed)
    }
}

/// The back-off before a warm-up's next check after `streak` failed ones.
pub fn backoff(interval: Duration, streak: u32) -> Duration {
    let first = Duration::from_millis(500).min(interval / 120);
    let most = interval / 15;
    first
        .saturating_mul(1 << streak.saturating_sub(1).min(16))
        .min(most)
}

#[derive(Debug)]
struct Warming {
    plan: Warmup,
    started: usize,
}

#[derive(Debug)]
pub struct Ticker {
    interval: Duration,
    next: Instant,
    busy: Arc<Semaphore>,
    /// The permits one check at the interval's pace holds: all of them.
    permits: u32,
    warming: Option<Warming>,
    pace: Arc<Pace>,
}

impl Ticker {
    pub fn new(interval: Duration) -> Self {
        Self::with_warmup(
            interval,
            Warmup {
                least: 0,
                most: 0,
                at_once: 1,
            },
        )
    }

    /// A warm-up first (none when `warmup.most` is 0), then one check per `interval`.
    pub fn with_warmup(interval: Duration, warmup: Warmup) -> Self {
        let warming = (warmup.most > 0).then_some(Warming {
            plan: warmup,
            started: 0,
        });
        let offset = if warming.is_some() {
            0.0
        } else {
            rand::rng().random_range(0.0..interval.as_secs_f64())
        };
        let permits = warmup.at_once.max(1);
        Self {
            interval,
            next: Instant::now() + Duration::from_secs_f64(offset),
            busy: Arc::new(Semaphore::new(permits as usize)),
            permits,
            warming,
            pace: Arc::default(),
        }
    }

    /// What the checks report to (a clone for each).
    pub fn pace(&self) -> Arc<Pace> {
        Arc::clone(&self.pace)
    }

    /// Whether the check [`Self::tick`] last started is one of the warm-up's.
    pub fn warming(&self) -> bool {
        self.warming.is_some()
    }

    /// Wait until the next check is due and may start: the time it starts, and the permit
    /// it holds until it ends. None once `stop` is cancelled.
    pub async fn tick(
        &mut self,
        stop: &CancellationToken,
    ) -> Option<(Instant, OwnedSemaphorePermit)> {
        tokio::select! {
            () = stop.cancelled() => return None,
            () = sleep_until(self.next) => {}
        }
        if self.warmed(stop).await? {
            self.warming = None;
            self.next = Instant::now() + self.interval;
            tokio::select! {
                () = stop.cancelled() => return None,
                () = sleep_until(self.next) => {}
            }
        }
        let permit = match self.warming {
            Some(_) => self.warm_permit(stop).await?,
            None => self.permit(self.permits, stop).await?,
        };
        let now = Instant::now();
        match &mut self.warming {
            Some(w) => {
                w.started += 1;
                // The next is due at once (it still waits for a permit).
                self.next = now;
            }
            None => self.next = now.max(self.next) + self.interval,
        }
        Some((now, permit))
    }

    /// Whether a warm-up is over: its most run, or its least run and the evidence settled
    /// once every check in flight is counted (one still running can undo it: a pair
    /// decided at 4 of 12 diverged read undecided at 4 of 16, and the gate waited).
    async fn warmed(&self, stop: &CancellationToken) -> Option<bool> {
        let Some(w) = &self.warming else {
            return Some(false);
        };
        if w.started >= w.plan.most {
            return Some(true);
        }
        if w.started < w.plan.least || !self.pace.settled.load(Ordering::Relaxed) {
            return Some(false);
        }
        let _all = self.permit(self.permits, stop).await?;
        Some(self.pace.settled.load(Ordering::Relaxed))
    }

    /// A warm-up check's permit: one of `at_once`, or, after a failed check, all of them
    /// (the checks in flight have ended) and the back-off.
    async fn warm_permit(&self, stop: &CancellationToken) -> Option<OwnedSemaphorePermit> {
        let one = self.permit(1, stop).await?;
        if self.pace.streak() == 0 {
            return Some(one);
        }
        drop(one);
        let all = self.permit(self.permits, stop).await?;
        let streak = self.pace.streak();
        if streak > 0 {
            tokio::select! {
                () = stop.cancelled() => return None,
                () = sleep(backoff(self.interval, streak)) => {}
            }
        }
        Some(all)
    }

    async fn permit(&self, n: u32, stop: &CancellationToken) -> Option<OwnedSemaphorePermit> {
        tokio::select! {
            () = stop.cancelled() => None,
            permit = Arc::clone(&self.busy).acquire_many_owned(n) => permit.ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_at_a_time_and_late_checks_delay_the_next() {
        let mut ticker = Ticker::new(Duration::from_secs(10));
        let stop = CancellationToken::new();
        let start = Instant::now();
        let (first, permit) = ticker.tick(&stop).await.unwrap();
        assert!(
            first - start < Duration::from_secs(10),
            "within one interval"
        );
        // The first check runs 25 s: the next starts when it ends, not at first + 10 s.
        let hold = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(25)).await;
            drop(permit);
        });
        let (second, permit) = ticker.tick(&stop).await.unwrap();
        hold.await.unwrap();
        assert_eq!(second - first, Duration::from_secs(25));
        drop(permit);
        let (third, _permit) = ticker.tick(&stop).await.unwrap();
        assert_eq!(third - second, Duration::from_secs(10));
        stop.cancel();
        assert!(ticker.tick(&stop).await.is_none());
    }

    fn warmup(least: usize, most: usize, at_once: u32) -> Warmup {
        Warmup {
            least,
            most,
            at_once,
        }
    }

    /// Each check takes 2 s and reports `ok`; the start of every check, in seconds.
    async fn starts(ticker: &mut Ticker, n: usize, ok: impl Fn(usize) -> bool) -> Vec<f64> {
        let stop = CancellationToken::new();
        let start = Instant::now();
        let mut times = Vec::new();
        for i in 0..n {
            let (at, permit) = ticker.tick(&stop).await.unwrap();
            times.push((at - start).as_secs_f64());
            let (pace, ok) = (ticker.pace(), ok(i));
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                if ok {
                    pace.succeeded()
                } else {
                    pace.failed()
                }
                drop(permit);
            });
        }
        times
    }

    /// Issue 41 item 2: a warm-up's checks run back to back (one at a time, each as soon
    /// as the last ended), then the interval's pace.
    #[tokio::test(start_paused = true)]
    async fn a_warmup_runs_back_to_back_then_paces() {
        let mut ticker = Ticker::with_warmup(Duration::from_secs(60), warmup(3, 3, 1));
        let times = starts(&mut ticker, 5, |_| true).await;
        assert_eq!(times, [0.0, 2.0, 4.0, 64.0, 124.0]);
    }

    /// Issue 51 item 1: `at_once` checks at a time during the warm-up; after it, one at a
    /// time again (the interval's check waits for every warm-up check to end).
    #[tokio::test(start_paused = true)]
    async fn a_warmup_runs_checks_at_once_and_the_interval_one() {
        let mut ticker = Ticker::with_warmup(Duration::from_secs(60), warmup(6, 6, 3));
        let times = starts(&mut ticker, 8, |_| true).await;
        assert_eq!(times, [0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 62.0, 122.0]);
    }

    /// Issue 51 item 1: past its least, a warm-up ends once the checks settle it, and at
    /// its most whatever they say.
    #[tokio::test(start_paused = true)]
    async fn a_warmup_ends_when_settled_or_at_its_most() {
        let warm = |mut ticker: Ticker, settle_at: usize| async move {
            let stop = CancellationToken::new();
            let pace = ticker.pace();
            let mut n = 0;
            loop {
                let (_, permit) = ticker.tick(&stop).await.unwrap();
                if !ticker.warming() {
                    return n;
                }
                n += 1;
                if n == settle_at {
                    pace.settle(true);
                }
                drop(permit);
            }
        };
        let plan = |least, most, at_once| {
            Ticker::with_warmup(Duration::from_secs(60), warmup(least, most, at_once))
        };
        assert_eq!(warm(plan(2, 100, 1), 5).await, 5);
        assert_eq!(warm(plan(8, 100, 1), 5).await, 8, "never before its least");
        assert_eq!(warm(plan(2, 7, 2), 0).await, 7);
    }

    /// Issue 51 item 1 (review): a check still in flight when the others settled the
    /// evidence may undo it; the warm-up waits for it, and goes on.
    #[tokio::test(start_paused = true)]
    async fn a_check_in_flight_can_undo_a_settled_warmup() {
        let mut ticker = Ticker::with_warmup(Duration::from_secs(60), warmup(2, 100, 2));
        let stop = CancellationToken::new();
        let pace = ticker.pace();
        let (_, first) = ticker.tick(&stop).await.unwrap();
        let (_, second) = ticker.tick(&stop).await.unwrap();
        // The first settles it and ends; the second, still running, unsettles it at 5 s.
        pace.settle(true);
        drop(first);
        let late = Arc::clone(&pace);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            late.settle(false);
            drop(second);
        });
        let start = Instant::now();
        let (at, _third) = ticker.tick(&stop).await.unwrap();
        assert!(ticker.warming(), "the third is still a warm-up check");
        assert_eq!(at - start, Duration::from_secs(5));
    }

    /// Issue 51 item 3: a failed warm-up check is followed by one check at a time, after a
    /// back-off that doubles (0.5, 1, 2, 4 s at a 60 s interval, at most 4 s); a success
    /// brings back the checks at once.
    #[tokio::test(start_paused = true)]
    async fn failed_warmup_checks_back_off_one_at_a_time() {
        let mut ticker = Ticker::with_warmup(Duration::from_secs(60), warmup(40, 40, 2));
        // Checks 0..7 fail (a port refusing at first), the rest succeed.
        let times = starts(&mut ticker, 11, |i| i >= 7).await;
        // The two at 0 fail at 2 (two failures): the next waits for both, then 1 s; each
        // later one fails 2 s after it starts and the back-off doubles to its 4 s cap:
        // 3, 7, 13, 19, 25; the one at 31 succeeds at 33, and two run at once again.
        assert_eq!(
            times,
            [0.0, 0.0, 3.0, 7.0, 13.0, 19.0, 25.0, 31.0, 33.0, 33.0, 35.0]
        );
        assert_eq!(
            backoff(Duration::from_secs(60), 1),
            Duration::from_millis(500)
        );
        assert_eq!(backoff(Duration::from_secs(60), 9), Duration::from_secs(4));
        assert_eq!(
            backoff(Duration::from_secs(4), 1),
            Duration::from_secs(4) / 120
        );
    }
}
