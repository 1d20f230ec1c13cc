//! The values series are built from: histogram buckets (vLLM's, so client and server
//! views line up, plus each SLO threshold as an exact bound) and the bounded label values
//! the exporter adds to a target's labels (`reason`, `le`).

/// Buckets holding every bound of vLLM's server-side histograms, so client and server
/// views line up (vllm/v1/metrics/buckets.py in vLLM 0.32).
pub const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// TPOT and ITL: every bound of vLLM 0.32's `inter_token_latency` family (which its
/// `inter_token_latency_seconds` and `request_time_per_output_token_seconds` share; it
/// starts at 10 ms), and below it 1, 2, 3, 4, 5, 6 and 8 ms: a fast GPU decodes a small
/// model at 3-8 ms per token, speculative decoding at 1-3 ms per accepted token, and with
/// 10 ms as the first bound every such probe would land in one bucket. SGLang's ITL bounds
/// below 10 ms (2, 4, 6, 8 ms) are among them.
pub const TOKEN_LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.008, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
    0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
];
pub const E2EL_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];
/// 1-2-5 steps, as vLLM's token-count histograms.
pub const TOKEN_COUNT_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 20000.0,
    50000.0, 100000.0,
];

/// Why an arrival was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SkipReason {
    /// `max_concurrency` probes were already in flight.
    Concurrency,
    /// `max_output_tokens_per_hour` was spent.
    Budget,
    /// It fell due while the process was paused or starved, behind an arrival that was
    /// itself late (see `scheduler`): sending them all at once would be a burst.
    Late,
}

impl SkipReason {
    pub const ALL: [SkipReason; 3] = [Self::Concurrency, Self::Budget, Self::Late];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Concurrency => "concurrency",
            Self::Budget => "budget",
            Self::Late => "late",
        }
    }
}

/// A bucket bound as a label, encoded exactly as the histograms encode `le`, so rules can
/// join an SLO threshold to its bucket.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Le(pub f64);

impl Eq for Le {}

impl PartialOrd for Le {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Le {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl prometheus_client::encoding::EncodeLabelValue for Le {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder,
    ) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }
}

/// `defaults` with `threshold` added as an exact bound.
pub(super) fn with_bound(defaults: &[f64], threshold: Option<std::time::Duration>) -> Vec<f64> {
    let mut buckets = defaults.to_vec();
    if let Some(t) = threshold {
        buckets.push(t.as_secs_f64());
    }
    buckets.sort_by(f64::total_cmp);
    buckets.dedup();
    buckets
}

impl prometheus_client::encoding::EncodeLabelValue for SkipReason {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder,
    ) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vLLM 0.32's `INTER_TOKEN_LATENCY_BUCKETS` (vllm/v1/metrics/buckets.py).
    const VLLM_INTER_TOKEN_LATENCY: [f64; 19] = [
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0,
    ];

    fn bucket_of(buckets: &[f64], value: f64) -> usize {
        buckets
            .iter()
            .position(|&b| value <= b)
            .unwrap_or(buckets.len())
    }

    #[test]
    fn token_latency_keeps_vllms_bounds_and_resolves_a_fast_gpu() {
        for bound in VLLM_INTER_TOKEN_LATENCY {
            assert!(
                TOKEN_LATENCY_BUCKETS.contains(&bound),
                "vLLM's {bound} is missing"
            );
        }
        // SGLang's ITL bounds below 10 ms.
        for bound in [0.002, 0.004, 0.006, 0.008] {
            assert!(
                TOKEN_LATENCY_BUCKETS.contains(&bound),
                "SGLang's {bound} is missing"
            );
        }
        // H100-class decode (3-8 ms) and speculative decoding (1-3 ms per accepted token)
        // land in buckets of their own, not all in the first.
        let fast = [0.0012, 0.0025, 0.0035, 0.0045, 0.0055, 0.0075, 0.0095];
        let buckets: std::collections::BTreeSet<usize> = fast
            .iter()
            .map(|&v| bucket_of(TOKEN_LATENCY_BUCKETS, v))
            .collect();
        assert_eq!(buckets.len(), fast.len(), "{buckets:?}");
        assert!(TOKEN_LATENCY_BUCKETS.windows(2).all(|w| w[0] < w[1]));
    }
}
