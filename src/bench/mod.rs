//! `inferprobe bench`: a finite run against one target that prints `vllm bench serve`'s
//! summary and writes its result file.
//!
//! Requests go through the same probe, measurement and validation as the daemon, and are
//! recorded into the same metrics, so the summary agrees with what the daemon would export
//! for the same traffic. Unlike the daemon, `--max-concurrency` queues arrivals on the
//! client (as vLLM does: a benchmark measures capacity, a probe must not queue).

mod arrivals;
mod failures;
mod media;
mod result;
mod stats;
mod summary;
mod target;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until};

use crate::Shutdown;
use crate::config::{self, ConfigError};
use crate::metrics::{Format, Metrics};
use crate::probe::{Outcome, Prober};
use crate::prompt::Prompt;

pub use arrivals::{RampUp, Traffic};
pub use stats::{Goodput, Metric, Stats, percentile};
pub use summary::{RequestResult, Summary};

#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// Take the target from this config file (with --target).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Name of the target in --config (default: the only one).
    #[arg(long)]
    pub target: Option<String>,
    /// Without --config: the wire format (see `backend` in docs/configuration.md).
    #[arg(long, default_value = "openai-chat")]
    pub backend: String,
    /// Without --config: the server's base URL.
    #[arg(long)]
    pub url: Option<String>,
    /// Without --config: the endpoint path (default per backend).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Without --config: the model name.
    #[arg(long)]
    pub model: Option<String>,
    /// Without --config: prompt length in tokens.
    #[arg(long, default_value_t = 128)]
    pub input_tokens: u64,
    /// Without --config: max_tokens.
    #[arg(long, default_value_t = 128)]
    pub output_tokens: u64,
    /// Without --config: spread of lengths, as vLLM's --random-range-ratio.
    #[arg(long)]
    pub range_ratio: Option<f64>,
    /// Without --config: a tokenizer.json for exact lengths.
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Without --config: a prompt dataset (ShareGPT .json, .jsonl, or text).
    #[arg(long)]
    pub dataset: Option<String>,
    /// Without --config: environment variable holding the API key.
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Number of requests (default 1000 unless --duration is given).
    #[arg(long)]
    pub num_prompts: Option<usize>,
    /// Stop sending after this long, e.g. 60s.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Requests per second, or inf.
    #[arg(long, default_value_t = f64::INFINITY)]
    pub request_rate: f64,
    /// Gamma shape of the gaps (1 = Poisson).
    #[arg(long, default_value_t = 1.0)]
    pub burstiness: f64,
    /// At most this many requests in flight; the rest wait their turn on the client.
    #[arg(long)]
    pub max_concurrency: Option<usize>,
    /// Deadline for a whole request, e.g. 10m (default 6h, as vLLM's client).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub request_timeout: Option<Duration>,
    /// Deadline for the first token (default: none shorter than the request's).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub ttft_timeout: Option<Duration>,
    /// Longest silence after the first token (default: none shorter than the request's).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub stall_timeout: Option<Duration>,
    #[arg(long, value_enum)]
    pub ramp_up_strategy: Option<RampUp>,
    #[arg(long)]
    pub ramp_up_start_rps: Option<f64>,
    #[arg(long)]
    pub ramp_up_end_rps: Option<f64>,
    /// Which latency blocks to print: ttft, tpot, itl, e2el.
    #[arg(long, default_value = "ttft,tpot,itl")]
    pub percentile_metrics: String,
    /// Percentiles to print, e.g. 50,90,99.
    #[arg(
        long = "metric-percentiles",
        alias = "percentiles",
        default_value = "99"
    )]
    pub percentiles: String,
    /// SLOs for goodput, e.g. --goodput ttft:500 tpot:50 (milliseconds).
    #[arg(long, num_args = 1..)]
    pub goodput: Vec<String>,
    /// Write the JSON result here.
    #[arg(long)]
    pub result_file: Option<PathBuf>,
    /// Include per-request lists (ids, lengths, TTFTs, ITLs, texts, errors) in the result.
    #[arg(long)]
    pub save_detailed: bool,
    /// Write the metrics exposition of the run here (what the daemon would export).
    #[arg(long)]
    pub metrics_file: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print nothing while running.
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub media: media::MediaArgs,
}

/// What a run produced.
#[derive(Debug)]
pub struct BenchReport {
    pub summary: Summary,
    pub text: String,
    pub json: Value,
    /// The run's metrics, in the classic text exposition.
    pub metrics: String,
}

fn usage(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::new(key, reason)
}

pub struct Plan {
    target: Arc<config::Target>,
    traffic: Traffic,
    metrics: Vec<Metric>,
    percentiles: Vec<f64>,
    goodput: Option<Goodput>,
}

/// Check every argument before anything is sent.
pub fn plan(args: &BenchArgs) -> Result<Plan, ConfigError> {
    let target = target::load(args)?;
    let ramp_up = match (
        args.ramp_up_strategy,
        args.ramp_up_start_rps,
        args.ramp_up_end_rps,
    ) {
        (None, None, None) => None,
        (Some(strategy), Some(start), Some(end)) => Some((strategy, start, end)),
        _ => {
            return Err(usage(
                "--ramp-up-strategy",
                "needs --ramp-up-start-rps and --ramp-up-end-rps",
            ));
        }
    };
    let traffic = Traffic {
        rate: args.request_rate,
        burstiness: args.burstiness,
        ramp_up,
    };
    traffic.validate().map_err(|e| usage("--request-rate", e))?;
    if args.max_concurrency == Some(0) {
        return Err(usage("--max-concurrency", "must be at least 1"));
    }
    if args.duration.is_some() && args.num_prompts.is_none() {
        if traffic.rate.is_infinite() {
            return Err(usage(
                "--duration",
                "needs a finite --request-rate (or give --num-prompts)",
            ));
        }
        if ramp_up.is_some() {
            return Err(usage(
                "--ramp-up-strategy",
                "ramps over request numbers: give --num-prompts",
            ));
        }
    }
    let metrics = Metric::parse_list(&args.percentile_metrics)
        .map_err(|e| usage("--percentile-metrics", e))?;
    let percentiles = args
        .percentiles
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=100.0).contains(p))
        })
        .collect::<Option<Vec<f64>>>()
        .ok_or_else(|| {
            usage(
                "--metric-percentiles",
                "expected numbers between 0 and 100, e.g. 50,90,99",
            )
        })?;
    let goodput = Goodput::parse(&args.goodput).map_err(|e| usage("--goodput", e))?;
    Ok(Plan {
        target,
        traffic,
        metrics,
        percentiles,
        goodput,
    })
}

