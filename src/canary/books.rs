//! Every canary group's book on this node, by family ([`super::book::group_key`]: a block
//! and everything that shapes its answers) and group (the version a replica serves), and
//! which other groups of a family a replica is compared with for the rollout gate.
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

    /// The groups of `family` with a replica here, each with its age ([`Book::born`]),
    /// oldest first (of equals, by name).
    pub fn groups_here(&self, family: &str) -> Vec<(Option<String>, f64)> {
        let groups = lock(&self.groups);
        let mut found: Vec<(Option<String>, f64)> = Vec::new();
        for ((f, key), book) in groups.iter() {
            if f != family || !book.is_live() {
                continue;
            }
            found.push((key.clone(), book.born()));
        }
        found.sort_by(|(a, x), (b, y)| x.total_cmp(y).then_with(|| a.cmp(b)));
        found
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
