//! The series a target's life makes and removes: a reload continues them, removal takes
//! them all, and nothing that ends after the target left (a probe, a canary check) brings
//! a lazily made series back.

use super::*;

#[test]
fn reattaching_a_target_continues_its_series() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let first = metrics.target(&target("t"));
    first.record(&Arc::new("r".into()), &Err(ProbeError::EmptyResponse));
    let again = metrics.target(&target("t"));
    again.record(&Arc::new("r".into()), &Err(ProbeError::EmptyResponse));
    let text = exposition(&registry, Format::Text);
    assert!(text.contains(&format!("inferprobe_requests_total{{{LABELS}}} 2\n")));
}

#[test]
fn families_remove_members() {
    let family = LabeledFamily::<TargetLabels, Counter>::default();
    let a = TargetLabels::new(vec![("target".into(), "a".into())]);
    let b = TargetLabels::new(vec![("target".into(), "b".into())]);
    family.get_or_insert(a.clone(), Counter::default).inc();
    family.get_or_insert(b.clone(), Counter::default);
    assert_eq!(family.len(), 2);
    assert!(family.remove(&a));
    assert!(!family.remove(&a));
    family.retain(|labels| labels.get("target") != Some("b"));
    assert!(family.is_empty());
}

/// Cached prompt tokens (issue 35, item 1): no series until the server reports them, then
/// every report counted, canary checks' too; a reported 0 makes the series.
#[test]
fn cached_prompt_tokens_have_no_series_until_reported() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target("t"));
    let series = format!("inferprobe_prompt_cached_tokens_total{{{LABELS}}}");
    t.record(&Arc::new("r1".into()), &Ok(measurement()));
    let text = exposition(&registry, Format::Text);
    assert!(
        !text.contains("inferprobe_prompt_cached_tokens_total{"),
        "{text}"
    );
    let reported = |cached| Measurement {
        cached_prompt_tokens: Some(cached),
        ..measurement()
    };
    t.record(&Arc::new("r2".into()), &Ok(reported(0)));
    let text = exposition(&registry, Format::Text);
    assert!(text.contains(&format!("{series} 0\n")), "{text}");
    t.record(&Arc::new("r3".into()), &Ok(reported(8)));
    let text = exposition(&registry, Format::Text);
    assert!(text.contains(&format!("{series} 8\n")), "{text}");
    // A second handle on the same target (a reload) adds to the same series.
    let again = metrics.target(&target("t"));
    again.record(&Arc::new("r4".into()), &Ok(reported(4)));
    let text = exposition(&registry, Format::Text);
    assert!(text.contains(&format!("{series} 12\n")), "{text}");
    metrics.remove_target(t.labels());
    let text = exposition(&registry, Format::Text);
    assert!(
        !text.contains("inferprobe_prompt_cached_tokens_total{"),
        "{text}"
    );
}

/// Cache writes and reasoning tokens are counted alike: no series until a server reports
/// them, then every report added; the answer's TTFT histogram is made on the first answer
/// that came after reasoning and then observes every answer; all go with the target.
#[test]
fn cache_writes_reasoning_and_the_answer_ttft_have_no_series_until_reported() {
    use crate::record::AnswerParts;
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target("t"));
    let families = [
        "inferprobe_prompt_cache_write_tokens_total{",
        "inferprobe_reasoning_tokens_total{",
        "inferprobe_time_to_first_answer_token_seconds_count{",
    ];
    let answered = |parts: AnswerParts| Measurement {
        answer: parts,
        ..measurement()
    };
    let plain = AnswerParts {
        ttft: Some(Duration::from_millis(30)),
        ..AnswerParts::default()
    };
    t.record(&Arc::new("r1".into()), &Ok(answered(plain)));
    let text = exposition(&registry, Format::Text);
    for family in families {
        assert!(!text.contains(family), "{family}: {text}");
    }
    let reasoned = AnswerParts {
        reasoning_tokens: Some(12),
        cache_write_tokens: Some(1024),
        ttft: Some(Duration::from_millis(300)),
        reasoned: true,
    };
    t.record(&Arc::new("r2".into()), &Ok(answered(reasoned)));
    t.record(&Arc::new("r3".into()), &Ok(answered(plain)));
    let text = exposition(&registry, Format::Text);
    assert!(
        text.contains(&format!(
            "inferprobe_prompt_cache_write_tokens_total{{{LABELS}}} 1024\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "inferprobe_reasoning_tokens_total{{{LABELS}}} 12\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "inferprobe_time_to_first_answer_token_seconds_count{{{LABELS}}} 2\n"
        )),
        "{text}"
    );
    metrics.remove_target(t.labels());
    let text = exposition(&registry, Format::Text);
    for family in families {
        assert!(!text.contains(family), "{family}: {text}");
    }
}

/// A probe that ends after its target was removed (discovery dropped the pod mid-request)
/// must not bring the lazily made series back: nothing would remove it again. The churn
/// test (tests/discovery_churn.rs) found 3 such series left after 1,000 pods came and went.
#[test]
fn a_probe_ending_after_its_target_left_makes_no_series() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = metrics.target(&target("t"));
    metrics.remove_target(t.labels());
    let reported = Measurement {
        cached_prompt_tokens: Some(5),
        ..measurement()
    };
    t.record(&Arc::new("late".into()), &Ok(reported));
    let text = exposition(&registry, Format::Text);
    assert!(!text.contains("target=\"t\""), "{text}");
}

