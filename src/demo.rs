//! `inferprobe demo`: the simulator and the daemon in one process, no config needed.
//!
//! Two targets (chat with per-chunk usage, completions without) probe a local simulator
//! that injects realistic jitter and every fault at a low rate, so within half a minute
//! /metrics shows all four latency histograms and several error categories: enough to try
//! the dashboards and alerts against.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::{self, RawCanary, RawConfig, RawDuration, RawTarget};
use crate::sim::{self, Fault, SimConfig};
use crate::{Shutdown, daemon};

/// The simulator the demo probes: vLLM-like timings with a few percent of faults.
pub fn demo_simulator() -> SimConfig {
    let faults = [
        (Fault::Http429, 0.03),
        (Fault::Http500, 0.02),
        (Fault::ErrorEvent, 0.02),
        (Fault::Reset, 0.02),
        (Fault::Stall, 0.015),
        (Fault::TtftStall, 0.01),
        (Fault::MalformedJson, 0.01),
        (Fault::NoDone, 0.01),
        (Fault::Empty, 0.01),
    ];
    SimConfig {
        ttft: std::time::Duration::from_millis(120),
        itl: std::time::Duration::from_millis(15),
        jitter: 0.4,
        faults: faults.to_vec(),
        ..SimConfig::default()
    }
}

/// The daemon's configuration for a simulator at `sim`.
pub fn demo_config(
    sim: SocketAddr,
    listen: SocketAddr,
) -> Result<config::Config, config::ConfigError> {
    let seconds = |s: &str| Some(RawDuration::Text(s.into()));
    let target = |name: &str, backend: &str, rate: f64, output: u64, continuous: bool| RawTarget {
        name: Some(name.into()),
        backend: Some(backend.into()),
        rate: Some(rate),
        output_tokens: Some(output),
        continuous_usage_stats: Some(continuous),
        ..RawTarget::default()
    };
    let raw = RawConfig {
        listen: Some(listen.to_string()),
        shutdown_grace: seconds("5s"),
        labels: BTreeMap::from([("node".into(), "demo".into())]),
        defaults: RawTarget {
            url: Some(format!("http://{sim}")),
            model: Some("demo-model".into()),
            input_tokens: Some(64),
            connect_timeout: seconds("1s"),
            ttft_timeout: seconds("3s"),
            stall_timeout: seconds("2s"),
            request_timeout: seconds("15s"),
            ..RawTarget::default()
        },
        targets: vec![
            RawTarget {
                // A correctness canary too: the simulator's toy model answers it.
                canary: Some(RawCanary {
                    interval: seconds("5s"),
                    ..RawCanary::default()
                }),
                ..target("sim-chat", "openai-chat", 2.0, 32, true)
            },
            target("sim-completions", "openai", 1.0, 48, false),
        ],
        ..RawConfig::default()
    };
    config::validate(&raw)
}

pub async fn run(listen: SocketAddr, shutdown: Shutdown) -> anyhow::Result<()> {
    let sim_listener = TcpListener::bind("127.0.0.1:0").await?;
    let sim_addr = sim_listener.local_addr()?;
    let sim_stop = CancellationToken::new();
    let sim = tokio::spawn(sim::serve(sim_listener, demo_simulator(), sim_stop.clone()));

    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    let address = listener.local_addr()?;
    let config = demo_config(sim_addr, address)?;
    println!("inferprobe demo: probing the built-in simulator at http://{sim_addr}");
    println!("  metrics: http://{address}/metrics");
    println!("  health:  http://{address}/healthz  http://{address}/readyz");
    println!("Ctrl-C to stop.");
    let result = daemon::run(listener, config, shutdown).await;
    sim_stop.cancel();
    let _ = sim.await;
    result.map(|_| ())
}
