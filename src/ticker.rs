//! The pace of the checks that run beside a target's workload (the canary, the prefix-cache
//! check): one every interval, the first at a random offset within it so a fleet's replicas
//! are not all checked at once, and never two at a time: a check still running when the
//! next is due delays it (a slow server is not sent more checks than it can answer).

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
}

impl Ticker {
    pub fn new(interval: Duration) -> Self {
        let offset = rand::rng().random_range(0.0..interval.as_secs_f64());
        Self {
            interval,
            next: Instant::now() + Duration::from_secs_f64(offset),
            busy: Arc::new(Semaphore::new(1)),
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
        self.next = now.max(self.next) + self.interval;
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
}
