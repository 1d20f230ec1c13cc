//! An in-process Kubernetes API server for tests that drive the `kube` crate without a
//! cluster. It speaks kube-apiserver's list/watch protocol over HTTP/1.1 on 127.0.0.1:
//! JSON lists with a `metadata.resourceVersion`, chunked watch streams of
//! `{"type":…,"object":…}` lines replayed from a retained history then live, BOOKMARKs,
//! `410 Expired` for a watch from a forgotten resourceVersion, and `Status` errors (403,
//! 404 for a group that is not installed, 400 for a bad selector).
//!
//! Served: core pods, discovery.k8s.io/v1 EndpointSlices and the Gateway API Inference
//! Extension's InferencePools (inference.networking.k8s.io/v1 and
//! inference.networking.x-k8s.io/v1alpha2), plus `/api`, `/apis`, `/apis/<g>/<v>` and
//! `/version` for discovery. Label and field selectors are applied by the server, to watch
//! events too (an object that stops matching is sent as DELETED, as the cacher does).
//!
//! The test side mutates the world ([`KubeApi::apply`], [`KubeApi::delete`]) and injects
//! faults ([`KubeApi::forbid`], [`KubeApi::install_group`], [`KubeApi::expire_history`],
//! [`KubeApi::drop_watches`], [`KubeApi::set_down`]); [`KubeApi::requests`] shows what the
//! client asked. Every watch is bounded by [`MAX_WATCH`]; dropping the server ends all.
//! [`client`] builds a `kube::Client` from the written kubeconfig and reads watcher streams
//! with bounded waits; [`objects`] builds pods, EndpointSlices and InferencePools.
//!
//! Not served: writes (only GET), pagination (`limit` is ignored, no `continue` token),
//! protobuf and aggregated discovery (`Discovery::run_aggregated`).

