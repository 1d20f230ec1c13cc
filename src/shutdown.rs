//! Shutdown: one handle that fans out to every task; and the process's signals.
//!
//! The first SIGTERM/SIGINT begins a graceful shutdown: schedulers stop, /readyz fails, and
//! in-flight probes may finish within the grace period. A second signal (or the end of the
//! grace period) cuts them. SIGHUP asks for a configuration reload. Tests use the same
//! handles without signals.

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

    /// Route SIGTERM and SIGINT to this handle, and SIGHUP to `reload`, until the process
    /// exits. Without a `reload`, SIGHUP is logged and ignored (not the default: exit).
    pub fn listen_for_signals(&self, reload: Option<crate::ReloadTrigger>) -> std::io::Result<()> {
        use futures_util::StreamExt;
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

        let mut signals = signal_hook_tokio::Signals::new([SIGTERM, SIGINT, SIGHUP])?;
        let this = self.clone();
        tokio::spawn(async move {
            while let Some(signal) = signals.next().await {
                if signal == SIGHUP {
                    match &reload {
                        Some(reload) => {
                            tracing::info!("SIGHUP: reloading the configuration");
                            reload.trigger();
                        }
                        None => tracing::warn!("SIGHUP ignored: nothing to reload"),
                    }
                } else if this.graceful.is_cancelled() {
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
