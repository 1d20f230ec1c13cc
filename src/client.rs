//! The HTTP client each target probes with.
//!
//! One reqwest client per target: its own connection pool and connect timeout, redirects
//! off (a probe must measure the endpoint it was given), no proxy from the environment,
//! and a resolver of our own so that DNS failures surface as a typed [`DnsError`] and are
//! categorized by type rather than by message.
//!
//! TLS trusts the system's roots plus any configured CA bundle, presents a client
//! certificate for mutual TLS when configured, and skips verification only when told to
//! (logged as a warning). With `connection = "fresh"` no connection is kept idle, so every
//! probe pays connection setup inside its TTFT, as a new user does. A connector layer
//! counts the connections actually opened, so dashboards can tell the two modes apart, and
//! [`Reused`] remembers which connections carried a response: only a reused connection can
//! lose the keep-alive race.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::client::legacy::connect::HttpInfo;
use prometheus_client::metrics::counter::Counter;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::endpoint::{ConnectionMode, Target};
use crate::error::DnsError;

/// Idle connections are kept this long, longer than the gap between probes at typical
/// probe rates, so a warm connection is what most probes use (like a real client's pool).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Local addresses of the connections that carried a response, most recent last: the
/// connections a later request may have reused. A few hundred is far more than a target's
/// pool holds at once.
#[derive(Debug, Default)]
pub struct Reused(Mutex<VecDeque<SocketAddr>>);

const REMEMBERED: usize = 256;

impl Reused {
    /// `response` came back: its connection may be reused.
    pub fn carried(&self, response: &reqwest::Response) {
        let Some(info) = response.extensions().get::<HttpInfo>() else {
            return;
        };
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !seen.contains(&info.local_addr()) {
            if seen.len() == REMEMBERED {
                seen.pop_front();
            }
            seen.push_back(info.local_addr());
        }
    }

    /// Whether `error` happened on a connection that had carried a response before (a
    /// reused one), rather than one opened for this request. The connection's addresses
    /// travel in the error (hyper-util's connect info). A connection that fails is
    /// forgotten: whatever reuses its port next is new.
    pub fn failed_on_reused(&self, error: &reqwest::Error) -> bool {
        let Some(local) = failed_connection(error) else {
            return false;
        };
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let position = seen.iter().position(|addr| *addr == local);
        position.map(|i| seen.remove(i)).is_some()
    }
}

/// The local address of the connection a request failed on, if the error says.
fn failed_connection(error: &reqwest::Error) -> Option<SocketAddr> {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(legacy) = cause.downcast_ref::<hyper_util::client::legacy::Error>() {
            let mut extensions = http::Extensions::new();
            legacy.connect_info()?.get_extras(&mut extensions);
            return extensions.get::<HttpInfo>().map(HttpInfo::local_addr);
        }
        source = cause.source();
    }
    None
}

/// The client for `target`; `connections` counts every connection it opens.
pub fn build(target: &Target, connections: Counter) -> Result<reqwest::Client, reqwest::Error> {
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("inferprobe/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(target.timeouts.connect)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .tcp_nodelay(true)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .dns_resolver(Arc::new(Resolver))
        .connector_layer(CountLayer(connections));
    if target.connection == ConnectionMode::Fresh {
        builder = builder.pool_max_idle_per_host(0);
    }
    let tls = &target.tls;
    if let Some(pem) = &tls.ca_pem {
        builder = builder.tls_certs_merge(reqwest::Certificate::from_pem_bundle(pem)?);
    }
    if let Some(pem) = &tls.identity_pem {
        builder = builder.identity(reqwest::Identity::from_pem(pem.expose().as_bytes())?);
    }
    if tls.insecure_skip_verify {
        tracing::warn!(target = %target.name, "TLS certificate verification is disabled (insecure_skip_verify)");
        builder = builder.tls_danger_accept_invalid_certs(true);
    }
    builder.build()
}

/// Counts calls of the connector, which the pool makes once per new connection.
#[derive(Clone)]
struct CountLayer(Counter);

impl<S> tower_layer::Layer<S> for CountLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            count: self.0.clone(),
        }
    }
}

#[derive(Clone)]
struct Counted<S> {
    inner: S,
    count: Counter,
}

impl<S: tower_service::Service<R>, R> tower_service::Service<R> for Counted<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        self.count.inc();
        self.inner.call(request)
    }
}

/// getaddrinfo through tokio, with errors wrapped in [`DnsError`].
#[derive(Debug)]
struct Resolver;

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let lookup = tokio::net::lookup_host((name.as_str(), 0)).await;
            match lookup {
                Ok(addrs) => {
                    let addrs: Vec<SocketAddr> = addrs.collect();
                    if addrs.is_empty() {
                        let source = std::io::Error::other("no addresses");
                        return Err(Box::new(DnsError { host, source }) as _);
                    }
                    Ok(Box::new(addrs.into_iter()) as Addrs)
                }
                Err(source) => Err(Box::new(DnsError { host, source }) as _),
            }
        })
    }
}
