//! When a finite run sends each request, as `vllm bench serve` schedules them: each gap is
//! drawn from Gamma(burstiness, 1/(rate·burstiness)) (Poisson at burstiness 1; every
//! request, the first included, waits one gap); without ramp-up the schedule is rescaled so
//! the last request goes out at exactly N/rate. A ramp-up changes the rate per request
//! index, linearly or exponentially, from a start to an end rate.

use rand::Rng;
use rand_distr::{Distribution, Gamma};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RampUp {
    Linear,
    Exponential,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Traffic {
    /// Requests per second; infinite sends everything at once.
    pub rate: f64,
    pub burstiness: f64,
    pub ramp_up: Option<(RampUp, f64, f64)>,
}

impl Traffic {
    pub fn validate(&self) -> Result<(), String> {
        // NaN must fail too, hence `is_nan() ||`.
        if self.rate.is_nan() || self.rate <= 0.0 {
            return Err(format!("--request-rate {} must be > 0 (or inf)", self.rate));
        }
        if self.burstiness.is_nan() || self.burstiness <= 0.0 {
            return Err(format!("--burstiness {} must be > 0", self.burstiness));
        }
        if let Some((strategy, start, end)) = self.ramp_up {
            if self.rate.is_finite() {
                return Err("--ramp-up-strategy replaces --request-rate; leave it at inf".into());
            }
            if !(start >= 0.0 && end >= start && end > 0.0) {
                return Err(format!(
                    "ramp-up from {start} to {end} RPS must satisfy 0 <= start <= end, end > 0"
                ));
            }
            if strategy == RampUp::Exponential && start == 0.0 {
                return Err("an exponential ramp-up cannot start at 0 RPS".into());
            }
        }
        Ok(())
    }

    /// The rate for request `i` of `n`.
    pub fn rate_at(&self, i: usize, n: usize) -> f64 {
        match self.ramp_up {
            None => self.rate,
            Some((strategy, start, end)) => {
                let progress = i as f64 / (n.saturating_sub(1)).max(1) as f64;
                let rate = match strategy {
                    RampUp::Linear => start + (end - start) * progress,
                    RampUp::Exponential => start * (end / start).powf(progress),
                };
                // A linear ramp from 0 would make the first gap infinite.
                rate.max(f64::MIN_POSITIVE.sqrt())
            }
        }
    }

    /// One gap at `rate`, in seconds.
    pub fn gap(&self, rate: f64, rng: &mut impl Rng) -> f64 {
        if rate.is_infinite() {
            return 0.0;
        }
        if self.burstiness.is_infinite() {
            return 1.0 / rate;
        }
        Gamma::new(self.burstiness, 1.0 / (rate * self.burstiness))
            .map_or(1.0 / rate, |g| g.sample(rng))
    }

    /// Send times in seconds from the start, for `n` requests.
    pub fn schedule(&self, n: usize, rng: &mut impl Rng) -> Vec<f64> {
        let mut at = 0.0;
        let mut times: Vec<f64> = (0..n)
            .map(|i| {
                at += self.gap(self.rate_at(i, n), rng);
                at
            })
            .collect();
        if self.ramp_up.is_none() && self.rate.is_finite() {
            if let Some(&last) = times.last().filter(|&&l| l > 0.0) {
                let scale = n as f64 / self.rate / last;
                times.iter_mut().for_each(|t| *t *= scale);
            }
        }
        times
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn traffic(rate: f64) -> Traffic {
        Traffic {
            rate,
            burstiness: 1.0,
            ramp_up: None,
        }
    }

    #[test]
    fn the_last_request_goes_out_at_n_over_rate() {
        let times = traffic(4.0).schedule(100, &mut StdRng::seed_from_u64(1));
        assert!((times[99] - 25.0).abs() < 1e-9);
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
        assert!(times[0] > 0.0, "the first request waits one gap too");
    }

    #[test]
    fn infinite_rate_sends_everything_at_once() {
        let times = traffic(f64::INFINITY).schedule(5, &mut StdRng::seed_from_u64(1));
        assert_eq!(times, vec![0.0; 5]);
    }

    #[test]
    fn ramp_ups_change_the_rate_per_request() {
        let linear = Traffic {
            rate: f64::INFINITY,
            burstiness: f64::INFINITY,
            ramp_up: Some((RampUp::Linear, 1.0, 5.0)),
        };
        assert_eq!(linear.rate_at(0, 5), 1.0);
        assert_eq!(linear.rate_at(2, 5), 3.0);
        assert_eq!(linear.rate_at(4, 5), 5.0);
        let times = linear.schedule(5, &mut StdRng::seed_from_u64(1));
        let gaps: Vec<f64> = std::iter::once(times[0])
            .chain(times.windows(2).map(|w| w[1] - w[0]))
            .collect();
        let expected = [1.0, 0.5, 1.0 / 3.0, 0.25, 0.2];
        assert!(
            gaps.iter().zip(expected).all(|(g, e)| (g - e).abs() < 1e-9),
            "{gaps:?}"
        );
        let exponential = Traffic {
            ramp_up: Some((RampUp::Exponential, 1.0, 16.0)),
            ..linear
        };
        assert!((exponential.rate_at(2, 5) - 4.0).abs() < 1e-9);
    }

    #[test]
    fn bad_traffic_is_rejected() {
        assert!(traffic(0.0).validate().is_err());
        let ramp_with_rate = Traffic {
            ramp_up: Some((RampUp::Linear, 1.0, 2.0)),
            ..traffic(3.0)
        };
        assert!(ramp_with_rate.validate().is_err());
        let exp_from_zero = Traffic {
            ramp_up: Some((RampUp::Exponential, 0.0, 2.0)),
            ..traffic(f64::INFINITY)
        };
        assert!(exp_from_zero.validate().is_err());
    }
}
