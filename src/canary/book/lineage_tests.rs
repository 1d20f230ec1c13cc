//! Issue 41, item 5: one workload at two revisions in one group (a Flagger promotion) is a
//! rollout, not a divergence; two workloads in one group still judge each other.

use super::*;

fn of(workload: &str, revision: &str) -> Option<Lineage> {
    Some(Lineage {
        workload: format!("inference/ReplicaSet/{workload}"),
        revision: revision.to_owned(),
    })
}

#[test]
fn a_promotion_s_new_pods_are_not_judged_by_the_old_ones() {
    let book = Arc::new(Book::default());
    let (old, new) = (answer(&[" a", " b"]), answer(&[" x", " y"]));
    let stable: Vec<Member> = (0..3)
        .map(|i| book.join_at(&format!("old{i}"), Some(1_000), of("llm-primary", "aaa")))
        .collect();
    for m in &stable {
        book.observe(m, P, Arc::clone(&old), 1.0).ok();
    }
    assert_eq!(book.reference_for_others(P), Some(Arc::clone(&old)));
    // The first new pod (the canary's model) has only its rivals: its own first answer.
    let first = book.join_at("new0", Some(2_000), of("llm-primary", "bbb"));
    assert_eq!(
        book.observe(&first, P, Arc::clone(&new), 1.0).ok(),
        Some(Arc::clone(&new)),
        "never the old revision's answer"
    );
    // Two more: two, then a majority of its own revision.
    let second = book.join_at("new1", Some(2_001), of("llm-primary", "bbb"));
    assert_eq!(
        book.observe(&second, P, Arc::clone(&new), 1.0).ok(),
        Some(Arc::clone(&new))
    );
    let third = book.join_at("new2", Some(2_002), of("llm-primary", "bbb"));
    assert_eq!(
        book.observe(&third, P, Arc::clone(&new), 1.0).ok(),
        Some(Arc::clone(&new))
    );
    // The old pods still agree among themselves; mid-rollout the group is no baseline for
    // another group (the gate's pair is unscored), whichever pods are older.
    assert_eq!(
        book.observe(&stable[0], P, Arc::clone(&old), 1.0).ok(),
        Some(Arc::clone(&old))
    );
    assert_eq!(book.reference_for_others(P), None);
    drop(stable);
    assert_eq!(book.reference_for_others(P), Some(Arc::clone(&new)));
    assert_eq!(
        book.observe(&first, P, Arc::clone(&new), 1.0).ok(),
        Some(new)
    );
}

/// A Deployment per zone, one group: a pod loaded with other weights is outvoted by the
/// other workloads whatever its revision, and a new revision of one zone is judged by the
/// other zones (only its own workload's old pods are not its reference).
#[test]
fn separate_workloads_in_one_group_still_judge_each_other() {
    let book = Arc::new(Book::default());
    let (good, bad) = (answer(&[" a", " b"]), answer(&[" x", " y"]));
    let zone_a: Vec<Member> = (0..2)
        .map(|i| book.join_at(&format!("a{i}"), Some(1_000), of("llm-a", "aaa")))
        .collect();
    let zone_b: Vec<Member> = (0..2)
        .map(|i| book.join_at(&format!("b{i}"), Some(1_000), of("llm-b", "bbb")))
        .collect();
    for m in zone_a.iter().chain(&zone_b) {
        book.observe(m, P, Arc::clone(&good), 1.0).ok();
    }
    let corrupt = book.join_at("c0", Some(1_000), of("llm-c", "ccc"));
    assert_eq!(
        book.observe(&corrupt, P, Arc::clone(&bad), 1.0).ok(),
        Some(Arc::clone(&good))
    );
    drop(corrupt);
    // Zone a rolls to a revision that serves other weights: zone b is its group (its two
    // pods and itself), not zone a's old pods.
    let rolled = book.join_at("a-new", Some(3_000), of("llm-a", "fff"));
    assert_eq!(
        book.observe(&rolled, P, Arc::clone(&bad), 1.0).ok(),
        Some(Arc::clone(&good)),
        "judged by the other workloads"
    );
    // Without lineages (a file_sd pool) everyone is kin, as before.
    let plain = Arc::new(Book::default());
    let pods: Vec<Member> = (0..3).map(|i| plain.join(&format!("p{i}"))).collect();
    for m in &pods {
        plain.observe(m, P, Arc::clone(&good), 1.0).ok();
    }
    let odd = plain.join("odd");
    assert_eq!(plain.observe(&odd, P, bad, 1.0).ok(), Some(good));
}

