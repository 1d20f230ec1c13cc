//! `max_output_tokens_per_hour` (docs/configuration.md): the max_tokens of every request a
//! target sent in the last hour, its workload's probes and its prefix-cache check's pairs
//! alike, so the key bounds what the target costs whatever sends. Counting what was asked
//! for (not what came back) keeps the bound strict before answers arrive. One per target,
//! shared by the tasks that send for it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// A sliding hour of requested output tokens; clones share it.
#[derive(Clone, Debug)]
pub struct Budget(Arc<Mutex<Window>>);

#[derive(Debug)]
struct Window {
    per_hour: u64,
    spent: VecDeque<(Instant, u64)>,
    total: u64,
}

impl Budget {
    const WINDOW: Duration = Duration::from_secs(3600);

    pub fn new(per_hour: u64) -> Self {
        Self(Arc::new(Mutex::new(Window {
            per_hour,
            spent: VecDeque::new(),
            total: 0,
        })))
    }

    /// Spend `tokens` at `now` if the last hour leaves room for them.
    pub fn try_spend(&self, now: Instant, tokens: u32) -> bool {
        // A poisoned lock only means another sender panicked mid-update of plain numbers.
        let mut w = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while let Some(&(at, n)) = w.spent.front() {
            if now.saturating_duration_since(at) < Self::WINDOW {
                break;
            }
            w.total -= n;
            w.spent.pop_front();
        }
        let tokens = u64::from(tokens);
        if w.total + tokens > w.per_hour {
            return false;
        }
        w.total += tokens;
        w.spent.push_back((now, tokens));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_a_sliding_hour_of_requested_tokens() {
        let t0 = Instant::now();
        let budget = Budget::new(100);
        assert!(budget.try_spend(t0, 60));
        assert!(
            !budget.try_spend(t0 + Duration::from_secs(10), 60),
            "60 + 60 > 100 within the hour"
        );
        assert!(budget.try_spend(t0 + Duration::from_secs(10), 40));
        assert!(!budget.try_spend(t0 + Duration::from_secs(3599), 1));
        assert!(
            budget.try_spend(t0 + Duration::from_secs(3600), 60),
            "the first 60 left the window"
        );
    }

    #[test]
    fn clones_spend_from_one_hour() {
        let t0 = Instant::now();
        let workload = Budget::new(10);
        let check = workload.clone();
        assert!(workload.try_spend(t0, 8));
        assert!(
            !check.try_spend(t0, 8),
            "the check sees the workload's spending"
        );
        assert!(check.try_spend(t0, 2));
    }
}
