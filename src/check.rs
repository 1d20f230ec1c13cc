//! `inferprobe check`: validate a configuration as the daemon would load it, and say what
//! it will do that an operator would otherwise learn from a page (or from none): which SLO
//! each target's alerts burn against, what each canary compares, what a prefix-cache
//! check costs, and whether a file_sd file already there holds a label that would be
//! renamed. Exit 0 when valid, 64 naming the key when not (docs/operating.md, "Exit codes").

use std::path::Path;
use std::sync::Arc;

use crate::config::{self, Config, EXIT_CONFIG, Overrides, Source};
use crate::endpoint::Target;
use crate::endpoint::sampling::{SamplingSpec, Server};

/// One line of the report on stdout. A reader that went away (`inferprobe check ... | head
/// -1`) ends the report, not the process with a panic as `println!` would (Rust ignores
/// SIGPIPE, so the write returns an error); the exit code still says valid or not.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub fn check(path: &Path, skip_secrets: bool) -> u8 {
    let overrides = Overrides {
        skip_secrets,
        ..Overrides::default()
    };
    let loaded = match config::load(Some(path), &overrides) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("{}: {e}", path.display());
            return EXIT_CONFIG as u8;
        }
    };
    if let Err(e) = file_sd(&loaded) {
        eprintln!("{}: {e}", path.display());
        return EXIT_CONFIG as u8;
    }
    let blocks = match loaded.discovery.len() {
        0 => String::new(),
        n => format!(", {n} discovery block(s)"),
    };
    say!(
        "{}: ok, {} target(s){blocks}",
        path.display(),
        loaded.targets.len()
    );
    let examples = loaded.discovery.iter().filter_map(|d| {
        let source = Some((d.source.kind(), d.max_targets, d.source.node_local()));
        Some((Arc::new(d.example().ok()?), source))
    });
    let configured = loaded.targets.iter().map(|t| (Arc::clone(t), None));
    for (target, block) in configured.chain(examples) {
        let source = block.map(|(kind, _, _)| kind);
        say!("  {}: {}", target.name, slo(&target));
        if let Some(spec) = &target.prefix_cache {
            let exact = target.prompts.tokenizer.is_some();
            say!("  {}: {}", target.name, spec.describe(exact));
            for warning in spec.warnings() {
                eprintln!("warning: {}: {warning}", target.name);
            }
            if !target.include_usage && spec.objective.is_some() {
                eprintln!(
                    "warning: {}: prefix_cache: include_usage = false asks for no usage, so no cached-token count: the check judges by TTFT alone and can never count a miss, so its objective never tickets",
                    target.name
                );
            }
        }
        if let Some(spec) = &target.session {
            say!("  {}: {}", target.name, spec.describe());
            for warning in spec.warnings() {
                eprintln!("warning: {}: {warning}", target.name);
            }
            if !target.include_usage {
                eprintln!(
                    "warning: {}: session: include_usage = false asks for no usage, so no cached-token count: every later turn is `unreported` for the cache",
                    target.name
                );
            }
        }
        if let Some(spec) = &target.sampler {
            say!("  {}: {}", target.name, spec.describe());
            for warning in sampler_warnings(spec) {
                eprintln!("warning: {}: {warning}", target.name);
            }
        }
        if let Some(spec) = &target.adapters {
            say!("  {}: {}", target.name, spec.describe());
            let node_local = block.is_some_and(|(_, _, node_local)| node_local);
            for warning in spec.warnings(node_local) {
                eprintln!("warning: {}: {warning}", target.name);
            }
        }
        if let Some(canary) = &target.canary {
            say!(
                "  {}: {}",
                target.name,
                crate::canary::describe(canary, target.backend, source)
            );
            for warning in crate::canary::warnings(canary) {
                eprintln!("warning: {}: {warning}", target.name);
            }
            if let Some(path) = &canary.unread {
                say!(
                    "  {}: canary file {path} is not here (--no-secrets: the cluster mounts it); the built-in prompts stand in above, and `inferprobe run` reads and checks it",
                    target.name
                );
            }
        }
        if let Some(limits) = target.backend.limits() {
            say!("  {}: {}: {limits}", target.name, target.backend);
        }
        if let Some(line) = cost(&target, block.map(|(_, max, _)| max)) {
            say!("  {}: {line}", target.name);
        }
        for warning in skips_at_slo(&target)
            .into_iter()
            .chain(one_failure_pages(&target))
            .chain(site_labels(&target))
        {
            eprintln!("warning: {}: {warning}", target.name);
        }
    }
    if skip_secrets {
        say!(
            "secrets were not read (--no-secrets): `inferprobe run` reads them and refuses to start without them"
        );
    }
    0
}

