//! The object store: objects by key, one global resourceVersion (an etcd-like counter), the
//! retained history of changes and the open watches fed from it — the apiserver's watch
//! cache in miniature. Every change is recorded and fanned out under one lock, so a watch
//! that replays history and then goes live can neither miss nor repeat an event.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::selector::{FieldSelector, LabelSelector};

/// An API resource the server knows.
#[derive(Debug, PartialEq)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    /// Built-in types' lists carry items without apiVersion/kind; CRD lists keep them.
    pub builtin: bool,
    /// The field labels the real server accepts in a fieldSelector for this resource.
    pub fields: &'static [&'static str],
}

impl Resource {
    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

const META_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];

pub const RESOURCES: &[Resource] = &[
    Resource {
        group: "",
        version: "v1",
        plural: "pods",
        kind: "Pod",
        builtin: true,
        fields: &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
    },
    Resource {
        group: "discovery.k8s.io",
        version: "v1",
        plural: "endpointslices",
        kind: "EndpointSlice",
        builtin: true,
        fields: &["metadata.name", "metadata.namespace", "addressType"],
    },
    Resource {
        group: "inference.networking.k8s.io",
        version: "v1",
        plural: "inferencepools",
        kind: "InferencePool",
        builtin: false,
        fields: META_FIELDS,
    },
    Resource {
        group: "inference.networking.x-k8s.io",
        version: "v1alpha2",
        plural: "inferencepools",
        kind: "InferencePool",
        builtin: false,
        fields: META_FIELDS,
    },
];

pub fn resource_of(api_version: &str, kind: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.api_version() == api_version && r.kind == kind)
}

/// (apiVersion, kind, namespace, name): ordered like the server lists (by namespace, name).
pub type Key = (String, String, String, String);

/// The uid of an object's `incarnation`-th creation: stable while it lives, new once it is
/// deleted and created again (as on a real cluster), and computable by the builders.
pub fn uid_for(key: &Key, incarnation: u32) -> String {
    let hash = |salt: u8| {
        let mut h = DefaultHasher::new();
        (salt, key, incarnation).hash(&mut h);
        h.finish()
    };
    let (a, b) = (hash(1), hash(2));
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}

/// One change in the history. `object` is None for a deletion; `prev` is None for a creation.
struct Change {
    rv: u64,
    resource: &'static Resource,
    object: Option<Value>,
    prev: Option<Value>,
}

/// What a watch's response body is fed: a line to write, a clean end, or an abort.
pub enum Msg {
    Line(Bytes),
    End,
    /// Cut the connection mid-stream (no terminating chunk).
    Abort,
}

/// The objects a list or watch asked for.
pub struct Filter {
    pub resource: &'static Resource,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn matches(&self, object: &Value) -> bool {
        let namespace = object["metadata"]["namespace"].as_str();
        self.namespace
            .as_deref()
            .is_none_or(|ns| namespace == Some(ns))
            && self.labels.matches(object)
            && self.fields.matches(object)
    }

    /// The event this watcher sees for a change (the cacher's `convertToWatchEvent`): an
    /// object that starts matching is ADDED, one that stops matching is DELETED (its old
    /// state at the change's resourceVersion).
    fn event(&self, change: &Change) -> Option<(&'static str, Value)> {
        if change.resource != self.resource {
            return None;
        }
        let now = change.object.as_ref().is_some_and(|o| self.matches(o));
        let before = change.prev.as_ref().is_some_and(|o| self.matches(o));
        match (before, now) {
            (false, true) => Some(("ADDED", change.object.clone()?)),
            (true, true) => Some(("MODIFIED", change.object.clone()?)),
            (true, false) => {
                let mut old = change.prev.clone()?;
                old["metadata"]["resourceVersion"] = json!(change.rv.to_string());
                Some(("DELETED", old))
            }
            (false, false) => None,
        }
    }
}

struct Watcher {
    filter: Filter,
    bookmarks: bool,
    tx: UnboundedSender<Msg>,
}

/// One watch event line, `type` first as the real server writes it.
pub fn line(kind: &str, object: &Value) -> Msg {
    let line = format!("{{\"type\":\"{kind}\",\"object\":{object}}}\n");
    Msg::Line(line.into())
}

fn bookmark(resource: &Resource, rv: u64, initial_end: bool) -> Msg {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object =
        json!({"kind": resource.kind, "apiVersion": resource.api_version(), "metadata": metadata});
    line("BOOKMARK", &object)
}

/// Retained changes beyond this are forgotten oldest first (watches from before get 410).
const HISTORY_CAP: usize = 10_000;

pub struct Store {
    pub rv: u64,
    objects: BTreeMap<Key, Value>,
    /// Deletions so far per key: the next creation's uid incarnation.
    incarnations: HashMap<Key, u32>,
    history: VecDeque<Change>,
    /// A watch from a resourceVersion below this has lost events: 410 Expired.
    pub oldest: u64,
    watchers: Vec<Watcher>,
    pub forbidden: HashSet<String>,
    pub uninstalled: HashSet<String>,
    pub requests: Vec<String>,
    pub bookmark_every: Duration,
    pub bookmarks_sent: u64,
}

impl Store {
    pub fn new(bookmark_every: Duration) -> Self {
        Self {
            rv: 1,
            objects: BTreeMap::new(),
            incarnations: HashMap::new(),
            history: VecDeque::new(),
            oldest: 1,
            watchers: Vec::new(),
            forbidden: HashSet::new(),
            uninstalled: HashSet::new(),
            requests: Vec::new(),
            bookmark_every,
            bookmarks_sent: 0,
        }
    }