pub mod client;
mod discovery;
pub mod objects;
mod selector;
mod server;
mod store;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The longest a watch stays open, whatever `timeoutSeconds` asks (kube-runtime asks
/// 290 s); the client then re-watches from its last resourceVersion.
pub const MAX_WATCH: Duration = Duration::from_secs(120);

/// How often open watches that allow them get a BOOKMARK (the real server: about a
/// minute; short here so tests see them).
pub const BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

/// State shared by the control API, the accept loop and the connections.
struct Shared {
    addr: SocketAddr,
    store: Mutex<store::Store>,
    down: AtomicBool,
    /// Cancelled to cut every open connection at once (`set_down`); then replaced.
    connections: Mutex<CancellationToken>,
    /// Wakes the bookmark ticker when its interval changes.
    retick: Notify,
}

pub struct KubeApi {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
    /// Where [`KubeApi::client`] writes its kubeconfig.
    dir: tempfile::TempDir,
}

impl KubeApi {
    /// Listen on 127.0.0.1:0 with both InferencePool versions installed.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            addr,
            store: Mutex::new(store::Store::new(BOOKMARK_INTERVAL)),
            down: AtomicBool::new(false),
            connections: Mutex::new(CancellationToken::new()),
            retick: Notify::new(),
        });
        let stop = CancellationToken::new();
        tokio::spawn(server::serve(listener, Arc::clone(&shared), stop.clone()));
        let (ticker, token) = (Arc::clone(&shared), stop.clone());
        tokio::spawn(async move {
            loop {
                let every = ticker.store.lock().unwrap().bookmark_every;
                tokio::select! {
                    () = token.cancelled() => return,
                    () = ticker.retick.notified() => {}
                    () = tokio::time::sleep(every) => ticker.store.lock().unwrap().bookmark_all(),
                }
            }
        });
        let dir = tempfile::tempdir().unwrap();
        Self {
            addr,
            shared,
            stop,
            dir,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn store(&self) -> MutexGuard<'_, store::Store> {
        self.shared.store.lock().unwrap()
    }

    /// A kubeconfig (cluster, anonymous user, context with namespace `default`) pointing at
    /// [`Self::url`], written to `dir/kubeconfig`.
    pub fn write_kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let yaml = format!(
            "apiVersion: v1
kind: Config
clusters:
- name: kube-api-test
  cluster:
    server: {url}
users:
- name: kube-api-test
  user: {{}}
contexts:
- name: kube-api-test
  context:
    cluster: kube-api-test
    user: kube-api-test
    namespace: default
current-context: kube-api-test
preferences: {{}}
",
            url = self.url()
        );
        std::fs::write(&path, yaml).unwrap();
        path
    }

    /// Create (ADDED) or replace (MODIFIED) the object named by its apiVersion, kind,
    /// namespace (default `default`) and name. The server sets `resourceVersion`, `uid`
    /// (kept across replaces, see [`objects::uid`]) and `creationTimestamp`. Replacing with
    /// an identical object changes nothing, as on the real server.
    pub fn apply(&self, object: Value) {
        self.store().apply(object);
    }

    /// Delete: a DELETED event carrying the last state at a new resourceVersion. Panics if
    /// the object does not exist (a test bug).
    pub fn delete(&self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        let key = (
            api_version.into(),
            kind.into(),
            namespace.into(),
            name.into(),
        );
        self.store().delete(key);
    }

    /// RBAC: `resource` (`pods`, `endpointslices`, `inferencepools`) answers 403 to get,
    /// list and watch. Watches already open go on, as on a real cluster (RBAC is checked
    /// when a request starts); use [`Self::drop_watches`] to make clients come back.
    pub fn forbid(&self, resource: &str, forbidden: bool) {
        let mut store = self.store();
        if forbidden {
            store.forbidden.insert(resource.to_owned());
        } else {
            store.forbidden.remove(resource);
        }
    }

    /// Install or uninstall an API group version (`inference.networking.k8s.io/v1`): while
    /// uninstalled every path under it is 404, like a missing CRD, and it leaves `/apis`.
    /// Uninstalling ends its open watches (objects are kept for a reinstall).
    pub fn install_group(&self, group_version: &str, installed: bool) {
        let mut store = self.store();
        if installed {
            store.uninstalled.remove(group_version);
        } else {
            store.uninstalled.insert(group_version.to_owned());
            store.end_watches(false, |r| r.api_version() == group_version);
        }
    }

    /// Forget the change history and move the resourceVersion on: a watch from any
    /// resourceVersion handed out so far gets one `410 Expired` ERROR event and its stream
    /// ends, so the client must re-list. Call [`Self::drop_watches`] right after to make
    /// open watches reconnect (a later BOOKMARK would carry a fresh resourceVersion).
    pub fn expire_history(&self) {
        self.store().expire_history();
    }

    /// Cut every open watch mid-stream (the connection closes without the final chunk).
    pub fn drop_watches(&self) {
        self.store().end_watches(true, |_| true);
    }

    /// While down, connections are closed before any response (open ones too): an
    /// unreachable API server. Requests refused this way are not in [`Self::requests`].
    pub fn set_down(&self, down: bool) {
        self.shared.down.store(down, Ordering::SeqCst);
        if down {
            let mut connections = self.shared.connections.lock().unwrap();
            connections.cancel();
            *connections = CancellationToken::new();
        }
    }

    /// A BOOKMARK at the current resourceVersion on every watch that allowed them.
    pub fn bookmark_now(&self) {
        self.store().bookmark_all();
    }

    /// How often the periodic BOOKMARKs go out (the next one `every` from now).
    pub fn set_bookmark_interval(&self, every: Duration) {
        self.store().bookmark_every = every;
        self.shared.retick.notify_one();
    }

    /// BOOKMARK events written to watches so far.
    pub fn bookmarks_sent(&self) -> u64 {
        self.store().bookmarks_sent
    }

    /// Requests in arrival order as `METHOD /path?k=v&…`, query values percent-decoded
    /// (`GET /api/v1/pods?labelSelector=app=vllm&watch=true…`).
    pub fn requests(&self) -> Vec<String> {
        self.store().requests.clone()
    }

    /// Watch streams currently open.
    pub fn open_watches(&self) -> usize {
        self.store().open_watches()
    }

    /// The current resourceVersion (the last change's, or a later expiry's).
    pub fn resource_version(&self) -> u64 {
        self.store().rv
    }
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
