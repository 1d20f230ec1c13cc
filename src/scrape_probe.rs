//! `GET /probe?target=…`: one probe of a configured target at scrape time, its measurements
//! answered in that scrape, for teams whose Prometheus drives probing (the Prometheus
//! Operator's `Probe`, a blackbox exporter's `relabel_configs`). The continuous open-loop
//! stream stays what the SLOs and alerts read; docs/probe-endpoint.md says when each fits.
//!
//! Only what is configured is probed: `target` names a running target by its name (a
//! discovered replica's too) or by its URL (the endpoint's, or its server's origin), never an address of the caller's choosing,
//! so the endpoint cannot be turned on other hosts. At most [`MAX_AT_ONCE`] run at once; a
//! scrape beyond that is refused at once (503) rather than queued past its timeout. Each
//! target has a client of its own here, apart from the stream's, so these probes count in
//! none of the daemon's series; they run on the probing runtime, not the endpoints' thread.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use http::StatusCode;
use prometheus_client::metrics::counter::Counter;
use rand::RngExt as _;
use tokio::runtime::Handle;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::endpoint::Target;
use crate::error::ProbeError;
use crate::probe::{Outcome, ProbeReport, Prober};
use crate::record::Measurement;

/// Scrape-driven probes in flight at once, over every target.
pub const MAX_AT_ONCE: usize = 4;

/// Taken off the scrape's timeout (`X-Prometheus-Scrape-Timeout-Seconds`), so the answer
/// reaches Prometheus before it gives up; the blackbox exporter's `--timeout-offset`.
const TIMEOUT_OFFSET: Duration = Duration::from_millis(500);

/// A caller that sends no scrape timeout (curl) gets this, as a blackbox module's default.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The running targets and their scrape-time probers.
#[derive(Debug)]
pub struct ScrapeProbes {
    targets: RwLock<BTreeMap<String, Arc<Target>>>,
    /// Built on a target's first `/probe`, rebuilt when its configuration changed.
    probers: Mutex<HashMap<String, Arc<Prober>>>,
    slots: Arc<Semaphore>,
    /// The targets with a probe in flight.
    in_flight: Mutex<HashSet<String>>,
    runtime: Handle,
    /// Cancelled at shutdown: a probe in flight stops.
    abort: CancellationToken,
}

/// An answer: its status and its body (the exposition, or why not).
pub type Answer = (StatusCode, String);

impl ScrapeProbes {
    /// Probes run on `runtime` and stop when `abort` is cancelled.
    pub fn new(runtime: Handle, abort: CancellationToken) -> Self {
        Self {
            targets: RwLock::default(),
            probers: Mutex::default(),
            slots: Arc::new(Semaphore::new(MAX_AT_ONCE)),
            in_flight: Mutex::default(),
            runtime,
            abort,
        }
    }

    /// `target` runs (or runs with a new configuration).
    pub fn set(&self, target: Arc<Target>) {
        let mut targets = self.targets.write().unwrap_or_else(|e| e.into_inner());
        targets.insert(target.id.clone(), target);
    }

