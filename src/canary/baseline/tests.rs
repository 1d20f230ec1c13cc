//! Issue 51, item 4: the pair the controller names is never the one cut. Four Argo
//! Rollouts of one model (one per zone, one `app` label) in one block, zone d's stable pods
//! recreated (`kubectl argo rollouts restart`) after its canary came: by age alone zone d's
//! canary was compared with zones a, b and c only, and its gate read −1 at every
//! measurement. Its own Rollout's other revision comes first now.

use std::sync::Arc;

use super::*;
use crate::config::{RawCanary, RawConfig, RawTarget, validate};
use crate::endpoint::Target;

/// The family every group below is in.
const FAMILY: &str = "llm";

/// A group's value for `zone` at `hash`.
fn hash(zone: &str, which: &str) -> Option<String> {
    Some(format!("{zone}-{which}"))
}

/// The lineage of zone `zone`'s Rollout at `revision` (its ReplicaSet `llm-<zone>-<hash>`
/// makes `namespace/ReplicaSet/llm-<zone>` its workload, `discovery::owner::workload`).
fn rollout(zone: &str, revision: &Option<String>) -> Option<Lineage> {
    Some(Lineage {
        workload: format!("inference/ReplicaSet/llm-{zone}"),
        revision: revision.clone()?,
    })
}

/// The block's groups as the issue found them, oldest first by their pods: each zone's
/// stable revision, zone d's canary, then zone d's stable pods recreated after it.
fn groups() -> Vec<(&'static str, Option<String>, i64)> {
    vec![
        ("a", hash("a", "stable"), 1_000),
        ("b", hash("b", "stable"), 1_001),
        ("c", hash("c", "stable"), 1_002),
        ("d", hash("d", "canary"), 2_000),
        ("d", hash("d", "stable"), 3_000),
    ]
}

fn baseline(books: &Arc<Books>, group: Option<String>, pool: Option<PoolView>) -> Baseline {
    Baseline {
        books: Arc::clone(books),
        family: FAMILY.to_owned(),
        model: "m".to_owned(),
        group,
        named: None,
        pool,
    }
}

/// Every group's replicas here (a block whose daemon probes every pod), of a lineage or
/// none (a file_sd pool); the members, kept while the test runs.
fn join_all(books: &Books, lineage: bool) -> Vec<super::super::book::Member> {
    let mut members = Vec::new();
    for (zone, group, created) in groups() {
        let book = books.group(FAMILY, group.as_deref());
        for i in 0..2 {
            let replica = format!("{}-{i}", group.as_deref().unwrap_or_default());
            let of = lineage.then(|| rollout(zone, &group)).flatten();
            members.push(book.join_at(&replica, Some(created + i), of));
        }
    }
    members
}

#[test]
fn a_canary_is_compared_with_its_own_rollout_s_stable_group_first() {
    let books = Arc::new(Books::default());
    let _members = join_all(&books, true);
    let d_canary = baseline(&books, hash("d", "canary"), None).others();
    assert_eq!(
        d_canary,
        [
            hash("d", "stable"),
            hash("a", "stable"),
            hash("b", "stable")
        ],
        "zone d's pair first, then the oldest"
    );
    // Zone d's stable replicas are compared with its canary too (a rollback's pair).
    let d_stable = baseline(&books, hash("d", "stable"), None).others();
    assert_eq!(d_stable[0], hash("d", "canary"));
    // A zone with one revision: the oldest first, as before.
    let a = baseline(&books, hash("a", "stable"), None).others();
    assert_eq!(
        a,
        [
            hash("b", "stable"),
            hash("c", "stable"),
            hash("d", "canary")
        ]
    );
}

#[test]
fn without_a_lineage_the_oldest_come_first_as_before() {
    let books = Arc::new(Books::default());
    let _members = join_all(&books, false);
    let d_canary = baseline(&books, hash("d", "canary"), None).others();
    assert_eq!(
        d_canary,
        [
            hash("a", "stable"),
            hash("b", "stable"),
            hash("c", "stable")
        ]
    );
    // `canary.baseline` still names the one group compared with.
    let named = Baseline {
        named: hash("d", "stable"),
        ..baseline(&books, hash("d", "canary"), None)
    };
    assert_eq!(named.others(), [hash("d", "stable")]);
}

/// A pod of the pool as node-local discovery lists it: zone `zone`'s Rollout at `group`'s
/// revision (the canary's default group), created at `created`.
fn pool_pod(zone: &str, group: &Option<String>, created: i64) -> Arc<Target> {
    let raw = RawConfig {
        targets: vec![RawTarget {
            name: Some(FAMILY.into()),
            url: Some("http://127.0.0.1:1".into()),
            model: Some("m".into()),
            backend: Some("openai-chat".into()),
            canary: Some(RawCanary::default()),
            ..RawTarget::default()
        }],
        ..RawConfig::default()
    };
    let mut config = validate(&raw).unwrap();
    let mut target = Arc::into_inner(config.targets.pop().unwrap()).unwrap();
    target.workload = rollout(zone, group).map(|l| l.workload);
    target.revision = group.clone();
    target.created = Some(created);
    assert_eq!(&target.canary_group(), group);
    Arc::new(target)
}

/// A node-local block (one replica per node): this node runs zone d's canary only, every
/// other group is found over the pool.
#[test]
fn over_a_node_local_pool_the_pair_comes_first_too() {
    let books = Arc::new(Books::default());
    let mine = hash("d", "canary");
    let here = books.group(FAMILY, mine.as_deref());
    let _me = here.join_at("d-canary-0", Some(2_000), rollout("d", &mine));
    let pools = Arc::new(super::super::votes::Pools::default());
    let pool = groups()
        .iter()
        .map(|(zone, group, created)| pool_pod(zone, group, *created))
        .collect();
    pools.set(FAMILY, pool);
    let view = PoolView {
        pools,
        block: FAMILY.to_owned(),
    };
    let others = baseline(&books, mine, Some(view)).others();
    assert_eq!(
        others,
        [
            hash("d", "stable"),
            hash("a", "stable"),
            hash("b", "stable")
        ]
    );
}
