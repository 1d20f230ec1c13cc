//! A histogram of two shapes: classic buckets with exemplars (what the text and OpenMetrics
//! expositions carry) and, beside them, native buckets ([`super::native`]) that the
//! Prometheus protobuf exposition adds to the same series (`[metrics] histograms` decides
//! which a protobuf scrape carries; docs/metrics.md). Every per-target histogram is one:
//! the latencies (with the probe's exemplar), token counts and schedule lag (without).
//!
//! **One snapshot.** Prometheus rejects a whole scrape when a histogram's native buckets
//! hold more observations than its count (2.x) or any other number (3.x), and marks every
//! series of that scrape stale. The classic part is encoded by prometheus-client and the
//! native buckets are added afterwards ([`super::expose`]), so the two must be read at the
//! same instant whoever observes and whenever: an observation takes this histogram's lock
//! across both shapes, and encoding the classic part takes it too and keeps a copy of the
//! native buckets made under it, which is what the exposition adds. No caller's lock (the
//! metrics' snapshot lock) is needed for this, so a histogram added later is safe too.

use std::cell::Cell;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::{MetricType, TypedMetric};

use super::Exemplar;
use super::native::NativeBuckets;

thread_local! {
    /// Set while this thread encodes a protobuf scrape: only then is a copy of the native
    /// buckets kept (text scrapes have no place for them).
    static KEEP_NATIVE: Cell<bool> = const { Cell::new(false) };
}

/// While the returned guard lives, histograms encoded on this thread keep their native
/// buckets for [`DualHistogram::encoded`].
pub fn keeping_native() -> impl Drop {
    struct Keep;
    impl Drop for Keep {
        fn drop(&mut self) {
            KEEP_NATIVE.with(|k| k.set(false));
        }
    }
    KEEP_NATIVE.with(|k| k.set(true));
    Keep
}

#[derive(Debug, Default)]
struct Native {
    live: NativeBuckets,
    /// The native buckets as they were when the classic part was last encoded.
    encoded: Option<NativeBuckets>,
}

#[derive(Clone, Debug)]
pub struct DualHistogram {
    classic: HistogramWithExemplars<Exemplar>,
    native: Arc<Mutex<Native>>,
    /// When the series was made: its start (created) timestamp.
    created: SystemTime,
}

impl DualHistogram {
    pub fn new(buckets: impl Iterator<Item = f64>) -> Self {
        Self {
            classic: HistogramWithExemplars::new(buckets),
            native: Arc::default(),
            created: SystemTime::now(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Native> {
        self.native.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Count `seconds` in both, with the probe's exemplar (timestamped: Prometheus keeps
    /// a native histogram's exemplars only when they carry one).
    pub fn observe(&self, seconds: f64, exemplar: Option<Exemplar>) {
        let at = exemplar.as_ref().map(|_| SystemTime::now());
        let mut native = self.lock();
        self.classic.observe(seconds, exemplar, at);
        native.live.observe(seconds);
    }

    /// The native buckets as they were when this histogram's classic part was last encoded
    /// on a thread [`keeping_native`], taken (so a stale copy is never used twice).
    pub fn encoded(&self) -> Option<NativeBuckets> {
        self.lock().encoded.take()
    }

    pub fn created(&self) -> SystemTime {
        self.created
    }
}

impl TypedMetric for DualHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for DualHistogram {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let mut native = self.lock();
        self.classic.encode(encoder)?;
        if KEEP_NATIVE.with(Cell::get) {
            native.encoded = Some(native.live.clone());
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}
