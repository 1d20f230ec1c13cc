//! The fuzz drivers (tests/fuzz_drivers/) as property tests in the fast `cargo test`:
//! random bytes, mutated fixtures, and configs with one key set to an edge value, through
//! the SSE decoder, every backend and the config loader, in bounded case counts. The
//! coverage-guided runs of the same drivers are `scripts/fuzz.sh` (fuzz/).

use crate::fuzz_drivers;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::sample::select;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `dirs` that `keep` (given the path and the contents) selects.
fn files(dirs: &[&str], keep: impl Fn(&Path, &[u8]) -> bool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for dir in dirs {
        let mut paths: Vec<_> = std::fs::read_dir(repo().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        for path in paths {
            let bytes = std::fs::read(&path).unwrap();
            if keep(&path, &bytes) {
                out.push(bytes);
            }
        }
    }
    assert!(!out.is_empty(), "no seed files in {dirs:?}");
    out
}

/// SSE transcripts: real captures and the fuzz seeds of the other dialects.
fn streams() -> Vec<Vec<u8>> {
    let sse = |_: &Path, f: &[u8]| {
        [&b"data"[..], b"event", b":", b"\xEF"]
            .iter()
            .any(|p| f.starts_with(p))
    };
    files(
        &[
            "tests/fixtures/vllm",
            "tests/fixtures/llama-server",
            "fuzz/seeds/stream",
        ],
        sse,
    )
}

/// Non-streamed bodies (and error bodies): captures and seeds.
/// Bedrock's AWS event-stream answers (binary).
fn event_streams() -> Vec<Vec<u8>> {
    files(&["fuzz/seeds/eventstream"], |p: &Path, _: &[u8]| {
        p.extension().is_some_and(|e| e == "bin")
    })
}

/// `stream`'s messages, the one at `at` (modulo their count) with its payload mutated by
/// `edits`, written again with valid lengths and CRCs.
fn reframe(stream: &[u8], edits: &[Edit], at: usize) -> Vec<u8> {
    use aws_smithy_eventstream::frame::{read_message_from, write_message_to};
    let mut messages = Vec::new();
    let mut rest = stream;
    while rest.len() >= 4 {
        let length = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let Some(frame) = rest.get(..length) else {
            break;
        };
        messages.push(read_message_from(frame).unwrap());
        rest = &rest[length..];
    }
    let target = at % messages.len().max(1);
    let mut out = Vec::new();
    for (i, message) in messages.into_iter().enumerate() {
        let message = if i == target {
            let payload = mutate(message.payload().to_vec(), edits);
            let mut rebuilt = aws_smithy_types::event_stream::Message::new(payload);
            for header in message.headers() {
                rebuilt = rebuilt.add_header(header.clone());
            }
            rebuilt
        } else {
            message
        };
        write_message_to(&message, &mut out).unwrap();
    }
    out
}

fn bodies() -> Vec<Vec<u8>> {
    let json = |_: &Path, f: &[u8]| f.starts_with(b"{") || f.starts_with(b"[");
    files(
        &[
            "tests/fixtures/vllm",
            "tests/fixtures/llama-server",
            "fuzz/seeds/body",
        ],
        json,
    )
}

fn configs() -> Vec<Vec<u8>> {
    let repo = repo().display().to_string();
    let toml = |p: &Path, _: &[u8]| p.extension().is_some_and(|e| e == "toml");
    files(&["config", "config/kubernetes", "fuzz/seeds/config"], toml)
        .into_iter()
        .map(|f| {
            // As seed.sh does: real paths, and environment variable names (the only
            // all-capitals strings in these files) that are set everywhere.
            let text = String::from_utf8(f).unwrap().replace("@REPO@", &repo);
            let env = regex::Regex::new(r#""(@ENV@|[A-Z][A-Z0-9_]*)""#).unwrap();
            env.replace_all(&text, "\"HOME\"").into_owned().into_bytes()
        })
        .collect()
}

/// Bytes that matter to the parsers, spliced in by the mutator.
const TOKENS: &[&[u8]] = &[
    b"\n",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"data: ",
    b"event: error\n",
    b"id: ",
    b"\xEF\xBB\xBF",
    b"\xFF",
    b"\xE2\x82",
    b"[DONE]",
    b"\"",
    b"{",
    b"}",
    b"null",
    b"-1",
    b"1e400",
    b"18446744073709551616",
    b"\\ud800",
    br#""usage":{"completion_tokens":99999999999}"#,
    br#""choices":[{"text":"x","finish_reason":"stop"}]"#,
    br#""type":"message_stop""#,
    br#""type":"response.completed""#,
    b"[[targets]]\n",
    b" = ",
    b"1e-300",
    b"inf",
    b"0",
];

#[derive(Clone, Debug)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, &'static [u8]),
    Delete(usize, usize),
    Duplicate(usize, usize),
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Flip(at, b)),
        (any::<usize>(), select(TOKENS)).prop_map(|(at, t)| Edit::Insert(at, t)),
        (any::<usize>(), 1..64usize).prop_map(|(at, n)| Edit::Delete(at, n)),
        (any::<usize>(), 1..256usize).prop_map(|(at, n)| Edit::Duplicate(at, n)),
        any::<usize>().prop_map(Edit::Truncate),
    ]
}

