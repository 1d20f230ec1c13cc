//! Fuzz drivers, shared by the cargo-fuzz targets (`fuzz/`, which include this file with
//! `#[path]`) and the property tests (`tests/fuzz_props.rs`): each takes arbitrary bytes,
//! runs an entry point that a server or a user can reach, and panics only when a property
//! the daemon relies on fails.
//!
//! Input layout: the first byte selects the variant (event size limit, backend, how the
//! body is split into reads); the rest is what the server (or the config file) would send.
//! `fuzz/seed.sh` writes its seeds this way.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use figment::Figment;
use figment::providers::{Format, Toml};
use inferprobe::backend::BackendKind;
use inferprobe::config::{self, RawConfig, Target};
use inferprobe::error::{ErrorCategory, ProbeError};
use inferprobe::probe::StreamReader;
use inferprobe::prompt::Prompt;
use inferprobe::record::{Measurement, RequestRecord, TokenCount};
use inferprobe::scheduler::Arrivals;
use inferprobe::sse::{DEFAULT_MAX_EVENT_BYTES, SseDecoder, SseError, SseEvent};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::time::Instant;

/// The backends in selector order (`selector % 14`). `vertex-gemini` is `gemini`'s parser.
pub const KINDS: [BackendKind; 14] = [
    BackendKind::OpenAi,
    BackendKind::OpenAiChat,
    BackendKind::Tgi,
    BackendKind::TensorRtLlm,
    BackendKind::DeepSpeedMii,
    BackendKind::OpenAiEmbeddings,
    BackendKind::OpenAiAudio,
    BackendKind::Anthropic,
    BackendKind::OpenAiResponses,
    BackendKind::Bedrock,
    BackendKind::AnthropicBedrock,
    BackendKind::Gemini,
    BackendKind::AnthropicVertex,
    BackendKind::AzureOpenAi,
];

/// Event size limits the SSE driver picks from (`selector & 3`): tiny ones reach the
/// `TooLarge` paths with short inputs.
pub const SSE_LIMITS: [usize; 4] = [16, 256, 4096, DEFAULT_MAX_EVENT_BYTES];

/// The largest read for each split class.
const MAX_READ: [usize; 6] = [1, 2, 3, 8, 64, 4096];

/// Split `body` into reads the way a network might, with sizes from a PRNG seeded by the
/// input itself (so a crash reproduces from its file alone); empty reads included.
pub fn reads(body: &[u8], class: u8) -> Vec<&[u8]> {
    let max = MAX_READ[usize::from(class) % MAX_READ.len()] as u64;
    // FNV-1a of the body, forced odd so the xorshift state is never zero.
    let mut state = body.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    }) | 1;
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let n = usize::try_from(state % (max + 1))
            .unwrap_or(1)
            .min(rest.len());
        let (head, tail) = rest.split_at(n);
        out.push(head);
        rest = tail;
    }
    out
}

#[derive(Debug, PartialEq)]
struct Decoded {
    events: Vec<SseEvent>,
    /// `Ok(has_partial_event)` at the end, or the first error.
    end: Result<bool, SseError>,
}

fn decode(limit: usize, reads: &[&[u8]]) -> Decoded {
    let mut decoder = SseDecoder::new(limit);
    let mut events = Vec::new();
    for read in reads {
        if let Err(e) = decoder.push(read, &mut events) {
            return Decoded {
                events,
                end: Err(e),
            };
        }
    }
    Decoded {
        events,
        end: Ok(decoder.has_partial_event()),
    }
}

