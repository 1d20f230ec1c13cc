//! The one target a run uses, from a config file or from the flags, with the benchmark's
//! deadlines rather than a probe's.

use std::sync::Arc;
use std::time::Duration;

use super::{BenchArgs, usage};
use crate::config::{self, ConfigError, Overrides, RawConfig, RawDuration, RawTarget};

/// vLLM's benchmark client gives a request 6 h in all (`aiohttp.ClientTimeout(total=6 *
/// 60 * 60)`) and has no first-token or stall deadline. A probe's deadlines (30 s TTFT,
/// 120 s total by default) would turn a saturating run's slowest requests into failures and
/// pull its percentiles down, so a config file's deadlines are not used either.
const BENCH_DEADLINE: Duration = Duration::from_secs(6 * 3600);

/// One of the run's deadlines: the target key it sets and the flag its value came from.
struct Deadline {
    key: &'static str,
    value: Duration,
    flag: Option<&'static str>,
}

/// TTFT, stall and request deadlines from the flags, else 6 h. As in the config file, an
/// unset deadline never contradicts a set one: `--request-timeout 60s` alone lowers the
/// other two to 60 s (and then they are that flag's value), `--ttft-timeout 8h` alone
/// raises the total to 8 h.
fn deadlines(args: &BenchArgs) -> [Deadline; 3] {
    let request = match args.request_timeout {
        Some(value) => (value, Some("--request-timeout")),
        None => {
            let longest = [args.ttft_timeout, args.stall_timeout]
                .into_iter()
                .flatten()
                .fold(BENCH_DEADLINE, Duration::max);
            (longest, None)
        }
    };
    let within_request = |own: Option<Duration>, flag: &'static str| match own {
        Some(value) => (value, Some(flag)),
        None if request.0 < BENCH_DEADLINE => request,
        None => (BENCH_DEADLINE, None),
    };
    let ttft = within_request(args.ttft_timeout, "--ttft-timeout");
    let stall = within_request(args.stall_timeout, "--stall-timeout");
    [
        ("ttft_timeout", ttft),
        ("stall_timeout", stall),
        ("request_timeout", request),
    ]
    .map(|(key, (value, flag))| Deadline { key, value, flag })
}

fn set_deadlines(target: &mut RawTarget, deadlines: &[Deadline; 3]) {
    let raw = |d: &Deadline| {
        Some(RawDuration::Text(
            humantime::format_duration(d.value).to_string(),
        ))
    };
    let [ttft, stall, request] = deadlines;
    target.ttft_timeout = raw(ttft);
    target.stall_timeout = raw(stall);
    target.request_timeout = raw(request);
}

/// A validation error about a deadline a flag set names the flag: the key when the flag's
/// value is the one at fault, the reason when the other side is (`targets[0].connect_timeout:
/// 10s must not exceed --ttft-timeout (200ms)`).
fn name_the_flags(mut error: ConfigError, deadlines: &[Deadline; 3]) -> ConfigError {
    for deadline in deadlines {
        let Some(flag) = deadline.flag else { continue };
        if error.key.rsplit('.').next() == Some(deadline.key) {
            error.key = flag.into();
        }
        error.reason = error.reason.replace(deadline.key, flag);
    }
    error
}

/// Image and video flags, when given, replace what a config file's target sends.
fn set_media(target: &mut RawTarget, args: &BenchArgs) {
    if let Some(images) = args.media.images() {
        target.images = Some(images);
    }
    if let Some(videos) = args.media.videos() {
        target.videos = Some(videos);
    }
}