    /// The target `id` stopped.
    pub fn remove(&self, id: &str) {
        self.targets
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        self.probers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    /// The target a query names: `target` is a name or a URL (the endpoint's, the `url`
    /// it was configured with, or the server's origin, in that order of preference);
    /// `module`, when given, must name the target (it chooses among targets of one URL).
    /// Only targets that allow it (`probe_endpoint = true`) are ever found.
    fn find(&self, query: Option<&str>) -> Result<Arc<Target>, Answer> {
        let pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .into_owned()
                .collect();
        let get = |key: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        let bad = |why: String| Err((StatusCode::BAD_REQUEST, why + "\n"));
        let Some(wanted) = get("target").filter(|t| !t.is_empty()) else {
            return bad("`target` is required: a configured target's name or URL".into());
        };
        let module = get("module").filter(|m| !m.is_empty());
        let targets = self.targets.read().unwrap_or_else(|e| e.into_inner());
        let allowed = |t: &&Arc<Target>| t.probe_endpoint;
        if let Some(m) = module
            && !targets.get(m).is_some_and(|t| allowed(&t))
        {
            return bad(format!("unknown module `{m}`: a module is a target's name"));
        }
        let chosen = |t: &&Arc<Target>| allowed(t) && module.is_none_or(|m| m == t.id);
        if let Some(target) = targets.get(wanted).filter(chosen) {
            return Ok(Arc::clone(target));
        }
        let wanted = match url::Url::parse(wanted) {
            Ok(url) => url,
            Err(_) => return Err(not_found()),
        };
        let path = |u: &url::Url| u.path().trim_end_matches('/').to_owned();
        let same_origin = |t: &Target| t.url.origin() == wanted.origin();
        let ranks: [&dyn Fn(&Target) -> bool; 3] = [
            &|t| same_origin(t) && path(&t.url) == path(&wanted),
            &|t| {
                same_origin(t)
                    && !path(&wanted).is_empty()
                    && t.url.path().starts_with(&(path(&wanted) + "/"))
            },
            &|t| same_origin(t) && path(&wanted).is_empty(),
        ];
        for rank in ranks {
            let matches: Vec<&Arc<Target>> = targets
                .values()
                .filter(chosen)
                .filter(|t| rank(t))
                .collect();
            match matches.as_slice() {
                [] => continue,
                [one] => return Ok(Arc::clone(one)),
                many => {
                    let names: Vec<&str> = many.iter().take(10).map(|t| t.id.as_str()).collect();
                    return bad(format!(
                        "{} targets have that URL: choose one with `module` ({}{})",
                        many.len(),
                        names.join(", "),
                        if many.len() > 10 { ", …" } else { "" }
                    ));
                }
            }
        }
        Err(not_found())
    }

    fn prober(&self, target: &Arc<Target>) -> Result<Arc<Prober>, Answer> {
        let mut probers = self.probers.lock().unwrap_or_else(|e| e.into_inner());
        // Removed since it was found: no client is kept for a target that is gone.
        let running = self.targets.read().unwrap_or_else(|e| e.into_inner());
        if !running.contains_key(&target.id) {
            return Err(not_found());
        }
        drop(running);
        if let Some(prober) = probers.get(&target.id) {
            if Arc::ptr_eq(&prober.target, target) {
                return Ok(Arc::clone(prober));
            }
        }
        let prober = Prober::new(Arc::clone(target), Counter::default()).map_err(|e| {
            let why = format!("cannot build the target's client: {e}\n");
            (StatusCode::INTERNAL_SERVER_ERROR, why)
        })?;
        let prober = Arc::new(prober);
        probers.insert(target.id.clone(), Arc::clone(&prober));
        Ok(prober)
    }

    /// Probe the target the query names, within the scrape's timeout (the header's value,
    /// in seconds), and answer its measurements.
    pub async fn answer(&self, query: Option<&str>, scrape_timeout: Option<&str>) -> Answer {
        let busy = |why: String| (StatusCode::SERVICE_UNAVAILABLE, why);
        let target = match self.find(query) {
            Ok(target) => target,
            Err(answer) => return answer,
        };
        let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            return busy(format!(
                "{MAX_AT_ONCE} probes are already in flight: try the next scrape\n"
            ));
        };
        // One at a time per target: two scrapers (an HA pair) or a loop of curls cannot
        // multiply a target's cost.
        let Some(_one) = Flight::claim(&self.in_flight, &target.id) else {
            return busy(format!(
                "a probe of {} is in flight: try the next scrape\n",
                target.id
            ));
        };
        let prober = match self.prober(&target) {
            Ok(prober) => prober,
            Err(answer) => return answer,
        };
        // Prometheus always says its timeout; another caller gets a blackbox module's 10 s.
        let budget = scrape_timeout
            .and_then(|s| s.trim().parse::<f64>().ok())
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .filter(|s| *s > TIMEOUT_OFFSET)
            .map_or(DEFAULT_TIMEOUT, |s| s.saturating_sub(TIMEOUT_OFFSET))
            .min(target.timeouts.request);
        let abort = self.abort.child_token();
        // A caller that goes away (its connection closed) cancels the probe with it.
        let _gone = abort.clone().drop_guard();
        let run = self.runtime.spawn(async move {
            let _slot = slot;
            let started = Instant::now();
            let mut rng: rand::rngs::StdRng = rand::make_rng();
            let request_id = format!(
                "{}probe-{:016x}",
                target.request_id_prefix,
                rng.random::<u64>()
            );
            let draw = target.prompts.draw(&mut rng);
            let prompt = crate::scheduler::build_prompt(&target, draw).await?;
            let probed = tokio::time::timeout(budget, prober.probe(&request_id, &prompt, &abort));
            let report = probed.await.ok().map(|r| r.judge_workload(&prober.target));
            Some((report, started.elapsed(), prober))
        });
        let shutting_down = || busy("the daemon is shutting down\n".into());
        match run.await {
            _ if self.abort.is_cancelled() => shutting_down(),
            Ok(Some((Some(report), took, prober))) => match report.outcome {
                Outcome::Cut => shutting_down(),
                Outcome::Finished(_) => (StatusCode::OK, render(&report, took, &prober)),
            },
            Ok(Some((None, took, prober))) => (StatusCode::OK, timed_out(took, &prober)),
            Ok(None) => shutting_down(),
            Err(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the probe failed inside the daemon (its log says why)\n".into(),
            ),
        }
    }
}

/// A target's probe in flight, released when dropped.
struct Flight<'a> {
    set: &'a Mutex<HashSet<String>>,
    id: String,
}