/// The SSE decoder: any split of the reads gives the events of one whole read (and the
/// same error at the same offset), no event exceeds the limit, and a stream that decodes
/// gives what a plain, non-incremental reading of the WHATWG algorithm gives.
pub fn sse_decoder(input: &[u8]) {
    let Some((&selector, body)) = input.split_first() else {
        return;
    };
    let limit = SSE_LIMITS[usize::from(selector & 3)];
    let whole = decode(limit, &[body]);
    let split = decode(limit, &reads(body, selector >> 2));
    assert_eq!(split, whole, "splitting the reads changed the result");
    for event in &whole.events {
        let longest = [
            Some(event.data.as_str()),
            event.event.as_deref(),
            event.id.as_deref(),
        ]
        .into_iter()
        .flatten()
        .map(str::len)
        .max();
        assert!(
            longest <= Some(limit),
            "an event exceeds the {limit}-byte limit"
        );
    }
    if whole.end.is_ok() {
        assert_eq!(
            whole.events,
            reference_events(body),
            "differs from the reference"
        );
    }
}

/// The event stream interpretation read straight from the spec, on the whole body: lines
/// end at CRLF, LF or CR; a BOM is skipped at the start; the unterminated tail is dropped.
/// Only called on bodies the decoder accepted, so every complete line is UTF-8. One
/// deliberate deviation, as in the decoder: an `error:` line is data of an `error` event
/// (llama.cpp's in-stream errors).
fn reference_events(body: &[u8]) -> Vec<SseEvent> {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let mut lines = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < body.len() {
        match body[i] {
            b'\n' => {
                lines.push(&body[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                lines.push(&body[start..i]);
                i += if body.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                start = i;
            }
            _ => i += 1,
        }
    }
    let (mut events, mut data, mut kind, mut id) = (Vec::new(), String::new(), None, None);
    for line in lines {
        let line = String::from_utf8_lossy(line);
        if line.is_empty() {
            let kind = kind.take().filter(|k: &String| !k.is_empty());
            if !data.is_empty() {
                data.pop();
                events.push(SseEvent {
                    event: kind,
                    data: std::mem::take(&mut data),
                    id: id.clone(),
                });
            }
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.find(':') {
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&*line, ""),
        };
        match field {
            "data" => {
                data.push_str(value);
                data.push('\n');
            }
            "event" => kind = Some(value.to_owned()),
            "error" => {
                kind = Some("error".to_owned());
                data.push_str(value);
                data.push('\n');
            }
            "id" if !value.contains('\0') => id = Some(Arc::<str>::from(value)),
            _ => {}
        }
    }
    events
}

/// One target per backend, plain and with every check that backend allows (validation,
/// a tokenizer, the smallest event limit), loaded through the real config path.
fn targets() -> &'static [Arc<Target>] {
    static TARGETS: OnceLock<Vec<Arc<Target>>> = OnceLock::new();
    TARGETS.get_or_init(|| {
        let tokenizer = tokenizer_path();
        let mut toml = String::new();
        for checked in [false, true] {
            for kind in KINDS {
                toml.push_str(&format!(
                    "[[targets]]\nname = \"{kind}-{checked}\"\nbackend = \"{kind}\"\n\
                     url = \"http://127.0.0.1:1\"\nmodel = \"m\"\n"
                ));
                // What the clouds' doors need besides (their credentials are never asked for).
                match kind {
                    BackendKind::Bedrock | BackendKind::AnthropicBedrock => {
                        toml.push_str("region = \"us-east-1\"\n");
                    }
                    BackendKind::AnthropicVertex => {
                        toml.push_str("region = \"us-east5\"\nproject = \"p\"\n");
                    }
                    // A key they refuse to run without (HOME: a variable always set).
                    BackendKind::Gemini | BackendKind::AzureOpenAi => {
                        toml.push_str("api_key_env = \"HOME\"\n");
                    }
                    _ => {}
                }
                if !checked {
                    continue;
                }
                toml.push_str("max_event_bytes = 1024\n");
                if kind == BackendKind::OpenAiEmbeddings {
                    toml.push_str("embedding_dimensions = 4\nvalidate = { model = true }\n");
                    continue;
                }
                if let Some(path) = &tokenizer {
                    toml.push_str(&format!("tokenizer = '{}'\n", path.display()));
                }
                let exact = tokenizer.is_some() || kind != BackendKind::TensorRtLlm;
                toml.push_str(&format!(
                    "validate = {{ regex = '\\w', finish_reasons = [\"stop\", \"length\"], \
                     model = true, output_tokens = {exact} }}\n"
                ));
            }
        }
        match config::load_str(&toml) {
            Ok(config) => config.targets,
            Err(e) => panic!("the fuzz targets' own config is invalid: {e}\n{toml}"),
        }
    })
}

/// The tiny BPE tokenizer of tests/fixtures, from the main crate or from `fuzz/`.
fn tokenizer_path() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [dir.clone(), dir.join("..")]
        .into_iter()
        .map(|d| d.join("tests/fixtures/tokenizer/tiny-bpe.json"))
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok())
        .filter(|p| !p.to_string_lossy().contains('\''))
}