/// The one target to run, from a config file or from the flags.
pub(super) fn load(args: &BenchArgs) -> Result<Arc<config::Target>, ConfigError> {
    let deadlines = deadlines(args);
    let raw = match &args.config {
        Some(path) => {
            let mut raw = config::load_raw(Some(path), &Overrides::default())?;
            // A target's own keys win over `[defaults]`, so setting them on every target
            // overrides both.
            for target in &mut raw.targets {
                set_deadlines(target, &deadlines);
                set_media(target, args);
            }
            raw
        }
        None => {
            let mut target = RawTarget {
                name: Some("bench".into()),
                backend: Some(args.backend.clone()),
                url: Some(
                    args.url
                        .clone()
                        .ok_or_else(|| usage("--url", "is required without --config"))?,
                ),
                endpoint: args.endpoint.clone(),
                model: Some(
                    args.model
                        .clone()
                        .ok_or_else(|| usage("--model", "is required without --config"))?,
                ),
                input_tokens: Some(args.input_tokens),
                output_tokens: Some(args.output_tokens),
                range_ratio: args.range_ratio,
                tokenizer: args.tokenizer.clone(),
                dataset: args.dataset.clone(),
                api_key_env: args.api_key_env.clone(),
                ..RawTarget::default()
            };
            set_deadlines(&mut target, &deadlines);
            set_media(&mut target, args);
            RawConfig {
                targets: vec![target],
                ..RawConfig::default()
            }
        }
    };
    let targets = config::validate(&raw)
        .map_err(|e| args.media.name_the_flag(name_the_flags(e, &deadlines)))?
        .targets;
    match &args.target {
        Some(name) => targets
            .into_iter()
            .find(|t| &t.name == name)
            .ok_or_else(|| usage("--target", format!("no target named `{name}`"))),
        None if targets.len() == 1 => Ok(Arc::clone(&targets[0])),
        None => Err(usage(
            "--target",
            "the config has several targets; name one",
        )),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn target(flags: &[&str]) -> Result<Arc<config::Target>, ConfigError> {
        let argv = ["bench", "--url", "http://127.0.0.1:1", "--model", "m"];
        load(&Cli::parse_from(argv.iter().chain(flags)).bench)
    }

    const H6: Duration = BENCH_DEADLINE;

    #[test]
    fn a_benchmark_waits_six_hours_in_all_unless_told_otherwise() {
        let t = target(&[]).unwrap().timeouts;
        assert_eq!((t.ttft, t.stall, t.request), (H6, H6, H6));
        assert_eq!(
            t.connect,
            Duration::from_secs(5),
            "connect keeps the default"
        );

        let t = target(&["--ttft-timeout", "200ms"]).unwrap().timeouts;
        let ms200 = Duration::from_millis(200);
        assert_eq!((t.ttft, t.stall, t.request), (ms200, H6, H6));
        assert_eq!(
            t.connect, ms200,
            "an unset connect deadline is clamped, as in a config"
        );

        let t = target(&["--request-timeout", "1m"]).unwrap().timeouts;
        let m1 = Duration::from_secs(60);
        assert_eq!((t.ttft, t.stall, t.request), (m1, m1, m1));

        let t = target(&["--stall-timeout", "8h"]).unwrap().timeouts;
        let h8 = Duration::from_secs(8 * 3600);
        assert_eq!((t.ttft, t.stall, t.request), (H6, h8, h8));
    }

    #[test]
    fn a_contradicting_flag_is_named() {
        let e = target(&["--ttft-timeout", "2h", "--request-timeout", "1h"]).unwrap_err();
        assert_eq!(e.key, "--ttft-timeout");
        assert!(
            e.reason.contains("must not exceed --request-timeout"),
            "{e}"
        );

        let e = target(&["--stall-timeout", "0s"]).unwrap_err();
        assert_eq!(e.key, "--stall-timeout", "{e}");

        let e = target(&["--request-timeout", "2days"]).unwrap_err();
        assert_eq!(e.key, "--request-timeout", "{e}");
    }

    #[test]
    fn a_config_files_deadlines_are_a_probes_not_a_benchmarks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "[defaults]\nttft_timeout = \"1s\"\nrequest_timeout = \"2s\"\nconnect_timeout = \"3s\"\n\
             [[targets]]\nname = \"t\"\nurl = \"http://127.0.0.1:1\"\nmodel = \"m\"\n\
             stall_timeout = \"1s\"\n",
        )
        .unwrap();
        let config = path.to_str().unwrap();
        let load_with = |flags: &[&str]| {
            load(&Cli::parse_from(["bench", "--config", config].iter().chain(flags)).bench)
        };
        let t = load_with(&[]).unwrap().timeouts;
        assert_eq!((t.ttft, t.stall, t.request), (H6, H6, H6));
        assert_eq!(
            t.connect,
            Duration::from_secs(3),
            "the config's connect deadline stays"
        );

        let t = load_with(&["--request-timeout", "10s"]).unwrap().timeouts;
        let s10 = Duration::from_secs(10);
        assert_eq!((t.ttft, t.stall, t.request), (s10, s10, s10));

        // The config's connect deadline against the flag's TTFT: the flag is named.
        let e = load_with(&["--ttft-timeout", "2s"]).unwrap_err();
        assert_eq!(e.key, "targets[0].connect_timeout");
        assert!(e.reason.contains("must not exceed --ttft-timeout"), "{e}");
    }
}