fn mutate(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for edit in edits {
        let len = bytes.len();
        let at = |i: usize| if len == 0 { 0 } else { i % (len + 1) };
        match *edit {
            Edit::Flip(i, b) if len > 0 => bytes[i % len] ^= b.max(1),
            Edit::Flip(..) => {}
            Edit::Insert(i, token) => {
                let i = at(i);
                bytes.splice(i..i, token.iter().copied());
            }
            Edit::Delete(i, n) => {
                let i = at(i);
                bytes.drain(i..(i + n).min(len));
            }
            Edit::Duplicate(i, n) => {
                let i = at(i);
                let copy = bytes[i..(i + n).min(len)].to_vec();
                bytes.splice(i..i, copy);
            }
            Edit::Truncate(i) => bytes.truncate(at(i)),
        }
    }
    bytes
}

/// A seed file, mutated, behind a selector byte.
fn mutated(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u8>(),
        select(seeds),
        proptest::collection::vec(edit(), 0..6),
    )
        .prop_map(|(selector, seed, edits)| {
            let mut input = vec![selector];
            input.extend(mutate(seed, &edits));
            input
        })
}

fn random_bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..512)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn sse_decoder_random(input in random_bytes()) {
        fuzz_drivers::sse_decoder(&input);
    }

    #[test]
    fn sse_decoder_mutated_fixtures(input in mutated(streams())) {
        fuzz_drivers::sse_decoder(&input);
    }

    #[test]
    fn backends_random(input in random_bytes()) {
        fuzz_drivers::backends(&input);
    }

    #[test]
    fn backends_mutated_streams(input in mutated(streams())) {
        fuzz_drivers::backends(&input);
    }

    #[test]
    fn backends_mutated_bodies(
        input in mutated(bodies()),
        kind in select(vec![4u8, 5]),
        checked in any::<bool>(),
    ) {
        let mut input = input;
        input[0] = kind + fuzz_drivers::KINDS.len() as u8 * u8::from(checked);
        fuzz_drivers::backends(&input);
    }

    /// Frames whose payloads are mutated and whose CRCs are then made right again (the AWS
    /// SDK's encoder): past the checksums, into the Bedrock parsers.
    #[test]
    fn backends_reframed_event_streams(
        seed in select(event_streams()),
        edits in proptest::collection::vec(edit(), 0..6),
        at in any::<usize>(),
        kind in select(vec![9u8, 10]),
        split in 0u8..8,
    ) {
        let mut input = vec![kind + fuzz_drivers::KINDS.len() as u8 * split];
        input.extend(reframe(&seed, &edits, at));
        fuzz_drivers::backends(&input);
    }

    #[test]
    fn backends_mutated_event_streams(
        input in mutated(event_streams()),
        kind in select(vec![9u8, 10]),
        split in 0u8..8,
    ) {
        let mut input = input;
        input[0] = kind + fuzz_drivers::KINDS.len() as u8 * split;
        fuzz_drivers::backends(&input);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn config_random(input in random_bytes()) {
        fuzz_drivers::config(&input);
    }

    #[test]
    fn config_mutated(input in mutated(configs())) {
        fuzz_drivers::config(&input[1..]);
    }

    /// A valid config with up to three keys set to edge values: the loader answers with
    /// a `ConfigError` (naming the key) or a config the daemon can run.
    #[test]
    fn config_edge_values(
        edits in proptest::collection::vec((select(KEYS), select(VALUES), any::<bool>()), 1..4),
    ) {
        let mut top = String::new();
        let mut target =
            String::from("name = \"t\"\nurl = \"http://127.0.0.1:1\"\nmodel = \"m\"\n");
        for (key, value, in_target) in &edits {
            let section = if *in_target { &mut target } else { &mut top };
            section.push_str(&format!("{key} = {value}\n"));
        }
        let toml = format!("{top}[[targets]]\n{target}");
        fuzz_drivers::config(toml.as_bytes());
    }
}

