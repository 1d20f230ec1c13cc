//! `inferprobe demo`: the simulator and the daemon in one process, no config needed.
//!
//! Two targets (chat with per-chunk usage, completions without) probe a local simulator
//! that injects realistic jitter and every fault at a low rate, so within half a minute
//! /metrics shows all four latency histograms and several error categories: enough to try
//! the dashboards and alerts against. Two more are pools behind the simulator's gateway
//! over three replicas, one routing by prefix and one by turn, each with a prefix-cache
//! check (docs/prefix-cache.md): the first hits, the second misses and would be ticketed.
//! The chat target and the prefix pool hold an agent's session every 20 s (docs/sessions.md).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::{
    self, RawCanary, RawConfig, RawDepth, RawDuration, RawPrefixCache, RawSession, RawTarget,
};
use crate::sim::{self, Fault, Route, SimConfig};
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
        (Fault::ContextLength, 0.01),
    ];
    SimConfig {
        ttft: std::time::Duration::from_millis(120),
        itl: std::time::Duration::from_millis(15),
        jitter: 0.4,
        faults: faults.to_vec(),
        // vLLM's window, advertised in /v1/models: the sessions' depth turn reads it.
        max_model_len: Some(8192),
        ..SimConfig::default()
    }
}

/// A gateway over three replicas of the demo's simulator, routing by `route`; each
/// replica's prefill costs 50 µs per prompt token its cache did not serve. No faults: the
/// two other targets show the error categories, and a pair with a failed request is judged
/// by nothing, so at the simulator's 14% a request, a third of the pools' pairs said
/// nothing and the demo's 30 s sometimes passed with no miss by turn to show.
pub fn demo_gateway(route: Route) -> SimConfig {
    let mut config = demo_simulator();
    config.faults.clear();
    config.gateway.replicas = 3;
    config.gateway.route = route;
    config.prefill.per_token = std::time::Duration::from_micros(50);
    config
}

/// Where the demo's simulators listen.
#[derive(Clone, Copy, Debug)]
pub struct DemoSims {
    pub server: SocketAddr,
    pub affinity: SocketAddr,
    pub round_robin: SocketAddr,
}

/// The daemon's configuration for the demo's simulators.
pub fn demo_config(
    sims: DemoSims,
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
    // A session every 20 s: short gaps, so the demo shows every turn kind within a minute.
    let session = |pool: bool| RawSession {
        interval: seconds("20s"),
        human_gap: seconds("2s"),
        tool_gap: seconds("500ms"),
        long_gap: seconds("5s"),
        block_tokens: Some(16),
        depth_tokens: (!pool).then(|| RawDepth::Named("served".into())),
        depth_every: (!pool).then_some(3),
        affinity_headers: pool.then(|| vec!["x-session-id".into()]),
        served_by: pool.then(|| vec!["x-served-by".into()]),
        ..RawSession::default()
    };
    // Sessions only through the prefix pool: their requests between a prefix-cache pair's
    // two would send the round-robin pool's second request back to the first's replica
    // now and then, and that pool is the demo's example of a pair that misses.
    let pool = |name: &str, at: SocketAddr, sessions: bool| RawTarget {
        url: Some(format!("http://{at}")),
        session: sessions.then(|| session(true)),
        prefix_cache: Some(RawPrefixCache {
            interval: seconds("5s"),
            prefix_tokens: Some(512),
            // The simulator's blocks, as vLLM's on GPU.
            block_tokens: Some(16),
            objective: Some(0.8),
            ..RawPrefixCache::default()
        }),
        ..target(name, "openai-chat", 1.0, 16, false)
    };
    let raw = RawConfig {
        listen: Some(listen.to_string()),
        shutdown_grace: seconds("5s"),
        labels: BTreeMap::from([("node".into(), "demo".into())]),
        defaults: RawTarget {
            url: Some(format!("http://{}", sims.server)),
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
                session: Some(session(false)),
                ..target("sim-chat", "openai-chat", 2.0, 32, true)
            },
            target("sim-completions", "openai", 1.0, 48, false),
            pool("sim-pool-prefix-affinity", sims.affinity, true),
            pool("sim-pool-round-robin", sims.round_robin, false),
        ],
        ..RawConfig::default()
    };
    config::validate(&raw)
}

pub async fn run(listen: SocketAddr, shutdown: Shutdown) -> anyhow::Result<()> {
    let sim_stop = CancellationToken::new();
    let mut servers = Vec::new();
    let mut addresses = Vec::new();
    for config in [
        demo_simulator(),
        demo_gateway(Route::PrefixAffinity),
        demo_gateway(Route::RoundRobin),
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        addresses.push(listener.local_addr()?);
        servers.push(tokio::spawn(sim::serve(listener, config, sim_stop.clone())));
    }
    let sims = DemoSims {
        server: addresses[0],
        affinity: addresses[1],
        round_robin: addresses[2],
    };

    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    let address = listener.local_addr()?;
    let config = demo_config(sims, address)?;
    println!(
        "inferprobe demo: probing the built-in simulator at http://{}",
        sims.server
    );
    println!(
        "  and two gateways over three replicas each: by prefix http://{}, by turn http://{}",
        sims.affinity, sims.round_robin
    );
    println!("  metrics: http://{address}/metrics");
    println!("  health:  http://{address}/healthz  http://{address}/readyz");
    println!("Ctrl-C to stop.");
    let result = daemon::run(listener, config, shutdown).await;
    sim_stop.cancel();
    for server in servers {
        let _ = server.await;
    }
    result.map(|_| ())
}
