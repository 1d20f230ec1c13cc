//! A discovery source's health: `inferprobe_discovery_up` and one log line per change, so
//! an operator hears once that a block is failing (and why), and once that it recovered.

/// Whether a source is answering, in the block's `discovery_up` and the log: one line when
/// it starts failing (and when the reason changes), one when it recovers.
pub struct Health {
    block: String,
    up: prometheus_client::metrics::gauge::Gauge,
    failing: Option<String>,
}

impl Health {
    pub fn new(block: &str, up: prometheus_client::metrics::gauge::Gauge) -> Self {
        Self {
            block: block.to_owned(),
            up,
            failing: Some(String::new()),
        }
    }

    pub fn ok(&mut self) {
        if let Some(reason) = self.failing.take() {
            if !reason.is_empty() {
                tracing::info!(discovery = %self.block, "discovery recovered");
            }
        }
        self.up.set(1);
    }

    pub fn failed(&mut self, reason: String) {
        self.up.set(0);
        if self.failing.as_deref() != Some(reason.as_str()) {
            tracing::warn!(discovery = %self.block, %reason,
                "discovery failing; its last known targets are kept and probed");
            self.failing = Some(reason);
        }
    }
}
