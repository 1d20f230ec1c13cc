//! Every canary group's book on this node, by family ([`super::book::group_key`]: a block
//! and everything that shapes its answers) and group (the version a replica serves), and
//! which other groups of a family a replica is compared with for the rollout gate.
//!
//! A book's key is its group, and — where `canary.group_by` names the group by labels —
//! the pod's controller revision too ([`book_key`]): Flagger's promotion copies the new
//! spec to `<target>-primary` and keeps its `app: <target>-primary` label, so during the
//! primary's rolling update old and new pods share one labelled group. Each revision keeps
//! its own reference, so neither side of a promotion diverges from the other; the `group`
//! label stays what `group_by` says. Where a group has several revisions here, the oldest
//! (its oldest pod created first) answers for it in another group's comparison.
//!
//! A node-local block's node may hold no replica of another group at all (one replica
//! fills a node: the canary's pod never shares a node with a stable one). That group's
//! reference then comes from votes of its replicas on other nodes, kept in a **remote**
//! book: no member here, votes only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::book::Book;

/// A family and a group in it.
type GroupId = (String, Option<String>);

/// What separates a group from the revision in a book's key (never in a label value).
const REVISION: char = '\u{1}';

/// The key of a replica's book in its family: its `group`, and its controller `revision`
/// where the group is named by `group_by` labels (a revision is the group already where
/// none are named).
pub fn book_key(group: Option<&str>, revision: Option<&str>, by_labels: bool) -> Option<String> {
    match (group, revision) {
        (Some(g), Some(r)) if by_labels => Some(format!("{g}{REVISION}{r}")),
        (g, _) => g.map(str::to_owned),
    }
}

/// The group of a book's key (its labelled version, without the revision).
pub fn group_of_key(key: Option<&str>) -> Option<&str> {
    key.map(|k| k.split(REVISION).next().unwrap_or(k))
}

#[derive(Debug, Default)]
pub struct Books {
    groups: Mutex<HashMap<GroupId, Arc<Book>>>,
    /// Per family and group with no replica here, its votes.
    remote: Mutex<HashMap<GroupId, Arc<Book>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Books {
    /// The book of `group` in `family`, made on first use. Books of groups that are gone
    /// are dropped when their last member leaves and another group is asked for.
    pub fn group(&self, family: &str, group: Option<&str>) -> Arc<Book> {
        let mut groups = lock(&self.groups);
        groups.retain(|_, book| Arc::strong_count(book) > 1 || book.is_live());
        let key = (family.to_owned(), group.map(str::to_owned));
        Arc::clone(groups.entry(key).or_default())
    }

    /// The book of `group` in `family` if a replica of it is here now.
    pub fn live(&self, family: &str, group: Option<&str>) -> Option<Arc<Book>> {
        let groups = lock(&self.groups);
        let key = (family.to_owned(), group.map(str::to_owned));
        groups.get(&key).filter(|b| b.is_live()).cloned()
    }

    /// The groups of `family` with a replica here, each with its age ([`Book::born`] of
    /// its oldest book), oldest first (of equals, by name).
    pub fn groups_here(&self, family: &str) -> Vec<(Option<String>, f64)> {
        let groups = lock(&self.groups);
        let mut found: Vec<(Option<String>, f64)> = Vec::new();
        for ((f, key), book) in groups.iter() {
            if f != family || !book.is_live() {
                continue;
            }
            let group = group_of_key(key.as_deref()).map(str::to_owned);
            let born = book.born();
            match found.iter_mut().find(|(g, _)| *g == group) {
                Some((_, b)) => *b = b.min(born),
                None => found.push((group, born)),
            }
        }
        found.sort_by(|(a, x), (b, y)| x.total_cmp(y).then_with(|| a.cmp(b)));
        found
    }

    /// The book that answers for `group` of `family` here: of its revisions with a replica
    /// here, the oldest (of equals, the larger). `None` when the group has none here.
    pub fn live_group(&self, family: &str, group: Option<&str>) -> Option<Arc<Book>> {
        let groups = lock(&self.groups);
        groups
            .iter()
            .filter(|((f, key), book)| {
                f == family && group_of_key(key.as_deref()) == group && book.is_live()
            })
            // Of revisions born alike (pods created in one second), the one with more
            // replicas here.
            .min_by(|(a, x), (b, y)| {
                x.born()
                    .total_cmp(&y.born())
                    .then_with(|| y.members().len().cmp(&x.members().len()))
                    .then_with(|| a.1.cmp(&b.1))
            })
            .map(|(_, book)| Arc::clone(book))
    }

    /// The votes-only book of `family`'s `group`, which has no replica here, made on first
    /// use; `keep` the groups still compared with (the others' votes are dropped).
    pub fn remote(&self, family: &str, group: Option<&str>, keep: &[Option<String>]) -> Arc<Book> {
        let mut remote = lock(&self.remote);
        remote.retain(|(f, g), _| f != family || g.as_deref() == group || keep.contains(g));
        let key = (family.to_owned(), group.map(str::to_owned));
        Arc::clone(remote.entry(key).or_default())
    }

    /// The votes-only book of `family`'s `group`, if one was made.
    pub fn remote_existing(&self, family: &str, group: Option<&str>) -> Option<Arc<Book>> {
        let remote = lock(&self.remote);
        remote
            .get(&(family.to_owned(), group.map(str::to_owned)))
            .map(Arc::clone)
    }

    #[cfg(test)]
    pub(super) fn group_count(&self) -> usize {
        lock(&self.groups).len()
    }
}