/// Keys of the top level and of a target (a top-level key inside a target, or the
/// reverse, is an unknown-key error: also worth checking).
const KEYS: &[&str] = &[
    "listen",
    "seed",
    "shutdown_grace",
    "watch_config",
    "watch_interval",
    "status_page_probes",
    "labels",
    "labels_from_env",
    "backend",
    "url",
    "endpoint",
    "model",
    "rate",
    "burstiness",
    "max_concurrency",
    "input_tokens",
    "output_tokens",
    "ignore_eos",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "stop",
    "extra_body",
    "include_usage",
    "continuous_usage_stats",
    "headers",
    "api_key_env",
    "api_key_file",
    "request_id_prefix",
    "connect_timeout",
    "ttft_timeout",
    "stall_timeout",
    "request_timeout",
    "max_event_bytes",
    "max_response_bytes",
    "max_events",
    "models",
    "tokenizer",
    "range_ratio",
    "shared_prefix_tokens",
    "dataset",
    "dataset_format",
    "output_tokens_from_dataset",
    "validate",
    "embedding_dimensions",
    "audio_seconds",
    "audio_tone_hz",
    "audio_language",
    "anthropic_version",
    "slo",
    "connection",
    "tls_ca_file",
    "tls_client_cert_file",
    "tls_client_key_file",
    "insecure_skip_verify",
    "max_output_tokens_per_hour",
];

const VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "0.5",
    "1e-300",
    "5e-324",
    "1e308",
    "1.7976931348623157e308",
    "inf",
    "-inf",
    "nan",
    "9223372036854775807",
    "-9223372036854775808",
    "true",
    "\"\"",
    "\"x\"",
    "\"0s\"",
    "\"1ms\"",
    "\"1e400s\"",
    "\"18446744073709551615s\"",
    "\"-1s\"",
    "\"openai-audio\"",
    "\"tensorrt-llm\"",
    "\"openai-embeddings\"",
    "\"/\"",
    "\"{model}\"",
    "\"http://h\"",
    "\"http://[::1]:1/a b\"",
    "\"(\"",
    "\"a{1000}{1000}{1000}\"",
    "[]",
    "[\"\"]",
    "{}",
    "{ x = 1 }",
    "{ ttft = 0 }",
    "{ objective = 1 }",
    "{ e2el = \"1h\" }",
    "{ \"\" = \"\" }",
    "{ __x = \"y\" }",
    "{ regex = \"\\\\w\", output_tokens = true }",
    "\"HOME\"",
    "\"/dev/null\"",
    "\"/nonexistent\"",
    "\"fresh\"",
    "1e-6",
    "1e-7",
    "0.001",
    "1000",
    "1e306",
    "1e19",
    "86400",
    "86401",
    "\"500000000000years\"",
];

#[test]
fn seed_files_pass_the_drivers_unchanged() {
    for stream in streams() {
        for selector in 0..=255 {
            let mut input = vec![selector];
            input.extend(&stream);
            fuzz_drivers::sse_decoder(&input);
            fuzz_drivers::backends(&input);
        }
    }
    let kinds = fuzz_drivers::KINDS.len() as u8;
    let streams = event_streams();
    assert!(streams.len() >= 3, "fuzz/seeds/eventstream");
    for stream in streams {
        for selector in 0..=255 {
            let mut input = vec![selector];
            input.extend(&stream);
            fuzz_drivers::backends(&input);
        }
    }
    for body in bodies() {
        for selector in [4, 5, 4 + kinds, 5 + kinds] {
            let mut input = vec![selector];
            input.extend(&body);
            fuzz_drivers::backends(&input);
        }
    }
    for config in configs() {
        fuzz_drivers::config(&config);
    }
    assert!(Path::new(&repo().join("fuzz/seed.sh")).is_file());
}

/// Found fuzzing the config loader: `rate = 1e-300` validated and then panicked in the
/// scheduler, `5e-324` or an extreme burstiness gave a gamma distribution that could not
/// be built, and `request_timeout = 1e19` panicked every probe. The ends of the accepted
/// ranges must run.
#[test]
fn the_extremes_of_rate_burstiness_and_timeouts_run() {
    for rate in ["1e-6", "1000"] {
        for burstiness in ["0.001", "1000"] {
            let toml = format!(
                "[[targets]]\nname = \"t\"\nurl = \"http://127.0.0.1:1\"\nmodel = \"m\"\n\
                 rate = {rate}\nburstiness = {burstiness}\nconnect_timeout = \"1day\"\n\
                 ttft_timeout = 86400\nstall_timeout = \"1d\"\nrequest_timeout = \"24h\"\n"
            );
            inferprobe::config::load_str(&toml).unwrap();
            fuzz_drivers::config(toml.as_bytes());
        }
    }
}