/// What the shipped rules alert on for `target` (docs/alerts.md).
fn slo(target: &Target) -> String {
    let Some(slo) = &target.slo else {
        return "no slo: no budget-burn alert (InferprobeTargetDown still pages on an outage)"
            .into();
    };
    let mut burned = vec!["availability".to_owned()];
    for (name, threshold) in [
        ("ttft", slo.ttft),
        ("tpot", slo.tpot),
        ("itl", slo.itl),
        ("e2el", slo.e2el),
    ] {
        if let Some(t) = threshold {
            burned.push(format!("{name} ≤ {}", humantime::format_duration(t)));
        }
    }
    format!(
        "slo objective {}%: budget-burn alerts on {}",
        slo.objective * 100.0,
        burned.join(", ")
    )
}

/// Each file_sd file already present, read as the daemon will read it: one that does not
/// parse, or holds a label the daemon would rename (`exported_group`), names its key.
fn file_sd(config: &Config) -> Result<(), String> {
    for block in &config.discovery {
        let Source::File { path, .. } = &block.source else {
            continue;
        };
        let Ok(bytes) = crate::files::read_file(path, crate::discovery::file::MAX_FILE_BYTES)
        else {
            continue; // Not written yet: the daemon waits for it.
        };
        let at = format!("invalid file_sd file at `{}.path`", block.key);
        let parsed = crate::discovery::file::parse(path, &bytes, "http")
            .map_err(|e| format!("{at}: {e}"))?;
        if let Some(label) = parsed.renamed.first() {
            return Err(format!(
                "{at}: {}: label `{label}` is one inferprobe sets itself; the daemon would \
                 export it as `exported_{label}`: rename it in the file",
                path.display()
            ));
        }
    }
    Ok(())
}

/// Where the target's rate, at the latency its SLO allows, leaves too few `max_concurrency`
/// slots: random arrivals find them all busy in a share given by Erlang's B formula of
/// rate × probe duration and the slots (docs/alerts.md, InferprobeProbesSkipped). A
/// `fleet_rate` target's per-pod rate is known only once the fleet is.
fn skips_at_slo(target: &Target) -> Option<String> {
    let slo = target.slo.as_ref()?;
    if target.fleet_rate.is_some() {
        return None;
    }
    let tokens = f64::from(target.prompts.output_tokens.max(1));
    let duration = match (slo.e2el, slo.ttft, slo.tpot) {
        (Some(e2el), _, _) => e2el.as_secs_f64(),
        (None, Some(ttft), Some(tpot)) => ttft.as_secs_f64() + tpot.as_secs_f64() * (tokens - 1.0),
        _ => return None,
    };
    let load = target.rate * duration;
    // B falls as slots are added: the count that is enough lies past the configured one.
    let mut shares = erlang_b(load).enumerate().skip(target.max_concurrency);
    let (_, share) = shares.next()?;
    if share <= 0.01 {
        return None;
    }
    let enough = shares
        .take(1_000_000)
        .find(|&(_, b)| b <= 0.01)
        .map_or_else(String::new, |(c, _)| {
            format!("; max_concurrency = {c} keeps it under 1%")
        });
    Some(format!(
        "at the latency its slo allows ({duration:.2}s a probe) and rate {}/s, about {:.1}% of arrivals would find max_concurrency = {} probes in flight and be skipped (InferprobeProbesSkipped tickets above 10%){enough}",
        target.rate,
        share * 100.0,
        target.max_concurrency
    ))
}

