//! Native histogram buckets (docs/metrics.md, "Native histograms"): the sparse,
//! exponential buckets Prometheus's native histograms keep, computed here so a latency
//! histogram can carry them beside its classic buckets and its exemplars in one metric
//! (prometheus-client's own native histogram cannot carry exemplars).
//!
//! Bucket `i` of schema `s` holds the values in `(2^((i-1)/2^s), 2^(i/2^s)]`: at schema 3
//! each bucket is 2^(1/8) ≈ 1.0905 times the one below, so a quantile read from them lies
//! in the bucket of the true one: at most 9% off (±4.4% from the bucket's middle;
//! `tests/native_histograms.rs` measures it) while the observations span less than a factor
//! of 2^(max_buckets/8). Values at or below the zero threshold count in the zero bucket.
//! When more than `max_buckets` are populated the schema drops by one (neighbouring pairs
//! merge), as client_golang does, trading resolution for a bound: 19% at schema 2, 41% at 1,
//! for the rest of the series' life.

use std::collections::BTreeMap;

/// 2^(1/8) per bucket: the largest growth factor not above 1.1, which the Prometheus
/// client libraries default to (client_golang's `NativeHistogramBucketFactor`).
pub const DEFAULT_SCHEMA: i32 = 3;
/// 2^-128, the Prometheus client libraries' default zero threshold.
pub const DEFAULT_ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39;
/// The bucket limit client_java and client_python default to (client_golang leaves it to
/// the user); a latency spread from 100 µs to minutes fits in it at schema 3.
pub const DEFAULT_MAX_BUCKETS: usize = 160;
/// The coarsest schema Prometheus accepts.
const MIN_SCHEMA: i32 = -4;

#[derive(Clone, Debug, PartialEq)]
pub struct NativeBuckets {
    schema: i32,
    zero_threshold: f64,
    max_buckets: usize,
    zero_count: u64,
    positive: BTreeMap<i32, u64>,
}

impl Default for NativeBuckets {
    fn default() -> Self {
        Self::new(DEFAULT_SCHEMA, DEFAULT_ZERO_THRESHOLD, DEFAULT_MAX_BUCKETS)
    }
}

/// The upper bound of bucket `index` at `schema`.
pub fn upper_bound(schema: i32, index: i32) -> f64 {
    (f64::from(index) * (-f64::from(schema)).exp2()).exp2()
}

/// The bucket of `value` (> 0) at `schema`: the least `i` whose upper bound is `>= value`.
pub fn index(schema: i32, value: f64) -> i32 {
    let scale = f64::from(schema).exp2();
    // log2 is exact at powers of two and within an ulp elsewhere; the bounds decide.
    let mut i = (value.log2() * scale)
        .ceil()
        .clamp(f64::from(i32::MIN / 2), f64::from(i32::MAX / 2)) as i32;
    while upper_bound(schema, i - 1) >= value {
        i -= 1;
    }
    while upper_bound(schema, i) < value {
        i += 1;
    }
    i
}

impl NativeBuckets {
    pub fn new(schema: i32, zero_threshold: f64, max_buckets: usize) -> Self {
        Self {
            schema,
            zero_threshold,
            max_buckets,
            zero_count: 0,
            positive: BTreeMap::new(),
        }
    }

    pub fn schema(&self) -> i32 {
        self.schema
    }

    pub fn zero_threshold(&self) -> f64 {
        self.zero_threshold
    }

    pub fn zero_count(&self) -> u64 {
        self.zero_count
    }

    /// Every observation: the zero bucket's and the positive buckets'.
    pub fn count(&self) -> u64 {
        self.zero_count + self.positive.values().sum::<u64>()
    }

    /// Count `value`. Latencies are never negative; a negative or NaN value (which the
    /// probe never records) lands in the zero bucket rather than being lost from the count.
    pub fn observe(&mut self, value: f64) {
        if value.is_nan() || value <= self.zero_threshold {
            self.zero_count += 1;
            return;
        }
        *self.positive.entry(index(self.schema, value)).or_default() += 1;
        while self.positive.len() > self.max_buckets && self.schema > MIN_SCHEMA {
            self.halve();
        }
    }

    /// One schema coarser: bucket `i` becomes `ceil(i / 2)`.
    fn halve(&mut self) {
        let mut merged = BTreeMap::new();
        for (&i, &n) in &self.positive {
            *merged.entry((i + 1).div_euclid(2)).or_default() += n;
        }
        self.positive = merged;
        self.schema -= 1;
    }

