//! `inferprobe_runtime_*`: the probing runtime's own counts, read on each scrape. A soak
//! shows a leak here first: a probe task that never ends, a connection that is never
//! dropped. The handle is the probing runtime's, captured at start, because scrapes are
//! served from another thread and runtime.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use tokio::runtime::Handle;

#[derive(Debug)]
pub struct RuntimeCollector {
    handle: Handle,
}

impl RuntimeCollector {
    pub fn new(handle: Handle) -> Self {
        Self { handle }
    }
}

impl Collector for RuntimeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let metrics = self.handle.metrics();
        let gauges = [
            (
                "inferprobe_runtime_alive_tasks",
                "Tasks alive on the probing runtime (probes in flight, schedulers, connections); flat when nothing leaks",
                metrics.num_alive_tasks(),
            ),
            (
                "inferprobe_runtime_workers",
                "Worker threads of the probing runtime",
                metrics.num_workers(),
            ),
        ];
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(value as i64);
            let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}
