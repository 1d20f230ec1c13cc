//! A target's connection series: where the time went before the first byte (DNS, TCP
//! connect, TLS handshake, the wait for response headers) and when the certificates on its
//! TLS connections expire. The client ([`crate::client`]) measures; this module owns the
//! series. Each is made on its first observation: a plain-HTTP target has no `tls` phase
//! and no certificate series, an IP-literal URL no `resolve` phase, rather than zeros that
//! would read as instant handshakes or long-expired certificates.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

use super::{DualHistogram, F64Gauge, LabeledFamily, TargetLabels, labels};

/// The phases of a request, as the blackbox exporter's `probe_http_duration_seconds` names
/// them. The first three exist only for a request that opened its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Resolve,
    Connect,
    Tls,
    Processing,
}

impl Phase {
    pub const ALL: [Phase; 4] = [Self::Resolve, Self::Connect, Self::Tls, Self::Processing];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Resolve => "resolve",
            Self::Connect => "connect",
            Self::Tls => "tls",
            Self::Processing => "processing",
        }
    }
}

// `Phase::ALL` lists the phases in their declared order: a phase's discriminant is its slot.
const _: () = {
    let mut i = 0;
    while i < Phase::ALL.len() {
        assert!(Phase::ALL[i] as usize == i);
        i += 1;
    }
};

/// Whose certificate chain an expiry is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chain {
    /// The chain the target presented (its leaf and intermediates).
    Server,
    /// The client certificate the probe presents for mutual TLS.
    Client,
}

impl Chain {
    fn as_str(self) -> &'static str {
        match self {
            Self::Server => "server",
            Self::Client => "client",
        }
    }
}

pub(super) const PHASE_FAMILY: &str = "inferprobe_connection_phase_seconds";

type WithPair = (TargetLabels, [(&'static str, &'static str); 1]);

/// From half a millisecond (a DNS cache hit, a local connect) doubling to 16 s (a server
/// queueing the request before its headers).
fn phase_buckets() -> impl Iterator<Item = f64> {
    (0..16).map(|k| 0.0005 * f64::from(1u32 << k))
}

#[derive(Clone, Debug, Default)]
pub(super) struct ConnectionFamilies {
    phases: LabeledFamily<WithPair, DualHistogram>,
    expiry: LabeledFamily<WithPair, F64Gauge>,
}

impl ConnectionFamilies {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "connection_phase_seconds",
            "Where a request's time went before its response headers, by phase: resolve (DNS), connect (TCP), tls (the handshake), each only for a request that opened its connection (a reused one has none), and processing (from the connection being ready, or the request being sent on a reused one, to the response headers), for every request that got headers",
            self.phases.clone(),
        );
        r.register(
            "tls_earliest_cert_expiry_timestamp_seconds",
            "The earliest notAfter, as Unix seconds, of a certificate chain on the target's TLS connections: chain=\"server\" the leaf and intermediates the target last presented in a full handshake, chain=\"client\" the client certificate the probe presents",
            self.expiry.clone(),
        );
    }

    pub(super) fn remove(&self, target: &TargetLabels) {
        self.phases.retain(|(t, _)| t != target);
        self.expiry.retain(|(t, _)| t != target);
    }

    /// The histogram a protobuf scrape adds native buckets to, by its exposed labels (the
    /// target's, then `phase`).
    pub(super) fn phase_histogram(&self, exposed: &TargetLabels) -> Option<DualHistogram> {
        let (last, target) = exposed.pairs().split_last()?;
        let phase = Phase::ALL
            .into_iter()
            .find(|p| last.0 == labels::PHASE && last.1 == p.as_str())?;
        let key = (
            TargetLabels::new(target.to_vec()),
            [(labels::PHASE, phase.as_str())],
        );
        self.phases.get(&key)
    }

    pub(super) fn series(
        &self,
        target: &TargetLabels,
        opened: Counter,
        registered: LabeledFamily<TargetLabels, Counter>,
    ) -> ConnectionSeries {
        ConnectionSeries {
            opened,
            made: Some(Arc::new(Made {
                labels: target.clone(),
                families: self.clone(),
                registered,
                phases: Default::default(),
            })),
        }
    }
}

#[derive(Debug)]
struct Made {
    labels: TargetLabels,
    families: ConnectionFamilies,
    /// Holds the target while it is registered: no series is made for a removed one.
    registered: LabeledFamily<TargetLabels, Counter>,
    phases: [OnceLock<DualHistogram>; 4],
}

/// One target's connection series, handed to its HTTP client. The default records
/// nothing but the connection count (a client built for a one-off command).
#[derive(Clone, Debug, Default)]
pub struct ConnectionSeries {
    /// Every connection the client opens.
    pub opened: Counter,
    made: Option<Arc<Made>>,
}

impl ConnectionSeries {
    /// A series with the counter alone, as [`Self::default`] but counting into `opened`.
    pub fn counting(opened: Counter) -> Self {
        Self { opened, made: None }
    }

    pub fn phase(&self, phase: Phase, took: Duration) {
        let Some(made) = &self.made else { return };
        // The enum's order is `Phase::ALL`'s: its discriminant is its slot.
        let index = phase as usize;
        let histogram = match made.phases[index].get() {
            Some(histogram) => histogram,
            None if made.registered.get(&made.labels).is_none() => return,
            None => made.phases[index].get_or_init(|| {
                let key = (made.labels.clone(), [(labels::PHASE, phase.as_str())]);
                made.families
                    .phases
                    .get_or_insert(key, || DualHistogram::new(phase_buckets()))
            }),
        };
        histogram.observe(took.as_secs_f64(), None);
    }

    /// Forget the target's certificate expiries (its configuration changed).
    pub fn clear_expiry(&self) {
        if let Some(made) = &self.made {
            made.families.expiry.retain(|(t, _)| *t != made.labels);
        }
    }

    /// The earliest notAfter of `chain`, as Unix seconds.
    pub fn cert_expiry(&self, chain: Chain, not_after: f64) {
        let Some(made) = &self.made else { return };
        if made.registered.get(&made.labels).is_none() {
            return;
        }
        let key = (made.labels.clone(), [(labels::CHAIN, chain.as_str())]);
        made.families
            .expiry
            .get_or_insert(key, F64Gauge::default)
            .set(not_after);
    }
}
