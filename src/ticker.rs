//! The pace of the checks that run beside a target's workload (the canary, the prefix-cache
//! check): one every interval, the first at a random offset within it so a fleet's replicas
//! are not all checked at once, and never two at a time: a check still running when the
//! next is due delays it (a slow server is not sent more checks than it can answer).
//!
//! A **warm-up** may come first: that many checks back to back (each as soon as the last
//! ended), for the canary of a replica just found, so a rollout's gate gets its verdict in
//! seconds rather than after ten intervals; then the interval's pace.

use std::sync::Arc;
use std::time::Duration;

use rand::RngExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
pub struct Ticker {
    interval: Duration,
    next: Instant,
    busy: Arc<Semaphore>,
    /// Checks still to run back to back.
    warmup: usize,
}

impl Ticker {
    pub fn new(interval: Duration) -> Self {
        Self::with_warmup(interval, 0)
    }

    /// `warmup` checks back to back first, then one per `interval`.
    pub fn with_warmup(interval: Duration, warmup: usize) -> Self {
        let offset = if warmup > 0 {
            0.0
        } else {
            rand::rng().random_range(0.0..interval.as_secs_f64())
        };
        Self {
            interval,
            next: Instant::now() + Duration::from_secs_f64(offset),
            busy: Arc::new(Semaphore::new(1)),
            warmup,
        }
    }

    /// Wait until the next check is due and the last one has ended: the time it starts,
    /// and the permit that check holds until it ends. None once `stop` is cancelled.
    pub async fn tick(
        &mut self,
        stop: &CancellationToken,
    ) -> Option<(Instant, OwnedSemaphorePermit)> {
        tokio::select! {
            () = stop.cancelled() => return None,
            () = sleep_until(self.next) => {}
        }
        let permit = tokio::select! {
            () = stop.cancelled() => return None,
            permit = Arc::clone(&self.busy).acquire_owned() => permit.ok()?,
        };
        let now = Instant::now();
        if self.warmup > 0 {
            self.warmup -= 1;
            // The next is due at once (it still waits for this one to end); after the
            // last, the interval's pace.
            self.next = if self.warmup > 0 {
                now
            } else {
                now + self.interval
            };
        } else {
            self.next = now.max(self.next) + self.interval;
        }
        Some((now, permit))
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

    /// Issue 41 item 2: a warm-up's checks run back to back (one at a time, each as soon
    /// as the last ended), then the interval's pace.
    #[tokio::test(start_paused = true)]
    async fn a_warmup_runs_back_to_back_then_paces() {
        let mut ticker = Ticker::with_warmup(Duration::from_secs(60), 3);
        let stop = CancellationToken::new();
        let start = Instant::now();
        let mut times = Vec::new();
        for _ in 0..5 {
            let (at, permit) = ticker.tick(&stop).await.unwrap();
            times.push(at - start);
            // Each check takes 2 s.
            tokio::time::sleep(Duration::from_secs(2)).await;
            drop(permit);
        }
        let secs: Vec<u64> = times.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [0, 2, 4, 64, 124]);
    }
}
