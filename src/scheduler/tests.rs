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

/// Run `schedule` as the scheduler's loop does until `until`, returning the fire times
/// and the arrivals reported missed.
async fn fire_until(schedule: &mut Schedule, until: Instant) -> (Vec<Instant>, u64) {
    let (mut fired, mut missed) = (Vec::new(), 0);
    while schedule.next() < until {
        sleep_until(schedule.next()).await;
        let now = Instant::now();
        fired.push(now);
        missed += schedule.fire(now).missed;
    }
    (fired, missed)
}

#[tokio::test(start_paused = true)]
async fn a_pause_of_any_length_ends_with_one_arrival_then_a_fresh_gap() {
    const RATE: f64 = 100.0;
    let second = Duration::from_secs(1);
    for pause in [
        Duration::from_millis(900),
        Duration::from_secs(3),
        second * 3600,
    ] {
        let t0 = Instant::now();
        let mut schedule = Schedule::new(Arrivals::new(RATE, 1.0, 9).unwrap(), RATE, t0);
        let (before, missed) = fire_until(&mut schedule, t0 + second).await;
        assert_eq!(missed, 0, "no pause yet");
        // The process is stopped: the clock runs on, the loop does not.
        tokio::time::advance(pause).await;
        let resumed = Instant::now();
        let (after, missed) = fire_until(&mut schedule, resumed + second).await;
        assert_eq!(after[0], resumed, "the overdue arrival is sent on resume");
        // A burst of missed arrivals would all go out at the resume instant.
        let burst = after.iter().filter(|&&t| t == resumed).count();
        assert_eq!(
            burst, 1,
            "{pause:?}: one arrival, not a burst of missed ones"
        );
        assert!(after[1] > resumed, "then a fresh gap");
        // The pause swallowed about rate × pause arrivals; they are reported missed.
        let expected = pause.as_secs_f64() * RATE;
        let spread = 5.0 * expected.sqrt();
        assert!(
            (missed as f64 - expected).abs() <= spread + 2.0,
            "{pause:?}: {missed} missed, expected about {expected}"
        );
        // Before and after, the rate is the configured one.
        for fired in [&before, &after] {
            let n = fired.len() as f64;
            assert!(
                (n - RATE).abs() < 5.0 * RATE.sqrt(),
                "{n} arrivals in a second"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn lateness_within_scheduling_noise_is_caught_up_not_skipped() {
    // Bursty arrivals at 200/s: many gaps are far shorter than a timer tick. A 30 ms
    // hiccup makes a few arrivals late; they are all sent, none reported missed.
    const RATE: f64 = 200.0;
    let t0 = Instant::now();
    let mut schedule = Schedule::new(Arrivals::new(RATE, 0.25, 5).unwrap(), RATE, t0);
    let (mut fired, mut missed) = fire_until(&mut schedule, t0 + Duration::from_secs(5)).await;
    for _ in 0..50 {
        tokio::time::advance(Duration::from_millis(30)).await;
        let (more, skipped) =
            fire_until(&mut schedule, Instant::now() + Duration::from_millis(100)).await;
        fired.extend(more);
        missed += skipped;
    }
    assert_eq!(missed, 0);
    let span = (*fired.last().unwrap() - t0).as_secs_f64();
    let rate = fired.len() as f64 / span;
    assert!(
        (rate - RATE).abs() < 0.1 * RATE,
        "rate {rate} over {span} s"
    );
}
