//! The clouds' native APIs end to end: Amazon Bedrock (ConverseStream, and Anthropic's
//! Messages through InvokeModelWithResponseStream) against the simulator, which frames
//! its streams in the AWS event stream and checks every SigV4 signature; the daemon runs
//! as a process whose environment is an EKS pod's with IRSA, its credentials exchanged
//! at a local STS stand-in ([`common::clouds`]).

use crate::common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::clouds::{AWS_SECRET, CloudDaemon, aks, entra, gke, irsa, metadata, sts};
use common::{closed_port, start_sim};
use inferprobe::sim::SimConfig;

const TTFT: Duration = Duration::from_millis(150);
const ITL: Duration = Duration::from_millis(20);
/// A Bedrock model id: its `:` is percent-encoded in the path, and signed so.
const MODEL: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";

fn sim() -> SimConfig {
    SimConfig {
        ttft: TTFT,
        itl: ITL,
        stall: Duration::from_secs(60),
        sigv4_secret: Some(AWS_SECRET.into()),
        ..SimConfig::default()
    }
}

/// A config listening on `port`, the simulator at `url`, then `targets`.
fn config(port: u16, url: &str, targets: &str) -> String {
    format!(
        r#"
        listen = "127.0.0.1:{port}"
        seed = 3
        [defaults]
        url = "{url}"
        model = "{MODEL}"
        region = "us-east-1"
        rate = 8
        max_concurrency = 8
        input_tokens = 16
        output_tokens = 10
        ttft_timeout = "5s"
        stall_timeout = "2s"
        request_timeout = "10s"
        {targets}
        "#
    )
}

async fn daemon(
    toml: &str,
    lifetime: Duration,
) -> (CloudDaemon, common::clouds::Issued, tempfile::TempDir) {
    let (sts_url, issued) = sts(lifetime).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, toml).unwrap();
    let port = toml
        .split("listen = \"127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    let daemon = CloudDaemon::spawn(&path, port, &irsa(dir.path(), &sts_url));
    (daemon, issued, dir)
}

fn mean(s: &common::Scrape, histogram: &str, target: &str) -> f64 {
    let (sum, count) = s.histogram(histogram, target);
    assert!(count > 0.0, "{histogram} {target}: no observations");
    sum / count
}

/// A target's probes all succeeded with the simulator's injected TTFT and ITL and its token
/// counts: 10 output tokens (9 gaps), 9 prompt words (16 requested: a nonce + 8 filler).
fn assert_the_simulators_truth(s: &common::Scrape, target: &str) {
    let ok = s.successes(target);
    assert_eq!(s.all_errors(target), 0.0, "{target}: {}", s.text);
    let ttft = mean(s, "inferprobe_time_to_first_token_seconds", target);
    assert!(
        (TTFT.as_secs_f64()..TTFT.as_secs_f64() + 0.06).contains(&ttft),
        "{target}: TTFT {ttft}"
    );
    let itl = mean(s, "inferprobe_inter_token_latency_seconds", target);
    assert!((0.018..0.026).contains(&itl), "{target}: ITL {itl}");
    let (_, gaps) = s.histogram("inferprobe_inter_token_latency_seconds", target);
    assert_eq!(gaps, 9.0 * ok, "{target}: 10 tokens give 9 gaps");
    let output = s.sum("inferprobe_output_tokens_total", &[("target", target)]);
    assert_eq!(output, 10.0 * ok, "{target}: output tokens");
    let prompt = s.sum("inferprobe_prompt_tokens_total", &[("target", target)]);
    assert_eq!(prompt, 9.0 * ok, "{target}: prompt tokens");
}

/// Every probe of each fault's target failed, in its category alone.
fn assert_faults(s: &common::Scrape, faults: &[(&str, &str, &str, &str)]) {
    for (name, _, fault, category) in faults {
        let errors = s.all_errors(name);
        assert_eq!(
            s.errors(name, category),
            errors,
            "{name} ({fault}): only {category}\n{}",
            s.text
        );
        assert_eq!(
            errors,
            s.requests(name),
            "{name} ({fault}): every probe failed"
        );
    }
}

