//! inferprobe: a continuous, open-loop probe for LLM inference endpoints.
//!
//! It sends a steady low rate of synthetic streaming requests to each configured target
//! and measures each one as a user feels it (TTFT, TPOT, ITL, E2EL, tokens, and the error
//! category when it fails), exposed as Prometheus metrics.
//!
//! # Layout
//! - [`config`]: file + env + flags → validated [`config::Config`].
//! - [`endpoint`]: the validated description of one target (an endpoint and how to probe
//!   it) that everything else reads.
//! - [`scheduler`]: open-loop gamma/Poisson arrivals per target, concurrency cap.
//! - [`probe`]: one request: HTTP, streaming, deadlines → a [`record::RequestRecord`].
//! - [`sse`]: incremental Server-Sent Events decoder.
//! - [`backend`]: wire formats behind one trait (request bodies, event parsing).
//! - [`record`]: the instants of one probe and the one place durations are derived.
//! - [`error`]: the closed set of error categories and the typed errors behind them.
//! - [`prompt`]: prompts (synthetic, datasets, tokenizer) and models per probe.
//! - [`media`]: the images and videos multimodal probes send.
//! - [`validation`]: response checks a target requires.
//! - [`metrics`]: the metric contract, registered on an injected registry.
//! - [`server`]: `/`, `/metrics`, `/healthz`, `/readyz`, `/config`, `/-/reload`.
//! - [`supervisor`]: one scheduler per target; applies a new configuration target by target.
//! - [`status`]: recent probes per target and the status page.
//! - [`daemon`]: wiring, reload and graceful drain: [`run`], [`run_reloadable`].
//! - [`sim`]: `inferprobe simulate`, the fault-injecting test server; [`demo`] uses it.
//! - [`bench`]: `inferprobe bench`, a finite run with `vllm bench serve`'s summary.
//! - [`canary`]: the correctness canary: greedy checks compared with a reference answer.
//! - [`structure`]: what an agent asks of an answer (`response_format`, `tools`).
//! - [`logprobs`]: per-token logprobs as servers report them (what the canary compares).
//! - [`trace_context`]: a W3C `traceparent` per probe; [`otlp`]: one exported span per probe.
//! - [`cli`], [`logging`], [`shutdown`], [`report`], [`client`]: the rest.

#![forbid(unsafe_code)]

pub mod adapters;
pub mod auth;
pub mod backend;
pub mod bench;
pub mod budget;
pub mod canary;
pub mod check;
pub mod cli;
pub mod client;
pub mod config;
pub mod daemon;
pub mod demo;
pub mod discovery;
pub mod endpoint;
pub mod error;
pub mod eventstream;
pub mod files;
pub mod logging;
pub mod logprobs;
pub mod media;
pub mod metrics;
pub mod otlp;
pub mod prefix_check;
pub mod probe;
pub mod prompt;
pub mod quota;
pub mod record;
pub mod report;
pub mod sampling;
pub mod scheduler;
pub mod scrape_probe;
pub mod server;
pub mod session;
pub mod shutdown;
pub mod sim;
pub mod sse;
pub mod status;
pub mod structure;
pub mod supervisor;
pub mod ticker;
pub mod trace_context;
pub mod validation;

pub use config::Config;
pub use daemon::{DrainReport, Loader, ReloadTrigger, run, run_reloadable};
pub use shutdown::Shutdown;

/// The git revision this binary was built from ("unknown" outside a checkout).
pub const REVISION: &str = env!("BUILD_GIT_REVISION");