/// Every backend: the body through the probe's path for that backend (SSE decoder, stream
/// parser, record, measurement and validation; or the whole-body parser), as
/// `src/probe.rs` runs it. A failure must be one of the categories a response can cause,
/// the recorded text can only come from the body, and a measurement must be consistent.
pub fn backends(input: &[u8]) {
    let Some((&selector, body)) = input.split_first() else {
        return;
    };
    let kind_index = usize::from(selector) % KINDS.len();
    let checked = usize::from(selector) / KINDS.len() % 2;
    let target = &targets()[checked * KINDS.len() + kind_index];
    let t0 = Instant::now();
    let mut record = RequestRecord::new(t0);
    record.response_at = Some(t0);
    let read = if target.backend.streams() {
        read_stream(
            target,
            body,
            (usize::from(selector) / (2 * KINDS.len())) as u8,
            &mut record,
        )
    } else {
        read_whole(target, body, &mut record)
    };
    let prompt = Prompt {
        text: "fuzz".into(),
        input_tokens: 2,
        input_exact: false,
        media: Ok(Vec::new()),
        greedy: None,
        sampled: None,
        structure: None,
        cache_breakpoint: None,
        conversation: None,
        extra: None,
        max_tokens: 4,
        model: "m".into(),
    };
    let result = read
        .and_then(|()| record.measure(target.prompts.tokenizer.as_deref()))
        .and_then(|m| {
            target.validation.check(&prompt, &record.response, &m)?;
            Ok(m)
        });
    assert!(
        record.response.text.len() <= body.len(),
        "the output text is longer than the body it came from"
    );
    match result {
        Ok(measurement) => check_measurement(&measurement, &record),
        Err(e) => assert!(
            matches!(
                e.category(),
                ErrorCategory::StreamInterrupted
                    | ErrorCategory::StreamErrorEvent
                    | ErrorCategory::Overloaded
                    | ErrorCategory::RateLimited
                    | ErrorCategory::ContextLength
                    | ErrorCategory::ContentFiltered
                    | ErrorCategory::InvalidResponse
                    | ErrorCategory::EmptyResponse
                    | ErrorCategory::TooLarge
                    | ErrorCategory::Validation
            ),
            "a response body cannot cause {:?}: {e}",
            e.category()
        ),
    }
}

/// The probe's own stream reading (`StreamReader`, as `Prober::exchange` drives it) without
/// the network: one read per millisecond, its events stamped with its arrival.
fn read_stream(
    target: &Target,
    body: &[u8],
    class: u8,
    record: &mut RequestRecord,
) -> Result<(), ProbeError> {
    let mut stream = StreamReader::new(target.backend.backend().as_ref(), target.limits);
    let mut now = record.start;
    for read in reads(body, class) {
        now += Duration::from_millis(1);
        if stream.read(now, read, record)? {
            return Ok(());
        }
    }
    stream.end(now + Duration::from_millis(1), record)
}

