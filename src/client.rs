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
//! tells each request whether it opened its connection or took one from the pool
//! ([`execute`]): only a reused connection can lose the keep-alive race.

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::error::DnsError;
use crate::target::{ConnectionMode, Target};

/// Idle connections are kept this long, longer than the gap between probes at typical
/// probe rates, so a warm connection is what most probes use (like a real client's pool).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

tokio::task_local! {
    /// Set when the connector is called on behalf of the request sent in this task.
    static OPENED: Cell<bool>;
}

/// Send `request`; the flag says whether the request went out on a connection it opened
/// (`true`) rather than one from the pool. The pool's connector runs inside the request's
/// own future, so a task-local tells the two apart even with many probes sharing a client.
/// (When a pooled connection frees up after a new one was started, the request takes the
/// pooled one but still reads `true`: the conservative answer, since it forbids a retry.)
pub async fn execute(
    client: &reqwest::Client,
    request: reqwest::Request,
) -> (Result<reqwest::Response, reqwest::Error>, bool) {
    OPENED
        .scope(Cell::new(false), async {
            let result = client.execute(request).await;
            (result, OPENED.with(Cell::get))
        })
        .await
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
        // Outside a probe (no scope) there is nobody to tell.
        let _ = OPENED.try_with(|opened| opened.set(true));
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