/// The same for the canary's series made at record time (a structured check's capability
/// and reason, the baseline comparison): a check that ends after its replica left makes
/// none of them again.
#[tokio::test]
async fn a_canary_check_ending_after_its_target_left_makes_no_series() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = canary_target(&metrics);
    metrics.remove_target(t.labels());
    let verdict = CanaryVerdict {
        result: CheckResult::InvalidOutput,
        position: None,
        drift: None,
        baseline: vec![("v1".into(), crate::metrics::PairResult::Match)],
        known: Some(CheckResult::Match),
        structured: Some((
            crate::structure::Capability::Json,
            Some(InvalidReason::Truncated),
        )),
    };
    let v1 = ["v1".to_owned()];
    t.open_canary_baselines(&crate::metrics::Pairs {
        compared: &v1,
        present: &v1,
        grace: std::time::Duration::from_secs(600),
    });
    t.record_canary(&Ok(measurement()), &verdict).await;
    let text = exposition(&registry, Format::Text);
    assert!(!text.contains("target=\"t\""), "{text}");
}

/// Issue 51 review: a pair's series outlive a flap of its other group (the counts a gate is
/// deciding on stay), go once the group has been gone for the grace, and go at once when the
/// group is still there but no longer compared (cut by `MAX_OTHERS`).
#[tokio::test(start_paused = true)]
async fn a_pair_outlives_a_flap_of_its_other_group_but_not_its_grace() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let t = canary_target(&metrics);
    let grace = std::time::Duration::from_secs(600);
    let open = |compared: &[&str], present: &[&str]| {
        let compared: Vec<String> = compared.iter().map(|g| (*g).to_owned()).collect();
        let present: Vec<String> = present.iter().map(|g| (*g).to_owned()).collect();
        t.open_canary_baselines(&crate::metrics::Pairs {
            compared: &compared,
            present: &present,
            grace,
        });
    };
    let pairs = |baseline: &str| {
        exposition(&registry, Format::Text)
            .lines()
            .filter(|l| {
                l.starts_with("inferprobe_canary_baseline_checks_total{")
                    && l.contains(&format!("baseline=\"{baseline}\""))
            })
            .count()
    };
    open(&["v1", "v2"], &["v1", "v2"]);
    assert_eq!((pairs("v1"), pairs("v2")), (4, 4));
    // v1 flaps: gone from the pool for a while, its series stay.
    open(&["v2"], &["v2"]);
    tokio::time::advance(grace / 2).await;
    open(&["v2"], &["v2"]);
    assert_eq!(pairs("v1"), 4, "a flap keeps the counts");
    open(&["v1", "v2"], &["v1", "v2"]);
    // Gone for good: dropped once the grace is over.
    open(&["v2"], &["v2"]);
    tokio::time::advance(grace).await;
    open(&["v2"], &["v2"]);
    assert_eq!(pairs("v1"), 0);
    // Still there, no longer compared: dropped at once.
    open(&["v1"], &["v1", "v2"]);
    assert_eq!((pairs("v1"), pairs("v2")), (4, 0));
}

/// One target `t` with the canary on, its series on `metrics`.
fn canary_target(metrics: &Metrics) -> TargetMetrics {
    let raw = RawConfig {
        targets: vec![RawTarget {
            name: Some("t".into()),
            url: Some("http://127.0.0.1:1".into()),
            model: Some("m".into()),
            backend: Some("openai-chat".into()),
            canary: Some(crate::config::RawCanary::default()),
            ..RawTarget::default()
        }],
        ..RawConfig::default()
    };
    metrics.target(&validate(&raw).unwrap().targets[0])
}

/// Issue 57: a target's sampler series carry its replica's `group` as its canary checks
/// do (a rollout gate selects both alike), and go with the target.
#[test]
fn sampler_series_carry_the_canary_group() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let raw = RawConfig {
        labels: [("version".to_owned(), "v2".to_owned())].into(),
        targets: vec![RawTarget {
            name: Some("t".into()),
            url: Some("http://127.0.0.1:1".into()),
            model: Some("m".into()),
            backend: Some("openai-chat".into()),
            canary: Some(crate::config::RawCanary {
                group_by: Some(vec!["version".into()]),
                ..Default::default()
            }),
            sampler: Some(crate::config::RawSampler::default()),
            ..RawTarget::default()
        }],
        ..RawConfig::default()
    };
    let target = Arc::clone(&validate(&raw).unwrap().targets[0]);
    let series = metrics.target(&target);
    series.sampler().expect("the sampler's series").round("ok");
    let text = exposition(&registry, Format::Text);
    let ok = text
        .lines()
        .find(|l| l.starts_with("inferprobe_sampler_checks_total{") && l.contains("result=\"ok\""))
        .expect("a round's series");
    assert!(ok.contains(r#"group="v2""#) && ok.ends_with(" 1"), "{ok}");
    assert!(
        text.lines()
            .filter(|l| l.starts_with("inferprobe_sampler_") && !l.starts_with('#'))
            .all(|l| l.contains(r#"group="v2""#)),
        "{text}"
    );
    metrics.remove_target(&Metrics::labels_of(&target));
    let text = exposition(&registry, Format::Text);
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("inferprobe_sampler_") && !l.starts_with('#')),
        "{text}"
    );
}
