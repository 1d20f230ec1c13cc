//! The sampler check (issue 57) against a real llama-server, and real servers' captured
//! sampled answers judged. The first test is ignored by `cargo test`;
//! scripts/real-server/test.sh runs it (.ci/run does). The longer measurement is
//! scripts/real-server/sampler-proof.sh (docs/sampling.md, "Measured").
//!
//! A random-weight model is never sure of its next token, so every truncation binds: a
//! healthy llama-server must have no token outside the support its request allows, every
//! token judged, and calibrated windows.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{Scrape, llama, start_daemon};
use inferprobe::config::{self, Target};
use inferprobe::probe::StreamReader;
use inferprobe::record::RequestRecord;
use inferprobe::sampling::support::{Params, Semantics, Support, judge};
use tokio::time::Instant;

fn count(s: &Scrape, name: &str, result: &str) -> f64 {
    s.sum(name, &[("result", result)])
}

/// The default settings and a few of the grid's corners: top-k 1, a sharp and a flat
/// temperature with every truncation at once.
const SETTINGS: &str = "[
    { temperature = 0.7, top_k = 20, top_p = 0.8 },
    { temperature = 1.0, top_k = 5 },
    { temperature = 1.0, top_k = 20, top_p = 0.5 },
    { temperature = 1.0, top_k = 20, min_p = 0.1 },
    { temperature = 0.5, top_k = 1, top_p = 0.9 },
    { temperature = 0.5, top_k = 20, top_p = 0.9, min_p = 0.1 },
    { temperature = 1.5, top_k = 20, top_p = 0.9, min_p = 0.1 },
    { temperature = 1.5, top_k = 5, top_p = 0.5 },
]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn a_healthy_llama_server_samples_inside_the_support_and_calibrated() {
    // A server whose own defaults would change what is drawn, as an operator may start
    // one: a dynamic temperature and adaptive-p in its chain. The check's request turns
    // them off (its `samplers` list replaces the chain).
    let defaults = [
        "--dynatemp-range",
        "0.5",
        "--dynatemp-exp",
        "100",
        "--samplers",
        "top_k;top_p;min_p;temperature;adaptive_p",
        "--adaptive-target",
        "0.3",
    ];
    let server = llama::start(&llama::tiny(), 4096, &defaults).await;
    // Both logprob routes; alpha 1e-6: a healthy window fails once in a million.
    let sampler = format!(
        "sampler = {{ interval = \"250ms\", max_tokens = 128, server = \"llama.cpp\", alpha = 1e-6, settings = {} }}",
        SETTINGS.replace('\n', " ")
    );
    let toml = format!(
        r#"
        [defaults]
        model = "tiny"
        rate = 0.001
        {sampler}
        [[targets]]
        name = "completions"
        url = "{url}"
        backend = "openai"
        [[targets]]
        name = "chat"
        url = "{url}"
        backend = "openai-chat"
        "#,
        url = server.url
    );
    let daemon = start_daemon(&toml).await;
    let tokens = |s: &Scrape| s.sum("inferprobe_sampler_tokens_total", &[]);
    // 6 to 12 s alone; the real-server suite runs its tests at once on two cores, where
    // the canary's servers leave this one a round every few seconds (12 in a minute seen).
    let s = daemon
        .wait_for(Duration::from_secs(240), |s| tokens(s) >= 4000.0)
        .await;
    daemon.stop().await;
    let windows = |result| count(&s, "inferprobe_sampler_calibration_windows_total", result);
    let rounds = |result| count(&s, "inferprobe_sampler_checks_total", result);
    eprintln!(
        "llama-server: {} tokens judged, rounds ok {}, windows ok {}, miscalibrated {}",
        tokens(&s),
        rounds("ok"),
        windows("ok"),
        windows("miscalibrated")
    );
    assert!(tokens(&s) >= 4000.0, "{}", s.text);
    assert_eq!(
        count(&s, "inferprobe_sampler_tokens_total", "outside_support"),
        0.0,
        "{}",
        s.text
    );
    assert_eq!(
        count(&s, "inferprobe_sampler_tokens_total", "unscored"),
        0.0,
        "{}",
        s.text
    );
    // Every round judged: none unscored, none failed.
    let all = s.sum("inferprobe_sampler_checks_total", &[]);
    assert_eq!(rounds("ok"), all, "{}", s.text);
    assert!(windows("ok") >= 10.0, "{}", s.text);
    assert_eq!(windows("miscalibrated"), 0.0, "{}", s.text);
}

