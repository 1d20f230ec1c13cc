//! The calibration test (docs/sampling.md, "Calibration"): under a correct sampler, each
//! sampled token's randomized PIT is uniform on [0, 1) and independent of the ones before
//! it, given the prefix, whatever the distribution it was drawn from. A window of them is
//! binned and tested with Pearson's χ²: a wrong temperature, an ignored truncation, forced
//! greedy decoding and a stuck or correlated random generator all pile the PITs into some
//! bins.
//!
//! The false-alarm rate of one window is `alpha` (the χ² tail, measured in the tests); the
//! warning needs two windows in a row, so a healthy replica raises it with probability
//! about `alpha²` per window.

/// Equal-width bins of the PIT: 25.6 expected per bin in a default window, well above the
/// 5 the χ² approximation needs.
pub const BINS: usize = 10;

/// PITs of one replica, until a window is full.
#[derive(Clone, Debug)]
pub struct Window {
    counts: [u32; BINS],
    size: u32,
    alpha: f64,
}

/// A full window's test.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tested {
    /// Pearson's statistic over the bins.
    pub chi2: f64,
    /// Its tail probability with `BINS − 1` degrees of freedom.
    pub p_value: f64,
    pub miscalibrated: bool,
}

impl Window {
    pub fn new(size: u32, alpha: f64) -> Self {
        Self {
            counts: [0; BINS],
            size: size.max(BINS as u32),
            alpha,
        }
    }

    /// PITs in the window so far.
    pub fn len(&self) -> u32 {
        self.counts.iter().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Add a PIT; when the window is full, test it and start the next.
    pub fn push(&mut self, u: f64) -> Option<Tested> {
        let bin = ((u.clamp(0.0, 1.0) * BINS as f64) as usize).min(BINS - 1);
        self.counts[bin] += 1;
        if self.len() < self.size {
            return None;
        }
        let chi2 = statistic(&self.counts);
        self.counts = [0; BINS];
        let p_value = tail(chi2, (BINS - 1) as f64);
        Some(Tested {
            chi2,
            p_value,
            miscalibrated: p_value < self.alpha,
        })
    }
}

/// Pearson's χ² of `counts` against equal expected counts.
pub fn statistic(counts: &[u32]) -> f64 {
    let n: f64 = counts.iter().map(|&c| f64::from(c)).sum();
    if n == 0.0 {
        return 0.0;
    }
    let expected = n / counts.len() as f64;
    counts
        .iter()
        .map(|&c| (f64::from(c) - expected).powi(2) / expected)
        .sum()
}

/// P(χ²_df ≥ x): the regularized upper incomplete gamma Q(df/2, x/2).
pub fn tail(x: f64, df: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) || df <= 0.0 {
        return 1.0;
    }
    puruspe::gammq(df / 2.0, x / 2.0).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn the_tail_matches_the_tables() {
        // χ²(9): the 0.05, 0.001 and 1e-4 critical values.
        assert!((tail(16.919, 9.0) - 0.05).abs() < 1e-4);
        assert!((tail(27.877, 9.0) - 0.001).abs() < 1e-5);
        assert!((tail(33.720, 9.0) - 1e-4).abs() < 2e-6);
        assert_eq!(tail(0.0, 9.0), 1.0);
        assert_eq!(tail(f64::NAN, 9.0), 1.0);
    }

    #[test]
    fn uniform_windows_fail_at_about_alpha_and_piled_ones_always() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let alpha = 0.01;
        let mut window = Window::new(256, alpha);
        let (mut windows, mut failed) = (0u32, 0u32);
        while windows < 20_000 {
            if let Some(t) = window.push(rng.random::<f64>()) {
                windows += 1;
                failed += u32::from(t.miscalibrated);
            }
        }
        let rate = f64::from(failed) / f64::from(windows);
        eprintln!("{failed} of {windows} uniform windows failed at alpha {alpha}: {rate}");
        // 200 expected; four standard deviations either way.
        assert!(
            (rate - alpha).abs() < 4.0 * (alpha / 20_000.0).sqrt(),
            "{rate}"
        );
        // Greedy decoding's PITs lie below the top token's probability.
        let mut window = Window::new(256, 1e-4);
        let tested = (0..256)
            .find_map(|_| window.push(rng.random::<f64>() * 0.3))
            .expect("a full window");
        assert!(tested.miscalibrated && tested.p_value < 1e-30, "{tested:?}");
    }
}
