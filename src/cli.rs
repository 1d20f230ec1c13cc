//! Command-line interface: `run`, `check`, `simulate`, `demo`, and their exit codes
//! (0 ok, 1 runtime failure, 64 bad configuration or usage).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::bench::{self, BenchArgs};
use crate::canary::record::{RecordArgs, RecordError};
use crate::config::{self, EXIT_CONFIG, Overrides};
use crate::logging::LogFormat;
use crate::sim::SimConfig;
use crate::{Loader, ReloadTrigger, Shutdown, daemon, demo, sim};
use std::sync::Arc;

#[derive(Debug, Parser)]
#[command(
    name = "inferprobe",
    version,
    about = "Continuous open-loop probe for LLM inference endpoints"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log format.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "INFERPROBE_LOG_FORMAT"
    )]
    pub log_format: LogFormat,
    /// Log filter, e.g. `info`, `debug`, `inferprobe=debug,info`.
    #[arg(long, global = true, default_value = "info", env = "INFERPROBE_LOG")]
    pub log_level: String,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Probe the configured targets until SIGTERM/SIGINT.
    Run {
        /// TOML configuration file.
        #[arg(long, short, env = "INFERPROBE_CONFIG")]
        config: Option<PathBuf>,
        /// Listen address for /metrics, overriding the config.
        #[arg(long)]
        listen: Option<String>,
        /// Seed all randomness (arrivals, prompts, request ids), for reproducible runs.
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Validate a configuration and exit: 0 if valid, 64 naming the key if not.
    Check {
        #[arg(long, short, env = "INFERPROBE_CONFIG")]
        config: PathBuf,
        /// Check how each secret is given (API keys, mutual-TLS files, OTLP headers)
        /// without reading it, where the secrets are absent (a laptop, CI). `run` always
        /// reads them.
        #[arg(long)]
        no_secrets: bool,
    },
    /// Serve a simulated OpenAI-compatible streaming endpoint.
    Simulate {
        #[arg(long, default_value = "127.0.0.1:8000")]
        listen: SocketAddr,
        // Boxed: the simulator's flags are most of this enum's size.
        #[command(flatten)]
        sim: Box<SimConfig>,
    },
    /// A finite run against one target, summarized like `vllm bench serve`.
    Bench(Box<BenchArgs>),
    /// Correctness canary tools.
    #[command(subcommand)]
    Canary(CanaryCommand),
    /// Probe a built-in simulator: metrics on localhost, no config needed.
    Demo {
        #[arg(long, default_value = "127.0.0.1:9464")]
        listen: SocketAddr,
    },
}

#[derive(Debug, Subcommand)]
pub enum CanaryCommand {
    /// Write a golden file (reference answers with their logprobs) from a trusted endpoint.
    Record(Box<RecordArgs>),
}

/// The exit code for a command line clap could not parse: 0 for `--help` and `--version`
/// (which clap reports as errors), 64 for everything else (docs/operating.md, "Exit codes").
pub fn parse_exit_code(e: &clap::Error) -> u8 {
    if e.use_stderr() { EXIT_CONFIG as u8 } else { 0 }
}

/// Run a command; returns the process exit code.
pub async fn execute(command: Command) -> u8 {
    let shutdown = Shutdown::new();
    let reload = ReloadTrigger::new();
    let reloadable = matches!(command, Command::Run { .. }).then(|| reload.clone());
    let listening = matches!(command, Command::Check { .. } | Command::Canary(_)) || {
        match shutdown.listen_for_signals(reloadable) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(error = %e, "cannot install signal handlers");
                false
            }
        }
    };
    if !listening {
        return 1;
    }
    match command {
        Command::Check { config, no_secrets } => crate::check::check(&config, no_secrets),
        Command::Run {
            config,
            listen,
            seed,
        } => {
            let overrides = Overrides {
                listen,
                seed,
                skip_secrets: false,
            };
            let path = config.clone();
            let loader: Loader = Arc::new(move || config::load(path.as_deref(), &overrides));
            let loaded = match loader() {
                Ok(loaded) => loaded,
                Err(e) => {
                    tracing::error!("{e}");
                    return EXIT_CONFIG as u8;
                }
            };
            let listener = match TcpListener::bind(loaded.listen).await {
                Ok(listener) => listener,
                Err(e) => {
                    tracing::error!(listen = %loaded.listen, error = %e, "cannot listen");
                    return 1;
                }
            };
            match daemon::run_reloadable(listener, loaded, loader, reload, config, shutdown).await {
                Ok(_) => 0,
                Err(e) => {
                    tracing::error!("{e:#}");
                    1
                }
            }
        }
        Command::Simulate { listen, sim } => {
            let listener = match TcpListener::bind(listen).await {
                Ok(listener) => listener,
                Err(e) => {
                    tracing::error!(%listen, error = %e, "cannot listen");
                    return 1;
                }
            };
            let endpoints: Vec<String> = sim::ENDPOINTS
                .iter()
                .map(|(method, path)| format!("{method} {path}"))
                .collect();
            // The bound address: `--listen 127.0.0.1:0` picks a port the line must name.
            let listen = listener.local_addr().unwrap_or(listen);
            tracing::info!(%listen, endpoints = %endpoints.join(", "), "simulator serving");
            let stop = CancellationToken::new();
            let graceful = shutdown.graceful().clone();
            let stopper = stop.clone();
            tokio::spawn(async move {
                graceful.cancelled().await;
                stopper.cancel();
            });
            match sim::serve(listener, *sim, stop).await {
                Ok(()) => 0,
                Err(e) => {
                    tracing::error!("{e}");
                    EXIT_CONFIG as u8
                }
            }
        }
        Command::Bench(args) => run_bench(&args, &shutdown).await,
        Command::Canary(CanaryCommand::Record(args)) => {
            match crate::adapters::record_golden(&args).await {
                Ok(golden) => match crate::canary::record::write(&golden, &args.out) {
                    Ok(()) => {
                        println!(
                            "{}: {} answer(s) from {} ({}){}",
                            args.out.display(),
                            golden.answers.len(),
                            golden.url,
                            golden.model,
                            match golden.adapters.len() {
                                0 => String::new(),
                                n => format!(", and {n} adapter(s)'"),
                            }
                        );
                        0
                    }
                    Err(e) => {
                        eprintln!("error: cannot write {}: {e}", args.out.display());
                        1
                    }
                },
                Err(RecordError::Usage(e)) => {
                    eprintln!("error: {e}");
                    EXIT_CONFIG as u8
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    1
                }
            }
        }
        Command::Demo { listen } => match demo::run(listen, shutdown).await {
            Ok(()) => 0,
            Err(e) => {
                tracing::error!("{e:#}");
                1
            }
        },
    }
}

async fn run_bench(args: &BenchArgs, shutdown: &Shutdown) -> u8 {
    let plan = match bench::plan(args) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_CONFIG as u8;
        }
    };
    let report = match bench::run(args, plan, shutdown).await {
        Ok(report) => report,
        Err(e) => {
            tracing::error!("{e:#}");
            return 1;
        }
    };
    print!("{}", report.text);
    let writes = [
        (args.result_file.as_ref(), report.json.to_string()),
        (args.metrics_file.as_ref(), report.metrics),
    ];
    for (path, contents) in writes {
        if let Some(path) = path {
            if let Err(e) = std::fs::write(path, contents) {
                eprintln!("error: cannot write {}: {e}", path.display());
                return 1;
            }
        }
    }
    0
}