/// llama-server started with one seed (`--seed 42`) draws every request that names none
/// from it: a round's twin repeats the round's answer, and a third with its own seed
/// does not, so the round reads `fixed_seed`, not `sampling_ignored` (docs/sampling.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server: scripts/real-server/setup.sh"]
async fn a_llama_server_with_one_seed_reads_fixed_seed_not_ignored() {
    let server = llama::start(&llama::tiny(), 4096, &["--seed", "42"]).await;
    let toml = format!(
        r#"
        [[targets]]
        name = "chat"
        url = "{url}"
        backend = "openai-chat"
        model = "tiny"
        rate = 0.001
        sampler = {{ interval = "250ms", server = "llama.cpp", settings = [{{ temperature = 1.0, top_k = 20 }}] }}
        "#,
        url = server.url
    );
    let daemon = start_daemon(&toml).await;
    let rounds = |s: &Scrape, result| count(s, "inferprobe_sampler_checks_total", result);
    let s = daemon
        .wait_for(Duration::from_secs(120), |s| rounds(s, "fixed_seed") >= 4.0)
        .await;
    daemon.stop().await;
    eprintln!(
        "llama-server --seed 42: rounds fixed_seed {}, ignored {}, ok {}, windows miscalibrated {}",
        rounds(&s, "fixed_seed"),
        rounds(&s, "sampling_ignored"),
        rounds(&s, "ok"),
        count(
            &s,
            "inferprobe_sampler_calibration_windows_total",
            "miscalibrated"
        )
    );
    assert!(rounds(&s, "fixed_seed") >= 4.0, "{}", s.text);
    assert_eq!(rounds(&s, "sampling_ignored"), 0.0, "{}", s.text);
}

/// A target of `backend`, for its parser.
fn target(backend: &str) -> Arc<Target> {
    let toml = format!(
        "[[targets]]\nname = \"t\"\nbackend = \"{backend}\"\nurl = \"http://127.0.0.1:1\"\nmodel = \"tiny\"\n"
    );
    config::load_str(&toml).unwrap().targets.remove(0)
}

/// A captured stream read as a probe reads it (`StreamReader`, its logprobs asked for).
fn positions(backend: &str, file: &str) -> Vec<inferprobe::logprobs::Position> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sampling")
        .join(file);
    let body = std::fs::read(&path).unwrap();
    let target = target(backend);
    let mut stream = StreamReader::new(target.backend.backend().as_ref(), target.limits);
    let now = Instant::now();
    let mut record = RequestRecord::new(now);
    record.response.logprobs = Some(Default::default());
    for chunk in body.chunks(512) {
        if stream.read(now, chunk, &mut record).unwrap() {
            break;
        }
    }
    let logprobs = record.response.logprobs.unwrap();
    assert_eq!(logprobs.unreadable, None, "{file}");
    logprobs.positions
}

/// Real sampled answers, captured with the sampler check's own request bodies (beside each
/// file, `*.request.json`; tests/fixtures/README.md): every token inside its support, and
/// where the distribution is known exactly (llama.cpp's whole processed list), a PIT.
#[test]
fn captured_sampled_answers_are_inside_their_support() {
    let cases = [
        (
            "openai-chat",
            "llama-chat-post-sampling.sse",
            Semantics::Processed,
            Params {
                temperature: 1.5,
                top_k: 20,
                top_p: 0.9,
                min_p: 0.1,
            },
        ),
        (
            "openai-chat",
            "vllm-chat-raw.sse",
            Semantics::Raw,
            Params {
                temperature: 1.0,
                top_k: 20,
                top_p: 0.9,
                min_p: 0.1,
            },
        ),
    ];
    for (backend, file, semantics, params) in cases {
        let positions = positions(backend, file);
        assert!(positions.len() >= 16, "{file}: {}", positions.len());
        let mut pits = 0;
        for (at, position) in positions.iter().enumerate() {
            let judged = judge(position, &params, semantics);
            assert_ne!(judged.support, Support::Outside, "{file}: position {at}");
            assert_ne!(judged.support, Support::Unknown, "{file}: position {at}");
            pits += usize::from(judged.pit.is_some());
        }
        if semantics == Semantics::Processed {
            assert_eq!(pits, positions.len(), "{file}");
        }
    }
}
