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

/// New connections' setups not yet taken by a request, by local address. A connection
/// that never carries a response is pushed out by later ones.
#[derive(Debug, Default)]
pub struct Opened(Mutex<VecDeque<(SocketAddr, Setup)>>);

const KEPT: usize = 64;

impl Opened {
    fn file(&self, local: SocketAddr, setup: Setup) {
        let mut opened = self.0.lock().unwrap_or_else(|e| e.into_inner());
        opened.retain(|(addr, _)| *addr != local);
        if opened.len() == KEPT {
            opened.pop_front();
        }
        opened.push_back((local, setup));
    }

    /// The setup of the connection `response` came on, if it was opened for a request
    /// that started at `sent` or before it (one opened earlier and idle since was not
    /// waited for), and no earlier response took it.
    pub fn take(&self, response: &reqwest::Response, sent: Instant) -> Option<Setup> {
        let local = response.extensions().get::<HttpInfo>()?.local_addr();
        let mut opened = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let at = opened.iter().position(|(addr, _)| *addr == local)?;
        let (_, setup) = opened.remove(at)?;
        (setup.ready >= sent).then_some(setup)
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
                layer.opened.file(info.local_addr(), setup);
            }
            Ok(conn)
        })
    }
}
