//! The HTTP client each target probes with.
//!
//! One reqwest client per target: its own connection pool and connect timeout, redirects
//! off (a probe must measure the endpoint it was given), no proxy from the environment,
//! and a resolver of our own so that DNS failures surface as a typed [`DnsError`] and are
//! categorized by type rather than by message.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::config::Target;
use crate::error::DnsError;

/// Idle connections are kept this long, longer than the gap between probes at typical
/// probe rates, so a warm connection is what most probes use (like a real client's pool).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

pub fn build(target: &Target) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .user_agent(concat!("inferprobe/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(target.timeouts.connect)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .tcp_nodelay(true)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .dns_resolver(Arc::new(Resolver))
        .build()
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