/// Run the benchmark until done or until `shutdown` (then summarize what finished).
pub async fn run(args: &BenchArgs, plan: Plan, shutdown: &Shutdown) -> anyhow::Result<BenchReport> {
    let target = Arc::clone(&plan.target);
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let target_metrics = metrics.target(&target);
    let prober = Arc::new(Prober::observed(
        Arc::clone(&target),
        target_metrics.connection_series(),
    )?);
    prober.started();
    let mut rng = StdRng::seed_from_u64(args.seed);
    // Every send time and every prompt is decided before the clock starts, as vLLM samples
    // its requests first: prompt building (a tokenizer's work) is not part of the run, and
    // `--request-rate inf` is one burst.
    let schedule: Vec<f64> = match (args.num_prompts, args.duration) {
        // Without a count, gaps are drawn until the duration runs out.
        (None, Some(duration)) => {
            let mut times = Vec::new();
            let mut at = plan.traffic.gap(plan.traffic.rate, &mut rng);
            while at <= duration.as_secs_f64() {
                times.push(at);
                at += plan.traffic.gap(plan.traffic.rate, &mut rng);
            }
            times
        }
        (n, _) => plan.traffic.schedule(n.unwrap_or(1000), &mut rng),
    };
    // Seconds of tokenizer work for long exact prompts: on the blocking pool, not on a
    // runtime worker.
    let (prompts, mut rng) = {
        let (target, count) = (Arc::clone(&target), schedule.len());
        tokio::task::spawn_blocking(move || {
            let prompts: Vec<Prompt> = (0..count).map(|_| target.prompts.next(&mut rng)).collect();
            (prompts, rng)
        })
        .await?
    };
    let progress = progress_bar(args, schedule.len());
    let slots = args.max_concurrency.map(|c| Arc::new(Semaphore::new(c)));
    let run_id = format!("{:08x}", rng.random::<u32>());
    let start = Instant::now();
    let deadline = args.duration.map(|d| start + d);
    let mut tasks = JoinSet::new();
    for (i, (&at, prompt)) in schedule.iter().zip(prompts).enumerate() {
        let send_at = start + Duration::from_secs_f64(at);
        if deadline.is_some_and(|d| send_at > d) {
            break;
        }
        tokio::select! {
            () = sleep_until(send_at) => {}
            () = shutdown.graceful().cancelled() => break,
        }
        let request_id = Arc::new(format!("{}bench-{run_id}-{i}", target.request_id_prefix));
        let (prober, slots, abort) = (
            Arc::clone(&prober),
            slots.clone(),
            shutdown.immediate().clone(),
        );
        let (metrics, progress) = (target_metrics.clone(), progress.clone());
        tasks.spawn(async move {
            let arrived = Instant::now();
            let _slot = match &slots {
                Some(slots) => Some(Arc::clone(slots).acquire_owned().await),
                None => None,
            };
            let sent = Instant::now();
            let report = prober
                .probe(&request_id, &prompt, &abort)
                .await
                .judge_workload(&prober.target);
            progress.inc(1);
            if report.retried {
                metrics.retried();
            }
            let Outcome::Finished(outcome) = report.outcome else {
                return None;
            };
            let trace = report.record.trace;
            let id = crate::metrics::ProbeId::new(&request_id, trace.as_ref());
            metrics.record_without_blocking(id, &outcome).await;
            Some(RequestResult {
                request_id: request_id.to_string(),
                trace_id: trace.map(|t| t.trace_hex()),
                start: sent - start,
                queued: sent - arrived,
                error: outcome
                    .as_ref()
                    .err()
                    .map(|e| crate::report::redact(&crate::error::chain(e), &prober.target))
                    .unwrap_or_default(),
                outcome: outcome.map_err(|e| e.category()),
                input_tokens: u64::from(prompt.input_tokens),
                text: report.record.response.text,
            })
        });
    }
    let mut results = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        if let Ok(Some(result)) = joined {
            results.push(result);
        }
    }
    let duration = start.elapsed();
    progress.finish_and_clear();
    results.sort_by_key(|r| r.start);

    let summary = Summary::compute(
        &results,
        duration,
        &plan.metrics,
        &plan.percentiles,
        plan.goodput.as_ref(),
    );
    let configured_rate = plan.traffic.rate.is_finite().then_some(plan.traffic.rate);
    let text = summary.render(args.max_concurrency, configured_rate);
    let json = result::json(args, &plan, &summary, &results);
    let metrics =
        String::from_utf8(metrics.encode(&registry, Format::Text)?).map_err(|_| std::fmt::Error)?;
    Ok(BenchReport {
        summary,
        text,
        json,
        metrics,
    })
}

fn progress_bar(args: &BenchArgs, n: usize) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if args.quiet || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    match n {
        usize::MAX => indicatif::ProgressBar::new_spinner(),
        n => indicatif::ProgressBar::new(n as u64),
    }
}