/// Votes carry their voter's lineage: a voter at another revision of my workload does not
/// vote on my answer.
#[test]
fn a_rival_s_vote_does_not_count() {
    let book = Arc::new(Book::default());
    let (old, new) = (answer(&[" a", " b"]), answer(&[" x", " y"]));
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for i in 0..3 {
        let voter = format!("old-elsewhere{i}");
        book.vote(&voter, P, Arc::clone(&old), 1.0, until, of("llm", "aaa"));
    }
    let me = book.join_at("new0", Some(2_000), of("llm", "bbb"));
    assert_eq!(
        book.observe(&me, P, Arc::clone(&new), 1.0).ok(),
        Some(Arc::clone(&new)),
        "three rival votes are no majority against it"
    );
    let kin = book.join_at("old-here", Some(1_000), of("llm", "aaa"));
    assert_eq!(book.observe(&kin, P, Arc::clone(&old), 1.0).ok(), Some(old));
}

/// A replica with no lineage (no controlling owner) was in the old majority: the new
/// revision is not held to that majority's settled answer (before, it diverged on every
/// check); with the ownerless pod disagreeing, nothing tells which is right.
#[test]
fn a_majority_settled_before_a_revision_came_does_not_judge_it() {
    let book = Arc::new(Book::default());
    let (old, new) = (answer(&[" a", " b"]), answer(&[" x", " y"]));
    let bare = book.join_at("a-bare-pod", Some(500), None);
    let stable: Vec<Member> = (0..2)
        .map(|i| book.join_at(&format!("p-old{i}"), Some(1_000), of("llm-primary", "aaa")))
        .collect();
    for m in std::iter::once(&bare).chain(&stable) {
        book.observe(m, P, Arc::clone(&old), 1.0).ok();
    }
    let first = book.join_at("p-new0", Some(2_000), of("llm-primary", "bbb"));
    assert_eq!(
        book.observe(&first, P, Arc::clone(&new), 1.0),
        Err(NoReference::TwoDisagree)
    );
    // The ownerless pod is kin to both revisions: the majority of all four is its reference.
    assert_eq!(
        book.observe(&bare, P, Arc::clone(&old), 1.0).ok(),
        Some(old)
    );
}

/// Whoever authored the settled answer (the order of pod names), a corrupt pod of a
/// zone's new revision beside one pod of another zone is not scored against its own
/// workload's old pods: unscored, the same both ways.
#[test]
fn the_verdict_does_not_depend_on_pod_names() {
    for (zone_a, zone_b) in [("a", "b"), ("y", "b")] {
        let book = Arc::new(Book::default());
        let (good, bad) = (answer(&[" a", " b"]), answer(&[" x", " y"]));
        let olds: Vec<Member> = (0..2)
            .map(|i| book.join_at(&format!("{zone_a}{i}"), Some(1_000), of("llm-a", "aaa")))
            .collect();
        let b = book.join_at(&format!("{zone_b}0"), Some(1_000), of("llm-b", "bbb"));
        for m in olds.iter().chain([&b]) {
            book.observe(m, P, Arc::clone(&good), 1.0).ok();
        }
        let corrupt = book.join_at(&format!("{zone_a}-new"), Some(3_000), of("llm-a", "fff"));
        assert_eq!(
            book.observe(&corrupt, P, Arc::clone(&bad), 1.0),
            Err(NoReference::TwoDisagree),
            "{zone_a}"
        );
    }
}

