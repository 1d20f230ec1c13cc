//! Every canary group's book on this node, by family ([`super::book::group_key`]: a block
//! and everything that shapes its answers) and group (the version a replica serves), and
//! which group of a family is its **baseline**, the one a rollout's new version is
//! compared with.
//!
//! The baseline is the group `canary.baseline` names, else the oldest: the group whose
//! oldest pod was created first (its `creationTimestamp`, from the cluster), so every node
//! and every restart of inferprobe names the same group — the order this process happened
//! to start its targets in (pod name order after a restart) would make the new version the
//! baseline about half the time. Where discovery gives no creation time (file_sd), the
//! group this process saw first.
//!
//! A node-local block's node may hold no replica of the baseline group at all (one replica
//! fills a node: the canary's pod never shares a node with a stable one). Its baseline is
//! then chosen over the whole pool ([`super::baseline`]) and its reference comes from votes
//! of its replicas on other nodes, kept in a **remote** book: no member here, votes only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::book::Book;

/// A family and a group in it.
type GroupId = (String, Option<String>);

/// A baseline group with no replica here, and its votes.
type Remote = (Option<String>, Arc<Book>);

#[derive(Debug, Default)]
pub struct Books {
    groups: Mutex<HashMap<GroupId, Arc<Book>>>,
    /// Per family, the baseline group with no replica here and its votes.
    remote: Mutex<HashMap<String, Remote>>,
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

    /// The baseline group of `family` among the groups here: the one `named`
    /// (`canary.baseline`), else the oldest ([`Book::born`]; of equals, the first by name).
    pub fn baseline(
        &self,
        family: &str,
        named: Option<&str>,
    ) -> Option<(Option<String>, Arc<Book>)> {
        let groups = lock(&self.groups);
        let mut live = groups
            .iter()
            .filter(|((f, _), book)| f == family && book.is_live());
        let found = match named {
            Some(name) => live.find(|((_, g), _)| g.as_deref() == Some(name)),
            None => live
                .min_by(|(a, x), (b, y)| x.born().total_cmp(&y.born()).then_with(|| a.1.cmp(&b.1))),
        };
        found.map(|((_, group), book)| (group.clone(), Arc::clone(book)))
    }

    /// The votes-only book of `family`'s baseline `group`, which has no replica here; a
    /// family has one at a time (a new baseline group starts afresh).
    pub fn remote(&self, family: &str, group: Option<&str>) -> Arc<Book> {
        let mut remote = lock(&self.remote);
        let entry = remote
            .entry(family.to_owned())
            .or_insert_with(|| (group.map(str::to_owned), Arc::default()));
        if entry.0.as_deref() != group {
            *entry = (group.map(str::to_owned), Arc::default());
        }
        Arc::clone(&entry.1)
    }

    /// The votes-only book of `family`'s baseline `group`, if one was made.
    pub fn remote_existing(&self, family: &str, group: Option<&str>) -> Option<Arc<Book>> {
        let remote = lock(&self.remote);
        remote
            .get(family)
            .filter(|(g, _)| g.as_deref() == group)
            .map(|(_, book)| Arc::clone(book))
    }

    #[cfg(test)]
    pub(super) fn group_count(&self) -> usize {
        lock(&self.groups).len()
    }
}