/// One target per fault, forcing it with the simulator's header.
fn fault_targets(faults: &[(&str, &str, &str, &str)], extra: &str) -> String {
    faults
        .iter()
        .map(|(name, backend, fault, _)| {
            format!("[[targets]]\nname = \"{name}\"\nbackend = \"{backend}\"\nrate = 4\n{extra}headers = {{ \"x-inferprobe-fault\" = \"{fault}\" }}\n")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bedrock_backends_measure_the_simulators_truth() {
    let sim = start_sim(sim()).await;
    let targets = r#"
        [[targets]]
        name = "converse"
        backend = "bedrock"
        [[targets]]
        name = "invoke"
        backend = "anthropic-bedrock"
    "#;
    let toml = config(closed_port().await, &sim.url(), targets);
    let (daemon, issued, _dir) = daemon(&toml, Duration::from_secs(3600)).await;
    let s = daemon
        .wait_for(Duration::from_secs(40), |s| {
            s.successes("converse") >= 10.0 && s.successes("invoke") >= 10.0
        })
        .await;
    daemon.stop();
    for target in ["converse", "invoke"] {
        assert_the_simulators_truth(&s, target);
    }
    // An hour's credentials: one exchange per target for all of its probes.
    assert_eq!(issued.list().len(), 2);
}

/// (target, backend, fault forced by header, expected category)
const FAULTS: &[(&str, &str, &str, &str)] = &[
    ("throttled", "bedrock", "http_429", "rate_limited"),
    ("denied", "anthropic-bedrock", "http_401", "auth"),
    ("overloaded", "bedrock", "overloaded_event", "overloaded"),
    (
        "overloaded-invoke",
        "anthropic-bedrock",
        "overloaded_event",
        "overloaded",
    ),
    (
        "model-error",
        "bedrock",
        "error_event",
        "stream_error_event",
    ),
    (
        "internal",
        "anthropic-bedrock",
        "error_event",
        "stream_error_event",
    ),
    ("corrupt", "bedrock", "corrupt_frame", "invalid_response"),
    (
        "corrupt-invoke",
        "anthropic-bedrock",
        "corrupt_frame",
        "invalid_response",
    ),
    ("malformed", "bedrock", "malformed_json", "invalid_response"),
    ("reset", "anthropic-bedrock", "reset", "stream_interrupted"),
    ("cut", "bedrock", "no_done", "stream_interrupted"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bedrock_faults_land_in_their_categories() {
    let sim = start_sim(sim()).await;
    let targets = fault_targets(FAULTS, "");
    let toml = config(closed_port().await, &sim.url(), &targets);
    let (daemon, _, _dir) = daemon(&toml, Duration::from_secs(3600)).await;
    let s = daemon
        .wait_for(Duration::from_secs(40), |s| {
            FAULTS
                .iter()
                .all(|(name, _, _, category)| s.errors(name, category) >= 2.0)
        })
        .await;
    daemon.stop();
    assert_faults(&s, FAULTS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn irsa_credentials_are_refreshed_across_two_expiries_and_never_shown() {
    let sim = start_sim(sim()).await;
    let targets = "[[targets]]\nname = \"refresh\"\nbackend = \"bedrock\"\nrate = 10\n";
    let toml = config(closed_port().await, &sim.url(), targets);
    // Credentials that live 4 s: the simulator refuses each one a second past it.
    let (daemon, issued, _dir) = daemon(&toml, Duration::from_secs(4)).await;
    // Two lifetimes past the first credentials' expiry: two generations expired.
    let crossed = |issued: &[(SystemTime, u64)]| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        issued.len() >= 3 && now > issued[0].1 + 4
    };
    let s = daemon
        .wait_for(Duration::from_secs(40), |s| {
            crossed(&issued.list()) && s.successes("refresh") >= 40.0
        })
        .await;
    let metrics = s.text.clone();
    let config = daemon.get("/config").await.unwrap();
    let page = daemon.get("/").await.unwrap();
    let log = daemon.stop();
    assert_eq!(s.all_errors("refresh"), 0.0, "{metrics}\n{log}");
    let issued = issued.list();
    for pair in issued.windows(2) {
        let (next, expired) = (pair[1].0, UNIX_EPOCH + Duration::from_secs(pair[0].1));
        assert!(
            next < expired,
            "credentials refreshed after they expired: {issued:?}"
        );
    }
    for (what, text) in [
        ("log", &log),
        ("/metrics", &metrics),
        ("/config", &config),
        ("status page", &page),
    ] {
        for secret in [AWS_SECRET, "sim-expires-", "web-identity-jwt"] {
            assert!(!text.contains(secret), "{secret} in the {what}");
        }
    }
    assert!(
        log.contains("\"target\":\"refresh\""),
        "the log was read: {log}"
    );
}

/// Gemini's, Vertex AI's and Azure's doors, each with its own credentials: a pod on GKE
/// (the metadata server) and on AKS (workload identity, Entra over HTTPS) at once.
async fn google_and_azure(
    toml: &str,
    lifetime: Duration,
) -> (CloudDaemon, [common::clouds::Issued; 2], tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (host, google) = metadata(lifetime).await;
    let ca = dir.path().join("entra-ca.pem");
    let (authority, azure) = entra(lifetime, &ca).await;
    let path = dir.path().join("config.toml");
    std::fs::write(&path, toml).unwrap();
    let mut env = gke(dir.path(), &host);
    env.extend(aks(dir.path(), &authority, &ca));
    env.push(("CLOUD_TEST_KEY", "sk-cloud-KEY-1f2e3d".into()));
    let daemon = CloudDaemon::spawn(&path, port(toml), &env);
    (daemon, [google, azure], dir)
}

const GOOGLE_AND_AZURE: &str = r#"
    [[targets]]
    name = "gemini"
    backend = "gemini"
    model = "gemini-2.5-flash"
    api_key_env = "CLOUD_TEST_KEY"
    [[targets]]
    name = "vertex-gemini"
    backend = "vertex-gemini"
    model = "gemini-2.5-flash"
    project = "probe-project"
    [[targets]]
    name = "anthropic-vertex"
    backend = "anthropic-vertex"
    model = "claude-sonnet-4-5@20250929"
    project = "probe-project"
    [[targets]]
    name = "azure-key"
    backend = "azure-openai"
    model = "gpt-4o-deployment"
    api_key_env = "CLOUD_TEST_KEY"
    [[targets]]
    name = "azure-entra"
    backend = "azure-openai"
    model = "gpt-4o-deployment"
    credentials = "azure"
"#;

/// The Vertex AI targets' config: their region is the endpoint's `{region}`.
fn google_and_azure_config(port: u16, url: &str) -> String {
    config(port, url, GOOGLE_AND_AZURE)
        .replace("region = \"us-east-1\"", "region = \"us-central1\"")
}

const GOOGLE_AND_AZURE_TARGETS: [&str; 5] = [
    "gemini",
    "vertex-gemini",
    "anthropic-vertex",
    "azure-key",
    "azure-entra",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_vertex_and_azure_measure_the_simulators_truth() {
    let sim = start_sim(sim()).await;
    let toml = google_and_azure_config(closed_port().await, &sim.url());
    let (daemon, _, _dir) = google_and_azure(&toml, Duration::from_secs(3600)).await;
    let s = daemon
        .wait_for(Duration::from_secs(40), |s| {
            GOOGLE_AND_AZURE_TARGETS
                .iter()
                .all(|t| s.successes(t) >= 8.0)
        })
        .await;
    daemon.stop();
    for target in GOOGLE_AND_AZURE_TARGETS {
        assert_the_simulators_truth(&s, target);
    }
}

/// (target, backend, fault, category) on Google's and Azure's doors.
const GOOGLE_AZURE_FAULTS: &[(&str, &str, &str, &str)] = &[
    (
        "gemini-safety",
        "gemini",
        "content_filter",
        "content_filtered",
    ),
    (
        "azure-filter",
        "azure-openai",
        "content_filter",
        "content_filtered",
    ),
    (
        "gemini-overloaded",
        "gemini",
        "overloaded_event",
        "overloaded",
    ),
    (
        "gemini-error",
        "gemini",
        "error_event",
        "stream_error_event",
    ),
    ("gemini-throttled", "gemini", "http_429", "rate_limited"),
    ("azure-denied", "azure-openai", "http_401", "auth"),
    ("gemini-cut", "gemini", "no_done", "stream_interrupted"),
    (
        "gemini-corrupt",
        "gemini",
        "corrupt_frame",
        "invalid_response",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn google_and_azure_faults_land_in_their_categories() {
    let sim = start_sim(sim()).await;
    let targets = fault_targets(
        GOOGLE_AZURE_FAULTS,
        "api_key_env = \"CLOUD_TEST_KEY\"
",
    );
    let toml =
        config(closed_port().await, &sim.url(), &targets).replace("region = \"us-east-1\"\n", "");
    let (daemon, _, _dir) = google_and_azure(&toml, Duration::from_secs(3600)).await;
    let s = daemon
        .wait_for(Duration::from_secs(40), |s| {
            GOOGLE_AZURE_FAULTS
                .iter()
                .all(|(name, _, _, category)| s.errors(name, category) >= 2.0)
        })
        .await;
    daemon.stop();
    assert_faults(&s, GOOGLE_AZURE_FAULTS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn google_and_entra_tokens_are_refreshed_across_two_expiries_and_never_shown() {
    let sim = start_sim(sim()).await;
    let toml = google_and_azure_config(closed_port().await, &sim.url());
    // Tokens that live 12 s; the simulator refuses each once past.
    let (daemon, [google, azure], _dir) = google_and_azure(&toml, Duration::from_secs(12)).await;
    // Past the expiry of the tokens that replaced the first ones: two generations expired.
    let crossed = |issued: &[(SystemTime, u64)]| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        issued.len() >= 3 && now > issued[0].1 + 12
    };
    let s = daemon
        .wait_for(Duration::from_secs(60), |_| {
            crossed(&google.list()) && crossed(&azure.list())
        })
        .await;
    let metrics = s.text.clone();
    let config = daemon.get("/config").await.unwrap();
    let page = daemon.get("/").await.unwrap();
    let log = daemon.stop();
    for target in ["vertex-gemini", "anthropic-vertex", "azure-entra"] {
        assert_eq!(s.all_errors(target), 0.0, "{target}: {metrics}\n{log}");
        assert!(s.successes(target) >= 20.0, "{target}: {metrics}");
    }
    for issued in [google.list(), azure.list()] {
        for pair in issued.windows(2) {
            let (next, expired) = (pair[1].0, UNIX_EPOCH + Duration::from_secs(pair[0].1));
            assert!(
                next < expired,
                "a token refreshed after it expired: {issued:?}"
            );
        }
    }
    for (what, text) in [
        ("log", &log),
        ("/metrics", &metrics),
        ("/config", &config),
        ("status page", &page),
    ] {
        for secret in ["sim-expires-", "aks-federated-token", "sk-cloud-KEY-1f2e3d"] {
            assert!(!text.contains(secret), "{secret} in the {what}");
        }
    }
}

/// The port a config listens on.
fn port(toml: &str) -> u16 {
    toml.split("listen = \"127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|p| p.parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_metadata_server_fails_probes_as_auth_and_does_not_hold_the_shutdown() {
    // Accepts and never answers (GKE's metadata server behind a broken egress rule).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            open.push(stream);
        }
    });
    let sim = start_sim(sim()).await;
    let port = closed_port().await;
    let toml = format!(
        r#"
        listen = "127.0.0.1:{port}"
        shutdown_grace = "2s"
        [[targets]]
        name = "vertex"
        backend = "vertex-gemini"
        url = "{}"
        model = "gemini-2.5-flash"
        project = "p"
        region = "us-central1"
        rate = 4
        "#,
        sim.url()
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, &toml).unwrap();
    let daemon = CloudDaemon::spawn(&path, port, &gke(dir.path(), &host));
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| {
            s.errors("vertex", "auth") >= 2.0
        })
        .await;
    assert_eq!(
        s.all_errors("vertex"),
        s.errors("vertex", "auth"),
        "{}",
        s.text
    );
    let stopping = std::time::Instant::now();
    let log = daemon.stop();
    assert!(
        stopping.elapsed() < Duration::from_secs(6),
        "shutdown took {:?}: {log}",
        stopping.elapsed()
    );
    assert!(log.contains("did not answer within 10s"), "{log}");
    held.abort();
}

/// The canary's known answers through every cloud's door: the simulator's greedy toy model
/// knows 17 + 25, and garbled it does not; each door reports the same verdict. (Keys stand
/// in for the clouds' identities here: a Bedrock API key is a Bearer token.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_canary_asks_known_answers_through_every_door() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("known.jsonl");
    std::fs::write(
        &prompts,
        "{\"prompt\": \"What is 17 + 25? Answer with the number.\", \"expect\": \"\\\\b42\\\\b\"}\n",
    )
    .unwrap();
    let doors = ["bedrock", "anthropic-bedrock", "gemini", "azure-openai"];
    for (garble, expected) in [(false, "match"), (true, "wrong_answer")] {
        let server = start_sim(SimConfig {
            ttft: Duration::from_millis(5),
            itl: Duration::from_millis(1),
            model: Box::new(inferprobe::sim::model::ModelFlags {
                garble,
                ..Default::default()
            }),
            ..SimConfig::default()
        })
        .await;
        let mut toml = String::new();
        for door in doors {
            toml += &format!(
                "[[targets]]\nname = \"{door}\"\nbackend = \"{door}\"\nurl = \"{}\"\nmodel = \"m\"\nrate = 0.001\napi_key_env = \"HOME\"\ncanary = {{ interval = \"10ms\", prompts = \"{}\" }}\n",
                server.url(),
                prompts.display()
            );
            if door.contains("bedrock") {
                toml += "region = \"us-east-1\"\n";
            }
        }
        let daemon = common::start_daemon(&toml).await;
        let known = |s: &common::Scrape, door: &str, result: &str| {
            s.sum(
                "inferprobe_canary_known_answer_checks_total",
                &[("target", door), ("result", result)],
            )
        };
        let s = daemon
            .wait_for(Duration::from_secs(30), |s| {
                doors.iter().all(|door| known(s, door, expected) >= 5.0)
            })
            .await;
        daemon.stop().await;
        for door in doors {
            let all = s.sum(
                "inferprobe_canary_known_answer_checks_total",
                &[("target", door)],
            );
            assert_eq!(
                known(&s, door, expected),
                all,
                "{door}, garble={garble}: {}",
                s.text
            );
        }
    }
}
