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
//! times their setup ([`phases`]: DNS, TCP connect, TLS), which the request that first
//! uses a new connection records with its wait for headers; the TLS configuration is our
//! own ([`tls`]) so that the chain a target presents, and when it expires, can be read.
//! [`Reused`] remembers which connections carried a response: only a reused connection can
//! lose the keep-alive race.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use hyper_util::client::legacy::connect::HttpInfo;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::endpoint::{ConnectionMode, Target};
use crate::error::DnsError;
use crate::metrics::connection::{Chain, ConnectionSeries, Phase};
use crate::record::ConnectionTimes;

mod phases;
pub mod tls;

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

/// A target's HTTP client and what it measures of its connections.
#[derive(Debug)]
pub struct Client {
    pub http: reqwest::Client,
    series: ConnectionSeries,
    opened: Arc<phases::Opened>,
    /// For an HTTPS target: its TLS configuration and the watch on its chain's expiry.
    certs: Option<(Arc<rustls::ClientConfig>, Arc<tls::CertWatch>)>,
    /// The client certificate's earliest notAfter, for an HTTPS target that presents one.
    client_expiry: Option<i64>,
    host: Option<(String, u16)>,
    connect_timeout: Duration,
}

/// Why a target's client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Tls(#[from] tls::TlsSetupError),
    #[error(transparent)]
    Http(#[from] reqwest::Error),
}

/// The client for `target`, recording its connections in `series`.
pub fn build(target: &Target, series: ConnectionSeries) -> Result<Client, BuildError> {
    let https = target.url.scheme() == "https";
    let opened = Arc::new(phases::Opened::default());
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("inferprobe/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(target.timeouts.connect)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .tcp_nodelay(true)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .dns_resolver(Arc::new(Resolver))
        .connector_layer(phases::PhaseLayer {
            series: series.clone(),
            opened: Arc::clone(&opened),
            tls: https,
        });
    if target.connection == ConnectionMode::Fresh {
        builder = builder.pool_max_idle_per_host(0);
    }
    if target.tls.insecure_skip_verify {
        tracing::warn!(target = %target.name, "TLS certificate verification is disabled (insecure_skip_verify)");
    }
    let resume = target.connection != ConnectionMode::Fresh;
    let tls::Built {
        config,
        watch,
        client_expiry,
    } = tls::config(&target.tls, &series, resume)?;
    let config = Arc::new(config);
    builder = builder.tls_backend_preconfigured(rustls::ClientConfig::clone(&config));
    let host = target
        .url
        .host_str()
        .zip(target.url.port_or_known_default())
        .map(|(host, port)| (host.trim_matches(['[', ']']).to_owned(), port));
    Ok(Client {
        http: builder.build()?,
        series,
        opened,
        certs: https.then_some((config, watch)),
        client_expiry: client_expiry.filter(|_| https),
        host,
        connect_timeout: target.timeouts.connect,
    })
}

impl Client {
    /// The prober starts: the target's certificate series are this configuration's from
    /// now on (a restarted target's old chains go; its client certificate is recorded).
    pub fn started(&self) {
        self.series.clear_expiry();
        if let Some(expiry) = self.client_expiry {
            self.series.cert_expiry(Chain::Client, expiry as f64);
        }
    }

    /// A response's headers arrived at `at` for a request handed to the client at `sent`:
    /// record the setup of the connection it opened (if it did) and the wait for its
    /// headers; keep the certificate expiry fresh.
    pub fn response(
        &self,
        response: &reqwest::Response,
        sent: Instant,
        at: Instant,
    ) -> ConnectionTimes {
        let connection = self.opened.response(response, sent);
        if let Some(setup) = &connection.setup {
            setup.record(&self.series);
        }
        let waited_from = connection.ready.map_or(sent, |ready| ready.max(sent));
        let processing = at.saturating_duration_since(waited_from);
        self.series.phase(Phase::Processing, processing);
        if let (Some((config, watch)), Some((host, port))) = (&self.certs, &self.host)
            && watch.claim_refresh()
        {
            let (config, watch) = (Arc::clone(config), Arc::clone(watch));
            let (host, port, timeout) = (host.clone(), *port, self.connect_timeout);
            tokio::spawn(async move { tls::refresh(&config, watch, host, port, timeout).await });
        }
        let setup = connection.setup;
        ConnectionTimes {
            resolve: setup.and_then(|s| s.resolve),
            connect: setup.and_then(|s| s.connect),
            tls: setup.and_then(|s| s.tls),
            processing,
        }
    }

    /// The earliest notAfter (Unix seconds) of the chain the target last presented in a
    /// full handshake, if any was seen.
    pub fn server_expiry(&self) -> Option<i64> {
        self.certs.as_ref().and_then(|(_, watch)| watch.expiry())
    }
}

/// getaddrinfo through tokio, with errors wrapped in [`DnsError`].
#[derive(Debug)]
struct Resolver;

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let stamp = phases::resolving();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let lookup = tokio::net::lookup_host((name.as_str(), 0)).await;
            if let Some(stamp) = stamp {
                stamp();
            }
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
