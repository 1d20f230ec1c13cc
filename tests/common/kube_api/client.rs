//! The kube-rs side, for tests: a `kube::Client` built from the kubeconfig the fixture
//! writes (as a daemon would build it), and kube-runtime watcher streams read with bounded
//! waits, their events described as kube prints them (`Init`, `InitApply(a)`, `Apply(a)`,
//! `Delete(a)`, `InitDone`; errors as `Err(…)`).

use std::fmt::Debug;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Config, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::KubeApi;

/// The longest a single expected watch event may take (one backoff step is about 1 s).
pub const EVENT_LIMIT: Duration = Duration::from_secs(10);

/// The longest a whole test may take (the slowest waits out one backoff step).
pub const TEST_LIMIT: Duration = Duration::from_secs(30);

/// `test`, failed if it takes longer than [`TEST_LIMIT`].
pub async fn bounded<F: std::future::Future>(test: F) -> F::Output {
    tokio::time::timeout(TEST_LIMIT, test)
        .await
        .expect("test exceeded its time bound")
}

pub type Events<K> = BoxStream<'static, Result<Event<K>, watcher::Error>>;

impl KubeApi {
    /// A client from [`KubeApi::write_kubeconfig`] (written into the fixture's own
    /// temporary directory).
    pub async fn client(&self) -> Client {
        let path = self.write_kubeconfig(self.dir.path());
        let kubeconfig = Kubeconfig::read_from(path).unwrap();
        let options = KubeConfigOptions::default();
        let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .unwrap();
        // kube falls back to $HTTPS_PROXY; the fixture is on loopback.
        config.proxy_url = None;
        Client::try_from(config).unwrap()
    }
}

/// kube-runtime's watcher with its default backoff, as a daemon would run it.
pub fn events<K>(api: Api<K>, config: watcher::Config) -> Events<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher::watcher(api, config).default_backoff().boxed()
}

pub fn describe<K: ResourceExt>(item: &Result<Event<K>, watcher::Error>) -> String {
    match item {
        Ok(event) => event.to_string(),
        Err(error) => format!("Err({error})"),
    }
}

/// The next item; panics after [`EVENT_LIMIT`].
pub async fn next<K>(events: &mut Events<K>) -> Result<Event<K>, watcher::Error> {
    tokio::time::timeout(EVENT_LIMIT, events.next())
        .await
        .expect("no watch event in time")
        .expect("watcher stream ended")
}

/// Items (described) up to and including the first whose description starts with `last`.
pub async fn until<K: ResourceExt>(events: &mut Events<K>, last: &str) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let item = describe(&next(events).await);
        let done = item.starts_with(last);
        seen.push(item);
        if done {
            return seen;
        }
    }
}

/// Poll the watcher for `period` — it reads BOOKMARKs and reconnects only while polled —
/// and return the items it yielded meanwhile.
pub async fn drive<K: ResourceExt>(events: &mut Events<K>, period: Duration) -> Vec<String> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + period;
    while let Ok(Some(item)) = tokio::time::timeout_at(deadline, events.next()).await {
        seen.push(describe(&item));
    }
    seen
}
