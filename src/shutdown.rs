//! Shutdown: one handle that fans out to every task.
//!
//! The first SIGTERM/SIGINT begins a graceful shutdown: schedulers stop, /readyz fails, and
//! in-flight probes may finish within the grace period. A second signal (or the end of the
//! grace period) cuts them. Tests use the same handle without signals.

use tokio_util::sync::CancellationToken;

#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    graceful: CancellationToken,
    immediate: CancellationToken,
}

impl Shutdown {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stop scheduling; let in-flight probes finish within the grace period.
    pub fn begin(&self) {
        self.graceful.cancel();
    }

    /// Stop everything now: in-flight probes are cut and not counted.
    pub fn now(&self) {
        self.graceful.cancel();
        self.immediate.cancel();
    }

    pub fn graceful(&self) -> &CancellationToken {
        &self.graceful
    }

    pub fn immediate(&self) -> &CancellationToken {
        &self.immediate
    }

    /// Route SIGTERM and SIGINT to this handle until the process exits.
    pub fn listen_for_signals(&self) -> std::io::Result<()> {
        use futures_util::StreamExt;
        use signal_hook::consts::{SIGINT, SIGTERM};

        let mut signals = signal_hook_tokio::Signals::new([SIGTERM, SIGINT])?;
        let this = self.clone();
        tokio::spawn(async move {
            while let Some(signal) = signals.next().await {
                if this.graceful.is_cancelled() {
                    tracing::warn!(signal, "second signal: stopping in-flight probes now");
                    this.now();
                } else {
                    tracing::info!(signal, "signal received: shutting down gracefully");
                    this.begin();
                }
            }
        });
        Ok(())
    }
}