    /// Create or replace; an identical replace is a no-op (no new resourceVersion), as on
    /// the real server.
    pub fn apply(&mut self, mut object: Value) {
        let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let resource = resource_of(&api_version, &kind)
            .unwrap_or_else(|| panic!("kube_api: no resource for {api_version} {kind}"));
        let meta = &mut object["metadata"];
        let name = meta["name"].as_str().expect("metadata.name").to_owned();
        if meta["namespace"].as_str().is_none() {
            meta["namespace"] = json!("default");
        }
        let namespace = meta["namespace"].as_str().unwrap().to_owned();
        let key = (api_version, kind, namespace, name);
        let prev = self.objects.get(&key).cloned();
        let (uid, created, rv) = match &prev {
            Some(p) => {
                let m = &p["metadata"];
                (
                    m["uid"].clone(),
                    m["creationTimestamp"].clone(),
                    m["resourceVersion"].clone(),
                )
            }
            None => {
                let uid = uid_for(&key, self.incarnations.get(&key).copied().unwrap_or(0));
                (json!(uid), super::objects::now(), Value::Null)
            }
        };
        let meta = &mut object["metadata"];
        meta["uid"] = uid;
        meta["creationTimestamp"] = created;
        meta["resourceVersion"] = rv;
        if prev.as_ref() == Some(&object) {
            return;
        }
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.objects.insert(key, object.clone());
        self.record(resource, Some(object), prev);
    }

    pub fn delete(&mut self, key: Key) {
        let prev = self.objects.remove(&key).unwrap_or_else(|| {
            panic!("kube_api: delete of an object that does not exist: {key:?}")
        });
        *self.incarnations.entry(key.clone()).or_default() += 1;
        self.rv += 1;
        self.record(resource_of(&key.0, &key.1).unwrap(), None, Some(prev));
    }

    fn record(&mut self, resource: &'static Resource, object: Option<Value>, prev: Option<Value>) {
        let change = Change {
            rv: self.rv,
            resource,
            object,
            prev,
        };
        self.watchers.retain(|w| match w.filter.event(&change) {
            Some((kind, object)) => w.tx.send(line(kind, &object)).is_ok(),
            None => !w.tx.is_closed(),
        });
        self.history.push_back(change);
        if self.history.len() > HISTORY_CAP {
            let forgotten = self.history.pop_front().unwrap();
            self.oldest = forgotten.rv;
        }
    }

    /// The objects matching `filter`, in key order.
    pub fn list(&self, filter: &Filter) -> Vec<Value> {
        let api_version = filter.resource.api_version();
        self.objects
            .iter()
            .filter(|(k, o)| k.0 == api_version && k.1 == filter.resource.kind && filter.matches(o))
            .map(|(_, o)| o.clone())
            .collect()
    }

    pub fn get(&self, resource: &Resource, namespace: &str, name: &str) -> Option<Value> {
        let key = (
            resource.api_version(),
            resource.kind.to_owned(),
            namespace.to_owned(),
            name.to_owned(),
        );
        self.objects.get(&key).cloned()
    }

    /// Open a watch. `from` None is "now" (resourceVersion unset or "0"): synthetic ADDED
    /// events for the current objects first, and with `initial_end` (sendInitialEvents)
    /// the bookmark that marks their end. From an rv, the retained changes after it are
    /// replayed — or, if some were forgotten, one 410 ERROR event ends the stream.
    pub fn watch(
        &mut self,
        filter: Filter,
        from: Option<u64>,
        bookmarks: bool,
        initial_end: bool,
    ) -> UnboundedReceiver<Msg> {
        let (tx, rx) = unbounded_channel();
        match from {
            None => {
                for object in self.list(&filter) {
                    let _ = tx.send(line("ADDED", &object));
                }
                if initial_end {
                    let _ = tx.send(bookmark(filter.resource, self.rv, true));
                }
            }
            Some(rv) if rv < self.oldest => {
                let status = super::server::status_body(
                    410,
                    "Expired",
                    &format!("too old resource version: {rv} ({})", self.oldest),
                    None,
                );
                let _ = tx.send(line("ERROR", &status));
                let _ = tx.send(Msg::End);
                return rx;
            }
            Some(rv) => {
                for change in self.history.iter().filter(|c| c.rv > rv) {
                    if let Some((kind, object)) = filter.event(change) {
                        let _ = tx.send(line(kind, &object));
                    }
                }
            }
        }
        self.watchers.push(Watcher {
            filter,
            bookmarks,
            tx,
        });
        rx
    }

    /// A BOOKMARK at the current resourceVersion on every watch that allowed them.
    pub fn bookmark_all(&mut self) {
        let rv = self.rv;
        let mut sent = 0;
        self.watchers.retain(|w| {
            if !w.bookmarks {
                return !w.tx.is_closed();
            }
            let ok = w.tx.send(bookmark(w.filter.resource, rv, false)).is_ok();
            sent += u64::from(ok);
            ok
        });
        self.bookmarks_sent += sent;
    }

    /// Forget the history: a "compaction" clients have not seen. The resourceVersion moves
    /// on, so every rv handed out so far is too old to watch from, while a fresh list's
    /// rv is fine (otherwise the re-list would loop on 410).
    pub fn expire_history(&mut self) {
        self.history.clear();
        self.rv += 1;
        self.oldest = self.rv;
    }

    /// Abort (`abrupt`) or cleanly end the watches that `which` selects.
    pub fn end_watches(&mut self, abrupt: bool, which: impl Fn(&Resource) -> bool) {
        self.watchers.retain(|w| {
            if !which(w.filter.resource) {
                return true;
            }
            let _ = w.tx.send(if abrupt { Msg::Abort } else { Msg::End });
            false
        });
    }

    pub fn open_watches(&mut self) -> usize {
        self.watchers.retain(|w| !w.tx.is_closed());
        self.watchers.len()
    }
}
