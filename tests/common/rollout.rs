//! The shipped rollout templates (config/rollouts/) run as their controllers run them:
//! [`prove`] puts a new version beside a stable one in three file_sd pools
//! (one grouped by template hash for Argo, two grouped by Flagger's renamed `app` label, one
//! per namespace), lets a real Prometheus scrape the daemon, and runs every query every
//! second from the first second of the analysis, judged by [`super::gates`].
//!
//! With simulators time is scaled 15 to 1 ([`Gate::scale`]) so an analysis fits in a test:
//! the canary checks a replica every 4 s (the default 60 s) after its warm-up, Prometheus
//! scrapes every second (15 s), Argo measures every 2 s (the template's 30s), Flagger's
//! analysis ticks every second (the documented 15s), and two minutes are 8 s. Real servers
//! run unscaled: their answers take the time they take.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::gates::{Canary, Phase};
use super::prometheus::Prometheus;
use super::start_daemon;

mod analysis;
pub use analysis::Analysis;

/// A pod's file_sd labels.
pub type Labels = Vec<(&'static str, String)>;

/// A file_sd file of `(host:port, labels)` members, each its own pod.
pub fn write_pool(path: &Path, members: &[(String, Labels)]) {
    let groups: Vec<serde_json::Value> = members
        .iter()
        .map(|(address, labels)| {
            let labels: serde_json::Map<_, _> = labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_str().into()))
                .collect();
            serde_json::json!({ "targets": [address], "labels": labels })
        })
        .collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::Value::Array(groups).to_string()).unwrap();
    std::fs::rename(&tmp, path).unwrap(); // whole, as a real file_sd writer must
}

/// A pool's stable replicas at `addresses`, the `i`-th labelled `pod(i)`, written to `file`.
pub fn stable_pool(
    file: &Path,
    addresses: impl IntoIterator<Item = String>,
    pod: impl Fn(usize) -> Labels,
) -> Vec<(String, Labels)> {
    let members: Vec<_> = addresses
        .into_iter()
        .enumerate()
        .map(|(i, address)| (address, pod(i)))
        .collect();
    write_pool(file, &members);
    members
}

/// A prompts file's line: `prompt`, its answer judged by the regex `expect`.
pub fn known_answer(prompt: &str, expect: &str) -> String {
    serde_json::json!({ "prompt": prompt, "expect": expect }).to_string()
}