/// The fast burn's long window and rate (docs/alerts.md, InferprobeErrorBudgetBurnFast): it
/// pages when over an hour more than 14.4 budgets' worth of probes fail. In an hour with
/// fewer than 1 / (14.4 × budget) probes, one failed (or slow) probe is that many.
const FAST_BURN: f64 = 14.4;
const FAST_WINDOW_SECONDS: f64 = 3600.0;
/// The share of hours in which one failure may page before `check` warns.
const PAGED_HOURS: f64 = 0.01;

/// Where one failed probe in an hour pages at the target's objective: a healthy endpoint's
/// single timeout wakes someone (issue 49, item 6). Arrivals are random, so an hour holds
/// more or fewer probes than the mean: the count is taken as normal, with the variance of
/// gamma arrivals of the target's `burstiness` (mean / shape), and the warning says in what
/// share of hours one failure pages. The SLI sums every probe pod's (and every replica's)
/// probes of the target, so the rate here, one pod's unless `fleet_rate` says the fleet's,
/// is the least the rules see.
fn one_failure_pages(target: &Target) -> Option<String> {
    let slo = target.slo.as_ref()?;
    let budget = 1.0 - slo.objective;
    if budget <= 0.0 {
        return None;
    }
    let (rate, whose) = match target.fleet_rate {
        Some(fleet) => (fleet, "the fleet's fleet_rate"),
        None => (
            target.rate,
            "this pod's rate; a DaemonSet of N pods sends N times it",
        ),
    };
    let paging_hours = |rate: f64, budget: f64| {
        let (mean, fewer) = (rate * FAST_WINDOW_SECONDS, 1.0 / (FAST_BURN * budget));
        normal_cdf((fewer - mean) / (mean / target.burstiness).sqrt().max(1e-9))
    };
    // Below 1 / 14.4 of a probe an hour (objectives under 93%), one failure of one probe is
    // 100%, under 14.4 budgets: the fast burn cannot fire on it.
    let share = paging_hours(rate, budget);
    if FAST_BURN * budget >= 1.0 || share <= PAGED_HOURS {
        return None;
    }
    // The rate that keeps it to PAGED_HOURS (doubling, then bisecting: the share falls as
    // the rate grows), and the highest usual objective this rate holds.
    let (mut low, mut high) = (rate, rate.max(1e-6) * 2.0);
    while paging_hours(high, budget) > PAGED_HOURS {
        (low, high) = (high, high * 2.0);
    }
    for _ in 0..60 {
        let mid = (low + high) / 2.0;
        if paging_hours(mid, budget) > PAGED_HOURS {
            low = mid;
        } else {
            high = mid;
        }
    }
    let holds = [0.9995, 0.999, 0.995, 0.99, 0.95, 0.9]
        .into_iter()
        .find(|&o| {
            o < slo.objective
                && (FAST_BURN * (1.0 - o) >= 1.0 || paging_hours(rate, 1.0 - o) <= PAGED_HOURS)
        })
        .map_or_else(String::new, |o| {
            format!(", or an objective of {}% or less", o * 100.0)
        });
    Some(format!(
        "slo objective {}% at {rate}/s ({whose}): an hour holds about {} probes, and in one with fewer than {} (1 / ({FAST_BURN} × the {}% budget)) one failed or slow probe pages InferprobeErrorBudgetBurnFast (or its latency twin): about {:.0}% of hours here; it takes {} probes/s across every probe pod to keep that under {:.0}% of hours{holds}",
        slo.objective * 100.0,
        significant(rate * FAST_WINDOW_SECONDS),
        significant(1.0 / (FAST_BURN * budget)),
        significant(budget * 100.0),
        share * 100.0,
        significant(high),
        PAGED_HOURS * 100.0,
    ))
}

