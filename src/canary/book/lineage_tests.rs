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
    // The old pods still agree among themselves; the gate's baseline is still the old
    // revision while any of it is left.
    assert_eq!(
        book.observe(&stable[0], P, Arc::clone(&old), 1.0).ok(),
        Some(Arc::clone(&old))
    );
    assert_eq!(book.reference_for_others(P), Some(Arc::clone(&old)));
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
