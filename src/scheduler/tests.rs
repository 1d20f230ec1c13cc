use super::*;

fn stats(gaps: &[f64]) -> (f64, f64) {
    let n = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / n;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt() / mean)
}

fn sample(rate: f64, burstiness: f64) -> Vec<f64> {
    let mut arrivals = Arrivals::new(rate, burstiness, 42).unwrap();
    (0..20_000)
        .map(|_| arrivals.next_gap().as_secs_f64())
        .collect()
}

#[test]
fn poisson_gaps_have_the_configured_mean_and_unit_cv() {
    let (mean, cv) = stats(&sample(4.0, 1.0));
    assert!((mean - 0.25).abs() < 0.01, "mean gap {mean}");
    assert!((cv - 1.0).abs() < 0.05, "coefficient of variation {cv}");
}

#[test]
fn burstiness_changes_regularity_not_rate() {
    // Gamma(shape k): CV = 1/sqrt(k).
    let (mean, cv) = stats(&sample(2.0, 4.0));
    assert!((mean - 0.5).abs() < 0.02, "mean gap {mean}");
    assert!((cv - 0.5).abs() < 0.03, "cv {cv}");
    let (mean, cv) = stats(&sample(2.0, 0.25));
    assert!((mean - 0.5).abs() < 0.04, "mean gap {mean}");
    assert!((cv - 2.0).abs() < 0.15, "cv {cv}");
}

#[test]
fn start_offset_is_within_one_mean_gap() {
    let mut arrivals = Arrivals::new(0.5, 1.0, 1).unwrap();
    for _ in 0..1000 {
        assert!(arrivals.start_offset() < Duration::from_secs(2));
    }
}

#[test]
fn seeds_repeat_per_target_and_differ_between_targets() {
    assert_eq!(target_seed(Some(7), "a"), target_seed(Some(7), "a"));
    assert_ne!(target_seed(Some(7), "a"), target_seed(Some(7), "b"));
    assert_ne!(target_seed(Some(7), "a"), target_seed(Some(8), "a"));
    let gaps = |seed| {
        let mut a = Arrivals::new(1.0, 1.0, seed).unwrap();
        (a.next_gap(), a.next_gap())
    };
    assert_eq!(gaps(3), gaps(3));
}

#[test]
fn the_budget_is_a_sliding_hour_of_requested_tokens() {
    let t0 = Instant::now();
    let mut budget = Budget::new(100);
    assert!(budget.try_spend(t0, 60));
    assert!(
        !budget.try_spend(t0 + Duration::from_secs(10), 60),
        "160 > 100"
    );
    assert!(budget.try_spend(t0 + Duration::from_secs(10), 40));
    assert!(!budget.try_spend(t0 + Duration::from_secs(3599), 1));
    assert!(
        budget.try_spend(t0 + Duration::from_secs(3600), 60),
        "the first 60 left the window"
    );
}
