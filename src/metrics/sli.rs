//! The SLI counters: per target and per latency threshold its `slo` sets, how many
//! observations there were and how many were over the threshold. The SLO rules read these
//! and nothing else, so they hold whatever buckets a scrape carries: a Prometheus that
//! ingests only the native histogram (`[metrics] histograms = "native"`, or `both` on
//! Prometheus 2.x, which keeps the native one) has no `le` bucket to read, and
//! `histogram_fraction` takes its bounds as scalars (one per rule, not one per target) and
//! interpolates inside an exponential bucket. Counted here, the SLI is exact in every mode.
//! docs/metrics.md ("SLI counters").

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;

/// One threshold's pair of counters.
#[derive(Clone, Debug)]
pub struct Sli {
    limit: Duration,
    observed: Counter,
    slow: Counter,
}

impl Sli {
    pub fn new(limit: Duration, observed: Counter, slow: Counter) -> Self {
        Self {
            limit,
            observed,
            slow,
        }
    }

    /// Count `count` observations of `value`; over the limit they are slow (at the limit
    /// they are within, as the classic bucket `le` = limit counts them).
    pub fn count(&self, value: Duration, count: u64) {
        self.observed.inc_by(count);
        if value > self.limit {
            self.slow.inc_by(count);
        }
    }
}

/// The counters of each threshold a target's SLO sets (`None` where it sets none).
#[derive(Clone, Debug, Default)]
pub struct Slis {
    pub ttft: Option<Sli>,
    pub tpot: Option<Sli>,
    pub itl: Option<Sli>,
    pub e2el: Option<Sli>,
}

impl Slis {
    pub fn count(sli: &Option<Sli>, value: Duration, count: u64) {
        if let Some(sli) = sli {
            sli.count(value, count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_limit_is_within_and_over_it_is_slow() {
        let (observed, slow) = (Counter::default(), Counter::default());
        let sli = Sli::new(Duration::from_millis(500), observed.clone(), slow.clone());
        sli.count(Duration::from_millis(499), 1);
        sli.count(Duration::from_millis(500), 1);
        sli.count(Duration::from_micros(500_001), 3);
        assert_eq!((observed.get(), slow.get()), (5, 3));
    }
}