/// `dir`/prompts.jsonl, a prompts file of `lines`.
pub fn prompts_file(dir: &Path, lines: &[String]) -> PathBuf {
    let path = dir.join("prompts.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

/// A pod `<name>-0000i` in `namespace`, its version told by `label` (Argo's pools group by
/// `version`, Flagger's by `app`).
pub fn pod(name: &str, namespace: &str, (label, value): (&'static str, &str), i: usize) -> Labels {
    vec![
        ("pod", format!("{name}-{i:05}")),
        ("namespace", namespace.into()),
        (label, value.into()),
    ]
}

/// A pod of the Argo pool's version `hash` (its template hash, in `version`).
pub fn argo_pod(hash: &str, i: usize) -> Labels {
    pod(&format!("llm-{hash}"), "inference", ("version", hash), i)
}

/// A pod of Flagger's `app` (`llm-primary`: the stable one; `llm`: the canary) in `ns`.
pub fn flagger_pod(app: &str, ns: &str, i: usize) -> Labels {
    pod(app, ns, ("app", app), i)
}

/// The rollout: a pool's file with its `members` and the new version's pods.
pub fn roll(
    file: &Path,
    members: &[(String, Labels)],
    new: impl IntoIterator<Item = (String, Labels)>,
) {
    let mut rolled = members.to_vec();
    rolled.extend(new);
    write_pool(file, &rolled);
}

/// A file_sd discovery block of `openai-chat` replicas serving `model`, its file read every
/// 100 ms, and `template` (the checks) added to its template.
pub fn discovery_block(name: &str, file: &Path, model: &str, template: &str) -> String {
    format!(
        r#"
        [[discovery]]
        name = "{name}"
        source = "file"
        path = "{}"
        refresh = "100ms"
        [discovery.template]
        backend = "openai-chat"
        model = "{model}"
        rate = 0.001
        {template}
        "#,
        file.display(),
    )
}

/// Whether `query`'s answer came to be `ready` within `within` (asked every 250 ms; an
/// error is not ready).
pub async fn until(
    prometheus: &Prometheus,
    query: &str,
    within: Duration,
    ready: impl Fn(&[f64]) -> bool,
) -> bool {
    let waited = tokio::time::timeout(within, async {
        while !prometheus.query(query).await.is_ok_and(|v| ready(&v)) {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    waited.await.is_ok()
}

/// `ready` for [`until`]: a first value of at least `n`.
pub fn at_least(n: f64) -> impl Fn(&[f64]) -> bool {
    move |v| v.first().copied().unwrap_or(0.0) >= n
}

/// The analysis's clock: a tick a second from now, a late tick delaying the rest (never a
/// burst of catching up).
pub fn every_second() -> tokio::time::Interval {
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks
}

/// Step `analyses` every second from the rollout, each in turn, until `done` says they
/// have decided or four analyses' time (two minutes each, scaled) has passed.
pub async fn analyse(
    prometheus: &Prometheus,
    scale: u64,
    analyses: &mut [&mut Analysis],
    done: impl Fn(&[&mut Analysis]) -> bool,
) {
    let mut ticks = every_second();
    for t in 0..=4 * (TWO_MINUTES / scale) {
        ticks.tick().await;
        for analysis in analyses.iter_mut() {
            analysis.step(prometheus, t).await;
        }
        if done(analyses) {
            break;
        }
    }
}

/// Argo's run of `analysis` ended `phase`, within `seconds` of the analysis.
pub fn assert_argo(analysis: &Analysis, phase: Phase, seconds: u64, context: &str) {
    assert_eq!(analysis.argo_run(), phase, "{context}");
    assert!(
        analysis.argo_at.is_some_and(|t| t <= seconds),
        "Argo decided at {:?} s, not by {seconds} s\n{context}",
        analysis.argo_at
    );
}

/// A healthy version's run, `metric` among its metrics: never Failed nor Error, Successful
/// in Argo within two minutes (scaled by `scale`) with `metric` conclusive by then, and
/// promoted by Flagger.
pub fn assert_passed(analysis: &Analysis, metric: usize, scale: u64, report: &str) {
    let two_minutes = TWO_MINUTES / scale;
    assert_never_failed(analysis, report);
    assert_argo(analysis, Phase::Successful, two_minutes, report);
    assert!(
        analysis.conclusive_at()[metric].is_some_and(|t| t <= two_minutes),
        "{report}"
    );
    assert_eq!(analysis.canary, Canary::Promoted, "{report}");
}

/// A faulty version only `metric` can stop (`why`: why the others pass it): `metric` never
/// passed it at any second, no other metric ever failed it, and it was Failed by Argo
/// within two minutes and rolled back by Flagger within its threshold (scaled by `scale`).
pub fn assert_stopped_by(analysis: &Analysis, metric: usize, why: &str, scale: u64, report: &str) {
    let name = &analysis.argo[metric].name;
    for (t, values, phase) in &analysis.every_second[metric] {
        assert!(
            *phase != Phase::Successful,
            "the {name} metric passed the faulty version at {t}s: {values:?}\n{report}"
        );
    }
    for (i, seconds) in analysis.every_second.iter().enumerate() {
        if i != metric {
            assert!(
                seconds.iter().all(|(_, _, phase)| *phase != Phase::Failed),
                "{} failed a version {why}\n{report}",
                analysis.argo[i].name
            );
        }
    }
    assert_argo(analysis, Phase::Failed, TWO_MINUTES / scale, report);
    assert_eq!(analysis.canary, Canary::RolledBack, "{report}");
    assert!(
        analysis
            .flagger_at
            .is_some_and(|t| t <= FLAGGER_ROLLBACK / scale),
        "{report}"
    );
}

/// A healthy version's analysis: one number every second of every metric, never Failed
/// nor Error.
pub fn assert_never_failed(analysis: &Analysis, report: &str) {
    for seconds in &analysis.every_second {
        for (t, values, phase) in seconds {
            assert_eq!(
                values.len(),
                1,
                "at {t}s one number, never nothing\n{report}"
            );
            assert!(
                !matches!(phase, Phase::Failed | Phase::Error),
                "the healthy version at {t}s: {phase:?}\n{report}"
            );
        }
    }
}

/// A prompts file: the prompts of `candidates` (a prompts file; the built-in set without
/// one) compared by logprobs, and three of them known answers the baseline's weights (at
/// `good`) give and other weights (at `other`) do not (as the shipped prompts have three).
pub async fn prompts(
    dir: &Path,
    (good, other): (&str, &str),
    model: &str,
    candidates: Option<PathBuf>,
) -> PathBuf {
    let answers = |url: &str| {
        let args = inferprobe::canary::record::RecordArgs {
            url: Some(url.to_owned()),
            model: Some(model.to_owned()),
            max_tokens: Some(16),
            prompts: candidates.clone(),
            out: dir.join("unused.json"),
            ..Default::default()
        };
        async move { inferprobe::canary::record::record(&args).await.unwrap() }
    };
    let (good, other) = (answers(good).await, answers(other).await);
    let known: Vec<_> = good
        .answers
        .iter()
        .zip(&other.answers)
        .filter(|(g, o)| {
            g.answer.text.trim() != o.answer.text.trim() && !g.answer.text.trim().is_empty()
        })
        .map(|(g, _)| g)
        .take(3)
        .collect();
    assert_eq!(
        known.len(),
        3,
        "three prompts the two weights answer differently"
    );
    let mut lines: Vec<String> = good
        .answers
        .iter()
        .filter(|a| known.iter().all(|k| k.prompt != a.prompt))
        .map(|a| serde_json::json!({ "prompt": a.prompt }).to_string())
        .collect();
    for k in known {
        let expect = format!("^{}", regex::escape(&k.answer.text));
        lines.push(known_answer(&k.prompt, &expect));
    }
    prompts_file(dir, &lines)
}

/// A file_sd discovery block whose replicas are checked every 4 s (a minute, scaled).
fn block(name: &str, file: &Path, gate: &Gate, canary: &str) -> String {
    // 30 s, scaled: a hung version's checks time out as they would.
    let timeout = match gate.hung {
        Some(_) => format!(r#"ttft_timeout = "{}ms""#, 30_000 / gate.scale),
        None => String::new(),
    };
    let template = format!(
        r#"{timeout}
        canary = {{ interval = "{}s", max_tokens = 16, prompts = "{}", {}{canary} }}"#,
        60 / gate.scale,
        gate.prompts.display(),
        gate.canary,
    );
    discovery_block(name, file, &gate.model, &template)
}

pub const STABLE: &str = "5d8f7c9b4";
pub const ALIKE: &str = "7b6c4d9f8";
pub const OTHER: &str = "6c5b4a3f2";
/// A new version whose every request fails (nothing listens at its address).
pub const BROKEN: &str = "4e3d2c1b0";
/// A new version that never sends a first token (every check times out).
pub const HUNG: &str = "3d2c1b0a9";

/// Seconds between Argo's measurements (the template's 30s) and Flagger's ticks (the
/// documented 15s), unscaled.
pub const ARGO_EVERY: u64 = 30;
pub const FLAGGER_EVERY: u64 = 15;
/// The Canary's analysis, as the Flagger template's header advises.
pub const FLAGGER_ITERATIONS: usize = 6;
pub const FLAGGER_THRESHOLD: usize = 10;
/// Flagger's rollback of a version whose every check fails, unscaled: at the tick after the
/// `threshold`-th failed check (the first tick checks nothing), 165 s.
pub const FLAGGER_ROLLBACK: u64 = (FLAGGER_THRESHOLD as u64 + 1) * FLAGGER_EVERY;
/// The verdict's deadline, unscaled.
pub const TWO_MINUTES: u64 = 120;

/// What a rollout proof runs on: the servers' model and a prompts file, canary settings
/// added to every block's (`"margin = 0.05, "`), and `host:port` addresses.
pub struct Gate {
    pub model: String,
    pub prompts: PathBuf,
    pub canary: String,
    /// Each pool's stable replicas: the Argo pool's, Flagger's "good" and "bad" namespaces'.
    pub stable: [Vec<String>; 3],
    /// The new version with the stable one's weights, and with other weights: in the Argo
    /// pool, and as the Flagger canary.
    pub alike: [String; 2],
    pub other: [String; 2],
    /// A server that never answers, as a new version in the Argo pool (`None`: none).
    pub hung: Option<String>,
    /// How much faster than real time the analysis runs: 15 with simulators (a minute is
    /// 4 s), 1 on real servers, whose answers take the time they take.
    pub scale: u64,
}

/// Issue 31, items 1, 2 and 4: from the first second of the analysis a healthy new version
/// (the same weights) is never Failed nor Error — Inconclusive while few checks are in —
/// and ends Successful in Argo and promoted in Flagger; one with other weights ends Failed
/// and rolled back within the analysis. Returns what each query said every second (`None`:
/// skipped, Prometheus missing on a developer's machine).
pub async fn prove(dir: &Path, gate: &Gate) -> Option<String> {
    let argo_file = dir.join("argo.json");
    let argo_stable = stable_pool(&argo_file, gate.stable[0].clone(), |i| argo_pod(STABLE, i));
    let flagger_files = [dir.join("good.json"), dir.join("bad.json")];
    let primaries: Vec<_> = ["good", "bad"]
        .iter()
        .zip(&flagger_files)
        .zip(&gate.stable[1..])
        .map(|((ns, file), stable)| {
            stable_pool(file, stable.clone(), |i| flagger_pod("llm-primary", ns, i))
        })
        .collect();
    // No block names a baseline: each template names its pair (issue 41, item 4).
    let by_app = r#"group_by = ["app"]"#;
    let by_hash = r#"group_by = ["version"]"#.to_owned();
    let toml = format!(
        "seed = 5\n{}{}{}",
        block("llm", &argo_file, gate, &by_hash),
        block("llm-good", &flagger_files[0], gate, by_app),
        block("llm-bad", &flagger_files[1], gate, by_app),
    );
    let daemon = start_daemon(&toml).await;
    let Some(prometheus) = Prometheus::start(daemon.addr).await else {
        daemon.stop().await;
        return None;
    };
    // Every stable replica has answered every prompt, and Prometheus has seen it.
    let per_block = 8 * gate.stable.iter().map(Vec::len).min().unwrap_or(1);
    let stable_checks = format!(
        r#"sum by (target) (inferprobe_canary_checks_total{{result="match"}}) >= {per_block}"#
    );
    let waited = until(&prometheus, &stable_checks, Duration::from_secs(120), |v| {
        v.len() >= 3
    })
    .await;
    assert!(waited, "{}", daemon.scrape().await.text);

    // The rollout: each pool gets its new version's pod, and the analysis starts now.
    let new = [
        (gate.alike[0].clone(), argo_pod(ALIKE, 0)),
        (gate.other[0].clone(), argo_pod(OTHER, 0)),
        ("127.0.0.1:1".to_owned(), argo_pod(BROKEN, 0)),
    ];
    let hung_pod = gate.hung.clone().map(|hung| (hung, argo_pod(HUNG, 0)));
    roll(&argo_file, &argo_stable, new.into_iter().chain(hung_pod));
    let canaries = [(&gate.alike[1], "good"), (&gate.other[1], "bad")];
    for ((file, members), (canary, ns)) in flagger_files.iter().zip(&primaries).zip(canaries) {
        roll(file, members, [(canary.clone(), flagger_pod("llm", ns, 0))]);
    }
    let mut healthy = Analysis::new(ALIKE, "good", gate.scale);
    let mut bad = Analysis::new(OTHER, "bad", gate.scale);
    // Argo only: no Flagger canary runs in this namespace.
    let mut broken = Analysis::new(BROKEN, "none", gate.scale);
    let mut hung = Analysis::new(HUNG, "none", gate.scale);
    let two_minutes = TWO_MINUTES / gate.scale;
    let mut analysed = vec![&mut healthy, &mut bad, &mut broken];
    if gate.hung.is_some() {
        analysed.push(&mut hung);
    }
    // Decided: the two Flagger canaries by both controllers, the rest by Argo.
    analyse(&prometheus, gate.scale, &mut analysed, |a| {
        a[..2].iter().all(|a| a.done()) && a[2..].iter().all(|a| a.argo_at.is_some())
    })
    .await;
    let mut report = format!(
        "{}{}{}",
        healthy.report("same weights"),
        bad.report("other weights"),
        broken.report("every request failing")
    );
    if gate.hung.is_some() {
        report += &hung.report("every check timing out");
    }

    // Issue 31 item 1: the healthy version's `diverged` series is there, at 0.
    let diverged = format!(
        r#"inferprobe_canary_baseline_checks_total{{target="llm", group="{ALIKE}", baseline="{STABLE}", result="diverged"}}"#
    );
    assert_eq!(prometheus.query(&diverged).await, Ok(vec![0.0]), "{report}");
    assert_never_failed(&healthy, &report);
    // Issue 57: no block here has a sampler check, so the sampler metric reads 0 (nothing
    // to judge) from the first second and holds neither version back.
    for analysis in [&healthy, &bad] {
        for (m, seconds) in analysis.argo.iter().zip(&analysis.every_second) {
            if m.name == "sampler" {
                assert!(
                    seconds.iter().all(|(_, v, _)| v == &[0.0]),
                    "the sampler metric without a sampler check\n{report}"
                );
            }
        }
    }
    // Issue 41 item 1: the known-answers metric never passes other weights.
    for (t, values, phase) in &bad.every_second[1] {
        assert!(
            *phase != Phase::Successful,
            "other weights' known answers passed at {t}s: {values:?}\n{report}"
        );
    }
    // Issue 41 item 2: a verdict within two minutes, for good and bad versions alike.
    for analysis in [&healthy, &bad] {
        for at in analysis.conclusive_at() {
            assert!(at.is_some_and(|t| t <= two_minutes), "{report}");
        }
    }
    assert_argo(&healthy, Phase::Successful, two_minutes, &report);
    assert_argo(&bad, Phase::Failed, two_minutes, &report);
    // Flagger rolls back once `threshold` checks have failed, however early the data is in.
    let rollback = FLAGGER_ROLLBACK / gate.scale;
    assert!(bad.flagger_at.is_some_and(|t| t <= rollback), "{report}");
    assert_eq!(healthy.canary, Canary::Promoted, "{report}");
    assert_eq!(bad.canary, Canary::RolledBack, "{report}");
    // A version whose checks all fail (errors, timeouts) fails both metrics (2), within
    // two minutes: it never waits forever.
    let failing = if gate.hung.is_some() {
        vec![&broken, &hung]
    } else {
        vec![&broken]
    };
    for analysis in failing {
        assert_argo(analysis, Phase::Failed, two_minutes, &report);
        // By the first metric to see it (a hung version's known answers come later in
        // the round of prompts than its first comparisons).
        let two =
            |s: &Vec<(u64, Vec<f64>, Phase)>| s.iter().any(|(_, v, _)| v.first() == Some(&2.0));
        assert!(analysis.every_second.iter().any(two), "{report}");
    }
    daemon.stop().await;
    Some(report)
}
