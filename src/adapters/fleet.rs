//! What a block's replicas share for the adapter check: the adapters each replica listed
//! and when (an adapter one replica lists and another does not is `missing` there), the
//! references' books (one per adapter version, one for the base model, each the canary's
//! majority rule: [`crate::canary::book`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::canary::book::Book;
use crate::canary::books::Books;

/// An adapter and the path it was loaded from (`root` in `/v1/models`): a new version at
/// a new path learns its own references.
pub type Version = (String, String);

#[derive(Debug, Default)]
pub struct Fleets {
    books: Books,
    state: Mutex<HashMap<String, Family>>,
}

#[derive(Debug, Default)]
struct Family {
    /// Per adapter: the replicas that listed it, with the path and when.
    listed: BTreeMap<String, HashMap<String, (String, Instant)>>,
}

impl Fleets {
    fn with<T>(&self, family: &str, f: impl FnOnce(&mut Family) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(state.entry(family.to_owned()).or_default())
    }

    /// The book of an adapter version (`None`: the base model) in `family`.
    pub fn book(&self, family: &str, version: Option<&Version>) -> Arc<Book> {
        let key = version.map_or_else(String::new, |(name, root)| format!("{name}\u{0}{root}"));
        self.books.group(family, Some(&key))
    }

    /// `replica` lists `here` now (name → path; `None`: its listing was not read, and
    /// what it listed before ages); the adapters any replica of the family listed within
    /// `fresh`, each with the path most replicas list it at.
    pub fn listed(
        &self,
        family: &str,
        replica: &str,
        here: Option<&BTreeMap<String, String>>,
        fresh: Duration,
    ) -> BTreeMap<String, String> {
        let now = Instant::now();
        self.with(family, |f| {
            if let Some(here) = here {
                for (name, by) in f.listed.iter_mut() {
                    if !here.contains_key(name) {
                        by.remove(replica);
                    }
                }
                for (name, root) in here {
                    let by = f.listed.entry(name.clone()).or_default();
                    by.insert(replica.to_owned(), (root.clone(), now));
                }
            }
            for by in f.listed.values_mut() {
                by.retain(|_, (_, at)| now.duration_since(*at) <= fresh);
            }
            f.listed.retain(|_, by| !by.is_empty());
            f.listed
                .iter()
                .map(|(name, by)| {
                    let mut roots: BTreeMap<&str, usize> = BTreeMap::new();
                    for (root, _) in by.values() {
                        *roots.entry(root).or_default() += 1;
                    }
                    let root = roots
                        .into_iter()
                        .max_by_key(|&(_, n)| n)
                        .map_or_else(String::new, |(r, _)| r.to_owned());
                    (name.clone(), root)
                })
                .collect()
        })
    }

    /// Whether a replica other than `except` listed `name` after `after`: an adapter that
    /// `except` stopped listing then is lost there only if another still lists it (one
    /// unloaded everywhere is not, while the others' listings from before are fresh).
    pub fn listed_after(&self, family: &str, name: &str, after: Instant, except: &str) -> bool {
        self.with(family, |f| {
            f.listed.get(name).is_some_and(|by| {
                by.iter()
                    .any(|(replica, (_, at))| replica != except && *at > after)
            })
        })
    }

    /// Forget `replica`'s listings (it is gone).
    pub fn forget(&self, family: &str, replica: &str) {
        self.with(family, |f| {
            for by in f.listed.values_mut() {
                by.remove(replica);
            }
            f.listed.retain(|_, by| !by.is_empty());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn here(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(n, r)| ((*n).to_owned(), (*r).to_owned()))
            .collect()
    }

    #[test]
    fn an_adapter_stays_in_the_union_while_any_replica_lists_it() {
        let fleets = Fleets::default();
        let fresh = Duration::from_secs(60);
        fleets.listed("f", "r1", Some(&here(&[("a", "/a"), ("b", "/b")])), fresh);
        let union = fleets.listed("f", "r2", Some(&here(&[("a", "/a2")])), fresh);
        assert_eq!(union.len(), 2, "b is r1's");
        // r1 unloads b: nobody lists it.
        let union = fleets.listed("f", "r1", Some(&here(&[("a", "/a2")])), fresh);
        assert_eq!(union, here(&[("a", "/a2")]));
        // Other families are their own.
        assert!(fleets.listed("g", "r1", Some(&here(&[])), fresh).is_empty());
        // A replica that goes takes its listings with it.
        fleets.forget("f", "r1");
        fleets.forget("f", "r2");
        assert!(fleets.listed("f", "r3", Some(&here(&[])), fresh).is_empty());
        // An unread listing refreshes nothing: what r4 listed ages out.
        fleets.listed("f", "r4", Some(&here(&[("c", "/c")])), Duration::ZERO);
        std::thread::sleep(Duration::from_millis(2));
        assert!(fleets.listed("f", "r4", None, Duration::ZERO).is_empty());
    }
}
