//! A histogram of two shapes: classic buckets with exemplars (what the text and OpenMetrics
//! expositions carry) and, beside them, native buckets ([`super::native`]) that the
//! Prometheus protobuf exposition adds to the same series (`[metrics] histograms` decides
//! which a protobuf scrape carries; docs/metrics.md). Every per-target histogram is one:
//! the latencies (with the probe's exemplar), token counts and schedule lag (without).

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::{MetricType, TypedMetric};

use super::Exemplar;
use super::native::NativeBuckets;

#[derive(Clone, Debug)]
pub struct DualHistogram {
    classic: HistogramWithExemplars<Exemplar>,
    native: Arc<Mutex<NativeBuckets>>,
}

impl DualHistogram {
    pub fn new(buckets: impl Iterator<Item = f64>) -> Self {
        Self {
            classic: HistogramWithExemplars::new(buckets),
            native: Arc::default(),
        }
    }

    /// Count `seconds` in both, with the probe's exemplar (timestamped: Prometheus keeps
    /// a native histogram's exemplars only when they carry one).
    pub fn observe(&self, seconds: f64, exemplar: Option<Exemplar>) {
        let at = exemplar.as_ref().map(|_| SystemTime::now());
        self.classic.observe(seconds, exemplar, at);
        self.native
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .observe(seconds);
    }

    /// The native buckets as they are now.
    pub fn native(&self) -> NativeBuckets {
        self.native
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl TypedMetric for DualHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for DualHistogram {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.classic.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}