impl<'a> Flight<'a> {
    fn claim(set: &'a Mutex<HashSet<String>>, id: &str) -> Option<Self> {
        let mut ids = set.lock().unwrap_or_else(|e| e.into_inner());
        ids.insert(id.to_owned()).then(|| Self {
            set,
            id: id.to_owned(),
        })
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        let mut ids = self.set.lock().unwrap_or_else(|e| e.into_inner());
        ids.remove(&self.id);
    }
}

// The same metadata in every answer, whatever happened: Prometheus keeps one per series.
const SUCCESS_HELP: &str =
    "Whether the probe succeeded (the stream's success rule: a token, an end, no error)";
const DURATION_HELP: &str = "How long the probe took, its prompt built to its answer judged";
const ERROR_HELP: &str = "# HELP probe_error Why the probe failed: its error category (docs/errors.md), or scrape_timeout\n# TYPE probe_error gauge\n";

fn not_found() -> Answer {
    let why = "no running target with probe_endpoint = true has that name or URL: /probe \
               probes configured targets only\n";
    (StatusCode::NOT_FOUND, why.into())
}

fn gauge(out: &mut String, name: &str, help: &str, value: f64) {
    let _ = write!(
        out,
        "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
    );
}

/// The exposition of one probe (Prometheus text format), blackbox-style names.
fn render(report: &ProbeReport, took: Duration, prober: &Prober) -> String {
    let mut out = String::with_capacity(2048);
    let result: Result<&Measurement, &ProbeError> = match &report.outcome {
        Outcome::Finished(result) => result.as_ref(),
        Outcome::Cut => return timed_out(took, prober),
    };
    let success = f64::from(u8::from(result.is_ok()));
    gauge(&mut out, "probe_success", SUCCESS_HELP, success);
    gauge(
        &mut out,
        "probe_duration_seconds",
        DURATION_HELP,
        took.as_secs_f64(),
    );
    if let Ok(m) = result {
        if let Some(ttft) = m.ttft {
            gauge(
                &mut out,
                "probe_time_to_first_token_seconds",
                "Time to the first token-carrying event",
                ttft.as_secs_f64(),
            );
        }
        if let Some(answer) = m.answer.ttft.filter(|_| m.answer.reasoned) {
            gauge(
                &mut out,
                "probe_time_to_first_answer_token_seconds",
                "Time to the answer's first token, after reasoning",
                answer.as_secs_f64(),
            );
        }
        if let Some(tpot) = m.tpot {
            gauge(
                &mut out,
                "probe_time_per_output_token_seconds",
                "Mean time per output token after the first event",
                tpot.as_secs_f64(),
            );
        }
        gauge(
            &mut out,
            "probe_e2e_request_latency_seconds",
            "Time from sending the request to the end of the answer",
            m.e2el.as_secs_f64(),
        );
        if let Some(tokens) = m.output_tokens {
            gauge(
                &mut out,
                "probe_output_tokens",
                "Output tokens of the answer",
                tokens.value() as f64,
            );
        }
        if let Some(tokens) = m.prompt_tokens {
            gauge(
                &mut out,
                "probe_prompt_tokens",
                "Prompt tokens, as the server's usage reports them",
                tokens as f64,
            );
        }
    }
    if let Some(connection) = &report.record.connection {
        out.push_str("# HELP probe_http_duration_seconds Duration of the request by phase: resolve, connect and tls only when the probe opened its connection\n# TYPE probe_http_duration_seconds gauge\n");
        let phases = [
            ("resolve", connection.resolve),
            ("connect", connection.connect),
            ("tls", connection.tls),
            ("processing", Some(connection.processing)),
        ];
        for (phase, took) in phases {
            if let Some(took) = took {
                let _ = writeln!(
                    out,
                    "probe_http_duration_seconds{{phase=\"{phase}\"}} {}",
                    took.as_secs_f64()
                );
            }
        }
    }
    expiry(&mut out, prober);
    if let Err(e) = result {
        out.push_str(ERROR_HELP);
        let _ = writeln!(
            out,
            "probe_error{{category=\"{}\"}} 1",
            e.category().as_str()
        );
    }
    out
}

fn expiry(out: &mut String, prober: &Prober) {
    if let Some(expiry) = prober.server_expiry() {
        gauge(
            out,
            "probe_ssl_earliest_cert_expiry",
            "The earliest notAfter (Unix seconds) on the path of the chain the target presented",
            expiry as f64,
        );
    }
}

/// No answer within the scrape's budget.
fn timed_out(took: Duration, prober: &Prober) -> String {
    let mut out = String::new();
    gauge(&mut out, "probe_success", SUCCESS_HELP, 0.0);
    gauge(
        &mut out,
        "probe_duration_seconds",
        DURATION_HELP,
        took.as_secs_f64(),
    );
    expiry(&mut out, prober);
    out.push_str(ERROR_HELP);
    out.push_str("probe_error{category=\"scrape_timeout\"} 1\n");
    out
}