/// `Prober::read_whole` after the body arrived.
fn read_whole(target: &Target, body: &[u8], record: &mut RequestRecord) -> Result<(), ProbeError> {
    record.end = Some(record.start + Duration::from_millis(1));
    record.bytes = body.len() as u64;
    let whole = target
        .backend
        .backend()
        .parse_body(body, target, &mut record.response)?;
    record.whole = Some(whole);
    Ok(())
}

fn check_measurement(m: &Measurement, record: &RequestRecord) {
    if let Some(ttft) = m.ttft {
        assert!(ttft <= m.e2el, "TTFT {ttft:?} after the end {:?}", m.e2el);
    }
    // Each entry is a gap split k ways; together they span first token → last token.
    let spanned: Duration = m.itl.iter().map(|&(gap, k)| gap * k).sum();
    assert!(
        spanned <= m.e2el,
        "ITL spans {spanned:?} > E2EL {:?}",
        m.e2el
    );
    assert!(
        m.itl.len() as u64 <= record.events,
        "{} ITL entries from {} events",
        m.itl.len(),
        record.events
    );
    if let Some(TokenCount::Usage(n)) = m.output_tokens {
        assert!(n <= 1 << 20, "implausible output token count {n} accepted");
    }
}

/// The config loader on `input` as a file's text: Ok or a `ConfigError` with a reason,
/// never a panic; and a config that loads must run: arrivals, prompts, requests.
pub fn config(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    if exact_prompts_too_long_to_fuzz(&text) {
        return;
    }
    let config = match config::load_str(&text) {
        Ok(config) => config,
        Err(e) => {
            assert!(!e.reason.is_empty(), "an error without a reason: {e:?}");
            return;
        }
    };
    assert!(!config.targets.is_empty());
    let mut rng = StdRng::seed_from_u64(7);
    for target in &config.targets {
        let arrivals = Arrivals::new(target.rate, target.burstiness, 7);
        let Ok(mut arrivals) = arrivals else {
            panic!("a validated target cannot be scheduled: {arrivals:?}");
        };
        arrivals.start_offset();
        for _ in 0..4 {
            arrivals.next_gap();
        }
        // The deadlines every probe computes from its t0 (`Instant + Duration` panics on
        // overflow).
        let t0 = Instant::now();
        let timeouts = target.timeouts;
        let _ = [
            timeouts.connect,
            timeouts.ttft,
            timeouts.stall,
            timeouts.request,
        ]
        .map(|t| t0 + t);
        let backend = target.backend.backend();
        if let Some(key) = &target.api_key {
            backend.authorize(key);
        }
        // Ten minutes of generated audio is 19 MB: fine once, too slow per fuzz input.
        if target.backend == BackendKind::OpenAiAudio && target.options.audio.seconds > 10.0 {
            continue;
        }
        for _ in 0..2 {
            let prompt = target.prompts.next(&mut rng);
            backend.request(target, &prompt);
        }
    }
}

/// Exact prompts (with a tokenizer) longer than this are skipped. They are bounded (1M
/// tokens at most) and legitimate, but tokenizing one takes seconds and ~0.5 GB, which the
/// fuzzer's memory ceiling and timeout would report as a failure on every such input.
const MAX_EXACT_PROMPT_TOKENS: f64 = 100_000.0;

fn exact_prompts_too_long_to_fuzz(text: &str) -> bool {
    let Ok(raw) = Figment::from(Toml::string(text)).extract::<RawConfig>() else {
        return false;
    };
    raw.targets.iter().any(|t| {
        let t = t.clone().inherit(&raw.defaults);
        let ratio = t.range_ratio.unwrap_or(0.0).clamp(0.0, 1.0);
        let longest = t.input_tokens.unwrap_or(0) as f64 * (1.0 + ratio);
        let prefix = t.shared_prefix_tokens.unwrap_or(0) as f64;
        t.tokenizer.is_some() && longest.max(prefix) > MAX_EXACT_PROMPT_TOKENS
    })
}
