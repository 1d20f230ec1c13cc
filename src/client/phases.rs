//! Timing a new connection's setup: DNS resolution, TCP connect and the TLS handshake.
//!
//! reqwest's connector does all three inside one future. A connector layer wraps that
//! future in a task-local [`Opening`], which the pieces that run inside it stamp: our
//! resolver ([`super::Resolver`]) when it starts and ends, rustls' session cache when the
//! ClientHello is written ([`super::tls`]), i.e. when TCP has connected. The layer stamps
//! the end, and files the result under the connection's local address, where the request
//! that first receives a response on that connection takes it ([`Opened::take`]).
//!
//! Nothing here runs per chunk: once per connection opened, and a map lookup per response.

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use hyper_util::client::legacy::connect::{Connection, HttpInfo};

use crate::metrics::connection::{ConnectionSeries, Phase};

tokio::task_local! {
    static OPENING: Arc<Opening>;
}

/// The stamps of one connection being opened.
#[derive(Debug)]
struct Opening {
    started: Instant,
    resolved: OnceLock<(Instant, Instant)>,
    hello: OnceLock<Instant>,
}

/// Inside a connection being opened: the resolver starts. The returned stamp closes it.
pub(super) fn resolving() -> Option<impl FnOnce()> {
    let opening = OPENING.try_with(Arc::clone).ok()?;
    let start = Instant::now();
    Some(move || {
        let _ = opening.resolved.set((start, Instant::now()));
    })
}

/// Inside a connection being opened: rustls writes the ClientHello.
pub(super) fn hello() {
    let _ = OPENING.try_with(|o| {
        o.hello.get_or_init(Instant::now);
    });
}

/// A new connection's setup, as measured.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub resolve: Option<Duration>,
    /// `None` for a TLS connection whose handshake start was not seen: connect and TLS
    /// cannot then be told apart, and neither is recorded.
    pub connect: Option<Duration>,
    pub tls: Option<Duration>,
    /// When the connection was ready for requests.
    pub ready: Instant,
}

impl Setup {
    fn of(opening: &Opening, ready: Instant, tls: bool) -> Self {
        let resolved = opening.resolved.get().copied();
        let after_dns = resolved.map_or(opening.started, |(_, end)| end);
        let hello = opening.hello.get().copied();
        let (connect, tls) = match (tls, hello) {
            (false, _) => (Some(ready.saturating_duration_since(after_dns)), None),
            (true, Some(hello)) => (
                Some(hello.saturating_duration_since(after_dns)),
                Some(ready.saturating_duration_since(hello)),
            ),
            (true, None) => (None, None),
        };
        Self {
            resolve: resolved.map(|(start, end)| end.saturating_duration_since(start)),
            connect,
            tls,
            ready,
        }
    }

    /// Record the setup phases (those measured).
    pub fn record(&self, series: &ConnectionSeries) {
        let phases = [
            (Phase::Resolve, self.resolve),
            (Phase::Connect, self.connect),
            (Phase::Tls, self.tls),
        ];
        for (phase, took) in phases {
            if let Some(took) = took {
                series.phase(phase, took);
            }
        }
    }
}

/// New connections by their (local, remote) addresses: when each was ready and its setup,
/// until a response on it takes the setup. Every response reads the ready instant, so a
/// request that queued behind a connection's handshake (an HTTP/2 stream waiting for the
/// one connection) does not count that wait as the server's. Old entries are pushed out:
/// a connection ready long before a request never holds it up.
#[derive(Debug, Default)]
pub struct Opened(Mutex<VecDeque<Entry>>);

#[derive(Debug)]
struct Entry {
    addrs: (SocketAddr, SocketAddr),
    setup: Setup,
    taken: bool,
}

/// Far more connections than a target opens within one request's time.
const KEPT: usize = 1024;

/// What a response learns of its connection ([`Opened::response`]).
#[derive(Clone, Copy, Debug)]
pub struct OnConnection {
    /// The setup, for the first response on a connection opened since its request started.
    pub setup: Option<Setup>,
    /// When the connection was ready, if it was opened recently enough to be remembered.
    pub ready: Option<Instant>,
}

impl Opened {
    fn file(&self, addrs: (SocketAddr, SocketAddr), setup: Setup) {
        let mut opened = self.0.lock().unwrap_or_else(|e| e.into_inner());
        opened.retain(|entry| entry.addrs != addrs);
        if opened.len() == KEPT {
            opened.pop_front();
        }
        opened.push_back(Entry {
            addrs,
            setup,
            taken: false,
        });
    }

    /// The connection `response` came on, for a request handed to the client at `sent`.
    /// Its setup goes to the first response only, and only when the connection was ready
    /// after `sent` (one opened earlier and idle since was not waited for).
    pub fn response(&self, response: &reqwest::Response, sent: Instant) -> OnConnection {
        let none = OnConnection {
            setup: None,
            ready: None,
        };
        let Some(info) = response.extensions().get::<HttpInfo>() else {
            return none;
        };
        let addrs = (info.local_addr(), info.remote_addr());
        let mut opened = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = opened.iter_mut().rev().find(|entry| entry.addrs == addrs) else {
            return none;
        };
        let waited = entry.setup.ready >= sent;
        let setup = (waited && !entry.taken).then_some(entry.setup);
        entry.taken |= waited;
        OnConnection {
            setup,
            ready: Some(entry.setup.ready),
        }
    }
}

/// The connector layer: counts each connection opened and times its setup.
#[derive(Clone)]
pub struct PhaseLayer {
    pub series: ConnectionSeries,
    pub opened: Arc<Opened>,
    pub tls: bool,
}

impl<S> tower_layer::Layer<S> for PhaseLayer {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Timed<S> {
        Timed {
            inner,
            layer: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Timed<S> {
    inner: S,
    layer: PhaseLayer,
}

type Boxed<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, R> tower_service::Service<R> for Timed<S>
where
    S: tower_service::Service<R>,
    S::Future: Send + 'static,
    S::Response: Connection,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Boxed<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.layer.series.opened.inc();
        let opening = Arc::new(Opening {
            started: Instant::now(),
            resolved: OnceLock::new(),
            hello: OnceLock::new(),
        });
        let connecting = OPENING.scope(Arc::clone(&opening), self.inner.call(request));
        let layer = self.layer.clone();
        Box::pin(async move {
            let conn = connecting.await?;
            let setup = Setup::of(&opening, Instant::now(), layer.tls);
            let mut extras = http::Extensions::new();
            conn.connected().get_extras(&mut extras);
            if let Some(info) = extras.get::<HttpInfo>() {
                layer
                    .opened
                    .file((info.local_addr(), info.remote_addr()), setup);
            }
            Ok(conn)
        })
    }
}