/// A voter's lineage goes with its votes, and all of them when the book empties.
#[test]
fn lineages_do_not_outlive_their_replicas() {
    let book = Arc::new(Book::default());
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for turnover in 0..100 {
        let me = book.join_at(&format!("m{turnover}"), None, of("llm", "aaa"));
        for v in 0..3 {
            let voter = format!("v{turnover}-{v}");
            book.vote(&voter, P, answer(&[" a"]), 1.0, until, of("llm", "aaa"));
        }
        book.observe(&me, P, answer(&[" a"]), 1.0).ok();
    }
    drop(book.join("last"));
    assert!(book.lock().lineages.is_empty());
}

/// A settled majority holds the lineages of those who agreed with it, not of everyone who
/// answered: with an ownerless pod answering in between, neither revision is held to the
/// other's answer, in either order (found by a hostile review: the new pod diverged).
#[test]
fn a_settled_answer_binds_only_the_revisions_that_agreed() {
    let (old, new) = (answer(&[" a", " b"]), answer(&[" x", " y"]));
    // The first new pod, then the ownerless pod settles the old majority of everyone.
    let book = Arc::new(Book::default());
    let bare = book.join_at("orphan", Some(500), None);
    let stable: Vec<Member> = (0..3)
        .map(|i| book.join_at(&format!("p-old{i}"), Some(1_000), of("llm-primary", "aaa")))
        .collect();
    for m in std::iter::once(&bare).chain(&stable) {
        book.observe(m, P, Arc::clone(&old), 1.0).ok();
    }
    let first = book.join_at("p-new0", Some(2_000), of("llm-primary", "bbb"));
    book.observe(&first, P, Arc::clone(&new), 1.0).ok();
    for _ in 0..5 {
        book.observe(&bare, P, Arc::clone(&old), 1.0).ok();
        let got = book.observe(&first, P, Arc::clone(&new), 1.0);
        assert_ne!(
            got.ok(),
            Some(Arc::clone(&old)),
            "the new pod judged by the old answer"
        );
    }
    // Later: three new pods settle the new majority of everyone; the last old pod is not
    // held to it.
    let news: Vec<Member> = (1..3)
        .map(|i| book.join_at(&format!("p-new{i}"), Some(2_000), of("llm-primary", "bbb")))
        .collect();
    for m in std::iter::once(&first).chain(&news) {
        book.observe(m, P, Arc::clone(&new), 1.0).ok();
    }
    let mut stable = stable;
    let last_old = stable.pop().unwrap();
    drop(stable);
    book.observe(&bare, P, Arc::clone(&old), 1.0).ok();
    let got = book.observe(&last_old, P, Arc::clone(&old), 1.0);
    assert_ne!(got.ok(), Some(new), "the old pod judged by the new answer");
}

/// The votes of pods that left the pool go at once: a group whose old revision is gone is
/// a baseline again, not "rolling" until the votes expire.
#[test]
fn votes_of_pods_gone_from_the_pool_do_not_keep_a_group_rolling() {
    let book = Arc::new(Book::default());
    let until = std::time::Instant::now() + std::time::Duration::from_secs(600);
    let (old, new) = (answer(&[" a", " b"]), answer(&[" x", " y"]));
    for i in 0..2 {
        let voter = format!("old{i}");
        book.vote(
            &voter,
            P,
            Arc::clone(&old),
            1.0,
            until,
            of("llm-primary", "aaa"),
        );
    }
    for i in 0..3 {
        let voter = format!("new{i}");
        book.vote(
            &voter,
            P,
            Arc::clone(&new),
            1.0,
            until,
            of("llm-primary", "bbb"),
        );
    }
    assert_eq!(book.reference_for_others(P), None, "mid-rollout");
    book.keep_voters(&["new0", "new1", "new2"].into_iter().collect());
    assert_eq!(book.reference_for_others(P), Some(new));
}