    /// The populated buckets as Prometheus encodes them: spans `(offset, length)` of
    /// consecutive indices (the first offset absolute, each next one the gap after the
    /// previous span), and each count as the delta from the previous bucket's.
    pub fn spans_and_deltas(&self) -> (Vec<(i32, u32)>, Vec<i64>) {
        let mut spans: Vec<(i32, u32)> = Vec::new();
        let mut deltas = Vec::with_capacity(self.positive.len());
        let mut previous_index: Option<i32> = None;
        let mut previous_count = 0i64;
        for (&i, &n) in &self.positive {
            match previous_index {
                Some(p) if i == p + 1 => {
                    if let Some(last) = spans.last_mut() {
                        last.1 += 1;
                    }
                }
                Some(p) => spans.push((i - p - 1, 1)),
                None => spans.push((i, 1)),
            }
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            deltas.push(n - previous_count);
            previous_count = n;
            previous_index = Some(i);
        }
        (spans, deltas)
    }

    /// The `q` quantile as Prometheus's `histogram_quantile` reads native buckets
    /// (interpolating exponentially within a bucket), for tests and figures.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total: u64 = self.zero_count + self.positive.values().sum::<u64>();
        if total == 0 {
            return None;
        }
        let rank = q * total as f64;
        let mut seen = self.zero_count as f64;
        if rank <= seen {
            return Some(0.0);
        }
        for (&i, &n) in &self.positive {
            let (lower, upper) = (upper_bound(self.schema, i - 1), upper_bound(self.schema, i));
            if rank <= seen + n as f64 {
                let fraction = (rank - seen) / n as f64;
                return Some(lower * (upper / lower).powf(fraction));
            }
            seen += n as f64;
        }
        self.positive
            .keys()
            .next_back()
            .map(|&i| upper_bound(self.schema, i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_lands_in_the_bucket_whose_bounds_hold_it() {
        for schema in [-4, -1, 0, 1, 3, 8] {
            for value in [
                1e-4, 0.001, 0.0123, 0.18, 0.24, 0.5, 1.0, 2.0, 3.7, 90.0, 1e4,
            ] {
                let i = index(schema, value);
                assert!(upper_bound(schema, i - 1) < value, "{schema} {value} {i}");
                assert!(value <= upper_bound(schema, i), "{schema} {value} {i}");
            }
        }
        // Powers of two are upper bounds, inclusive.
        assert_eq!(index(0, 1.0), 0);
        assert_eq!(index(0, 2.0), 1);
        assert_eq!(index(3, 2.0), 8);
        assert_eq!(index(0, 0.5), -1);
    }

    #[test]
    fn the_issues_180_and_240_ms_fall_apart() {
        // Two TTFTs one classic bucket (le 0.25) joins: three or four native buckets apart.
        assert!(index(DEFAULT_SCHEMA, 0.24) - index(DEFAULT_SCHEMA, 0.18) >= 3);
    }

    #[test]
    fn spans_and_deltas_encode_gaps_and_changes() {
        let mut b = NativeBuckets::default();
        for v in [1.0, 1.0, 1.05, 2.0, 2.0, 2.0] {
            b.observe(v);
        }
        // Schema 3: 1.0 is bucket 0, 1.05 bucket 1, 2.0 bucket 8.
        assert_eq!(b.spans_and_deltas(), (vec![(0, 2), (6, 1)], vec![2, -1, 2]));
        b.observe(0.0);
        assert_eq!(b.zero_count(), 1);
    }

    #[test]
    fn too_many_buckets_lower_the_schema_and_keep_every_count() {
        let mut b = NativeBuckets::new(3, DEFAULT_ZERO_THRESHOLD, 20);
        let values: Vec<f64> = (0..2000).map(|i| 1e-4 * 1.01f64.powi(i)).collect();
        for &v in &values {
            b.observe(v);
        }
        assert!(b.positive.len() <= 20, "{}", b.positive.len());
        assert!(b.schema() < 3);
        assert_eq!(b.positive.values().sum::<u64>(), 2000);
        // Every value is still inside its (coarser) bucket.
        for &v in &values {
            assert!(b.positive.contains_key(&index(b.schema(), v)), "{v}");
        }
    }

    #[test]
    fn quantiles_are_within_the_schemas_error() {
        // Growth factor 2^(1/8): the exponential midpoint is off by at most 4.4%.
        for truth in [0.001, 0.01, 0.1, 1.0, 0.18, 0.24] {
            let mut b = NativeBuckets::default();
            for _ in 0..100 {
                b.observe(truth);
            }
            let p50 = b.quantile(0.5).unwrap();
            assert!((p50 / truth - 1.0).abs() < 0.045, "{truth}: {p50}");
        }
    }
}