/// The standard normal distribution function (Abramowitz and Stegun 7.1.26, to 1.5e-7).
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// `x` to three significant digits, without an exponent or trailing zeros (0.000193,
/// 0.0248, 0.01, 694).
fn significant(x: f64) -> String {
    let rounded: f64 = format!("{x:.2e}").parse().unwrap_or(x);
    let decimals = (2 - rounded.abs().max(1e-12).log10().floor() as i32).max(0) as usize;
    let text = format!("{rounded:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// A site label (`cluster`, `region`) in the configuration: it travels with every copy of
/// the file, so two clusters deployed from one config export the same series, which collide
/// where they meet (federation, remote write); the monitoring stack's `external_labels`
/// name the site instead (docs/deploying.md, "Sites").
fn site_labels(target: &Target) -> Option<String> {
    let (name, value) = target
        .labels
        .iter()
        .find(|(name, _)| SITE_LABELS.contains(&name.as_str()))?;
    Some(format!(
        "label {name} = \"{value}\": a site label in the configuration goes with every copy of it, and two sites sharing it collide where their series meet (federation, remote write, Thanos); set it as the Prometheus's external_labels instead, which the rules and dashboards read (federation and remote write keep a series' own {name} over the external label, so both set is the collision)"
    ))
}

/// The labels the shipped rules and dashboards treat as the site (scripts/site_labels.py).
const SITE_LABELS: [&str; 2] = ["cluster", "region"];

/// Erlang's B formula for `load` (arrival rate × holding time) over 0, 1, 2, … servers:
/// the share of arrivals that find every server busy.
fn erlang_b(load: f64) -> impl Iterator<Item = f64> {
    let mut k = 0.0;
    std::iter::successors(Some(1.0), move |b: &f64| {
        k += 1.0;
        Some(load * b / (k + load * b))
    })
}

/// The shortest answer the sampler check's diversity test scores, in characters.
const DIVERSE_MIN_CHARS: u32 = crate::sampling::DIVERSE_MIN_CHARS as u32;

/// Where the sampler check cannot judge what it is set to (docs/sampling.md): a setting's
/// top-k beyond what a list of `top_logprobs` shows exactly (its N − 1 best others,
/// whichever token was sampled), and answers too short for the diversity test to score.
fn sampler_warnings(spec: &SamplingSpec) -> Vec<String> {
    let mut warnings = Vec::new();
    let (listed, reach) = (spec.top_logprobs, spec.top_logprobs.saturating_sub(1));
    if spec.server != Server::Unknown {
        for (i, p) in spec.settings.iter().enumerate() {
            if p.top_k <= reach {
                continue;
            }
            let fix = match p.top_k + 1 {
                n if n <= 20 => format!("top_logprobs = {n} or more, or top_k = {reach} or less"),
                _ => format!("top_k = {reach} or less (top_logprobs lists at most 20)"),
            };
            warnings.push(format!(
                "sampler.settings[{i}] (temperature {}, top_k {}, top_p {}, min_p {}): top_k = {} is more than top_logprobs - 1 = {reach}; a list of {listed} shows only the {reach} best others whichever token was sampled, so the support check cannot rebuild this top-k exactly: tokens past the list are only bounded (a token outside the top-k may pass) and fewer give a calibration PIT; set {fix}",
                p.temperature, p.top_k, p.top_p, p.min_p, p.top_k,
            ));
        }
    }
    // A processed list of one token is a confident model or a truncation to one, unless
    // nothing in the request could truncate to one: only such a setting tells a forced
    // greedy decoding behind processed lists (docs/sampling.md, "The twin").
    let processed = matches!(
        spec.server,
        Server::Auto | Server::LlamaCpp | Server::VllmProcessed
    );
    if processed && spec.settings.iter().all(|p| p.may_keep_one()) {
        warnings.push(format!(
            "sampler.settings: none is top-k alone (temperature above 0, top_k other than 1, top_p = 1, min_p = 0); {} lists the distribution it drew from, where one token listed may be top-p or min-p cutting to one, so greedy decoding forced behind such lists reads unscored, never sampling_ignored; add a setting such as {{ temperature = 1.0, top_k = 5 }}",
            match spec.server {
                Server::Auto => "a server read as processed (llama.cpp, vLLM processed_logprobs)",
                s => s.as_str(),
            }
        ));
    }
    if spec.server.semantics().is_none() && spec.max_tokens < DIVERSE_MIN_CHARS {
        let when = match spec.server {
            Server::Auto => " (server = auto: wherever /v1/models names neither vllm nor llamacpp)",
            _ => "",
        };
        warnings.push(format!(
            "sampler.max_tokens = {}: without logprobs{when} the diversity test marks a round unscored when any answer is under {DIVERSE_MIN_CHARS} characters, and {} tokens may be fewer (a token can be one character): such rounds judge nothing; set max_tokens = {DIVERSE_MIN_CHARS} or more",
            spec.max_tokens, spec.max_tokens,
        ));
    }
    warnings
}

/// What a target's checks send an hour, prompt and output tokens, beside its workload's
/// (docs/operating.md, "Limits"): per replica, and for a discovery block up to its
/// `max_targets` replicas.
fn cost(target: &Target, max_replicas: Option<usize>) -> Option<String> {
    let mut parts = Vec::new();
    let (mut prompt, mut output) = (0, 0);
    if let Some(canary) = &target.canary {
        let (p, o) = canary.tokens_per_hour();
        parts.push(format!(
            "the canary about {p} prompt and at most {o} output tokens"
        ));
        (prompt, output) = (prompt + p, output + o);
    }
    if let Some(spec) = &target.prefix_cache {
        let (p, o) = (spec.prompt_tokens_per_hour(), spec.output_tokens_per_hour());
        parts.push(format!(
            "the prefix-cache check about {p} prompt and at most {o} output tokens"
        ));
        (prompt, output) = (prompt + p, output + o);
    }
    if let Some(spec) = &target.session {
        let (p, o) = (spec.prompt_tokens_per_hour(), spec.output_tokens_per_hour());
        parts.push(format!(
            "the session check about {p} prompt ({} cached on a healthy cache) and at most {o} output tokens",
            spec.cached_tokens_per_hour()
        ));
        (prompt, output) = (prompt + p, output + o);
    }
    if let Some(spec) = &target.sampler {
        let (p, o) = spec.tokens_per_hour();
        parts.push(format!(
            "the sampler check about {p} prompt and at most {o} output tokens"
        ));
        (prompt, output) = (prompt + p, output + o);
    }
    if let Some(spec) = &target.adapters {
        let (p, o) = spec.tokens_per_hour();
        parts.push(format!(
            "the adapter check about {p} prompt and at most {o} output tokens (however many adapters)"
        ));
        (prompt, output) = (prompt + p, output + o);
    }
    if parts.is_empty() {
        return None;
    }
    let mut line = format!("checks cost, an hour: {}", parts.join("; "));
    match max_replicas {
        Some(n) => {
            line += &format!(
                " per replica; up to {n} replicas (max_targets): about {} prompt and at most {} output tokens",
                prompt * n as u64,
                output * n as u64
            )
        }
        None if target.fleet_rate.is_some() => {
            line += &format!(
                " per probe pod, beside the workload's: fleet_rate divides the workload among the probe's pods, not the checks, which every pod runs (20 pods: about {} prompt and at most {} output tokens an hour); put checks on a target only one pod probes to pay for them once",
                prompt * 20,
                output * 20
            )
        }
        None => line += " (beside the workload's)",
    }
    Some(line)
}

#[cfg(test)]
#[path = "check/tests.rs"]
mod tests;
