//! The simulator's OpenAI dialect: parse a completions / chat request and plan the response
//! as a timeline of writes (offsets from the request's arrival), faults included.
//!
//! Timing model: the first token chunk is written at `ttft`, each later chunk of k tokens
//! k·`itl` after the previous one, so with per-chunk usage every ITL observation should
//! equal `itl` and TTFT should equal `ttft` plus transport overhead. The chat role-only
//! chunk is written immediately on arrival, so a probe that took TTFT on it would report
//! ~0 instead of `ttft`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rand::{Rng, RngExt};
use serde::Deserialize;
use serde_json::{Value, json};

use super::SimConfig;
use super::faults::Fault;

/// Output length when a request names none.
const DEFAULT_MAX_TOKENS: u64 = 16;
const MAX_OUTPUT_TOKENS: u64 = 100_000;

const WORDS: &[&str] = &[
    "probe", "token", "stream", "latency", "model", "server", "metric", "river", "stone", "light",
    "cloud", "field", "north", "quiet", "green", "paper",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRequest {
    pub chat: bool,
    pub model: String,
    pub prompt_tokens: u64,
    pub max_tokens: u64,
    pub stream: bool,
    pub include_usage: bool,
    pub continuous_usage: bool,
}

#[derive(Deserialize)]
struct WireRequest {
    model: Option<String>,
    prompt: Option<Value>,
    messages: Option<Vec<WireMessage>>,
    max_tokens: Option<u64>,
    max_completion_tokens: Option<u64>,
    #[serde(default)]
    stream: bool,
    stream_options: Option<WireStreamOptions>,
}

#[derive(Deserialize)]
struct WireMessage {
    content: Option<Value>,
}

#[derive(Deserialize, Default)]
struct WireStreamOptions {
    #[serde(default)]
    include_usage: bool,
    #[serde(default)]
    continuous_usage_stats: bool,
}

/// Words in a prompt value (a string, or anything else serialized), as its token count.
fn words(value: &Value) -> u64 {
    match value {
        Value::String(s) => s.split_whitespace().count() as u64,
        Value::Null => 0,
        other => other.to_string().split_whitespace().count() as u64,
    }
}

pub fn parse_request(chat: bool, body: &[u8]) -> Result<SimRequest, String> {
    let wire: WireRequest =
        serde_json::from_slice(body).map_err(|e| format!("invalid request JSON: {e}"))?;
    let prompt_tokens = if chat {
        let messages = wire.messages.ok_or("`messages` is required")?;
        messages
            .iter()
            .map(|m| m.content.as_ref().map_or(0, words))
            .sum()
    } else {
        words(wire.prompt.as_ref().ok_or("`prompt` is required")?)
    };
    let options = wire.stream_options.unwrap_or_default();
    Ok(SimRequest {
        chat,
        model: wire.model.unwrap_or_else(|| "sim".into()),
        prompt_tokens,
        max_tokens: wire
            .max_completion_tokens
            .or(wire.max_tokens)
            .unwrap_or(DEFAULT_MAX_TOKENS),
        stream: wire.stream,
        include_usage: options.include_usage,
        continuous_usage: options.continuous_usage_stats,
    })
}

/// One write of the response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Send(Bytes),
    /// Abort the connection (the client sees a truncated body).
    Reset,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Offset from the request's arrival.
    pub at: Duration,
    pub action: Action,
}

struct Writer<'a> {
    req: &'a SimRequest,
    id: String,
    created: u64,
    steps: Vec<Step>,
}

impl Writer<'_> {
    fn event(&mut self, at: Duration, data: &str) {
        let bytes = Bytes::from(format!("data: {data}\n\n"));
        self.steps.push(Step {
            at,
            action: Action::Send(bytes),
        });
    }

    fn chunk(&mut self, at: Duration, choices: Value, usage: Option<Value>) {
        let object = if self.req.chat {
            "chat.completion.chunk"
        } else {
            "text_completion"
        };
        let mut chunk = json!({
            "id": self.id, "object": object, "created": self.created,
            "model": self.req.model, "choices": choices,
        });
        if let Some(usage) = usage {
            chunk["usage"] = usage;
        }
        self.event(at, &chunk.to_string());
    }

    fn choice(&self, text: &str, finish: Option<&str>) -> Value {
        if self.req.chat {
            json!([{ "index": 0, "delta": { "content": text }, "logprobs": null, "finish_reason": finish }])
        } else {
            json!([{ "index": 0, "text": text, "logprobs": null, "finish_reason": finish }])
        }
    }

    fn usage(&self, completion: u64) -> Value {
        let prompt = self.req.prompt_tokens;
        json!({ "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion })
    }
}

/// The output length the simulator will produce for `req`.
pub fn output_tokens(req: &SimRequest, config: &SimConfig) -> u64 {
    config
        .output_tokens
        .map_or(req.max_tokens, u64::from)
        .clamp(1, MAX_OUTPUT_TOKENS)
}

fn text(from: u64, count: u64) -> String {
    (from..from + count)
        .map(|i| format!(" {}", WORDS[i as usize % WORDS.len()]))
        .collect()
}

/// The timeline of a streamed response with an optional fault.
pub fn stream_plan(
    req: &SimRequest,
    config: &SimConfig,
    fault: Option<Fault>,
    rng: &mut impl Rng,
) -> Vec<Step> {
    if fault == Some(Fault::Empty) {
        return Vec::new();
    }
    let jitter = |d: Duration, rng: &mut dyn FnMut() -> f64| {
        if config.jitter > 0.0 {
            d.mul_f64((1.0 + config.jitter * (2.0 * rng() - 1.0)).max(0.0))
        } else {
            d
        }
    };
    let mut uniform = || rng.random::<f64>();
    let usage = config.usage && req.include_usage;
    let continuous = usage && config.continuous_usage && req.continuous_usage;
    let n = output_tokens(req, config);
    let k = u64::from(config.tokens_per_chunk.max(1));
    let mut w = Writer {
        req,
        id: format!("sim-{:016x}", uniform().to_bits()),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        steps: Vec::new(),
    };
    if req.chat && config.role_chunk {
        let role = json!([{ "index": 0, "delta": { "role": "assistant", "content": "" }, "logprobs": null, "finish_reason": null }]);
        let usage = continuous.then(|| w.usage(0));
        w.chunk(Duration::ZERO, role, usage);
    }
    let chunks = n.div_ceil(k);
    // Mid-stream faults strike before this chunk: at least one token has been sent.
    let strike_at = (chunks / 2).max(1);
    let mut t = jitter(config.ttft, &mut uniform);
    if fault == Some(Fault::TtftStall) {
        t += config.stall;
    }
    let mut sent = 0;
    for j in 0..=chunks {
        if j == strike_at {
            match fault {
                Some(Fault::ErrorEvent) => {
                    let error = json!({"error": {"message": "simulated failure mid-stream", "type": "InternalServerError", "code": 500}});
                    w.event(t, &error.to_string());
                    w.event(t, "[DONE]");
                    return w.steps;
                }
                Some(Fault::Reset) => {
                    w.steps.push(Step {
                        at: t,
                        action: Action::Reset,
                    });
                    return w.steps;
                }
                Some(Fault::Stall) => t += config.stall,
                Some(Fault::MalformedJson) => w.event(t, r#"{"choices":[{"index":0,"text":"trunc"#),
                _ => {}
            }
        }
        if j == chunks {
            break;
        }
        let size = k.min(n - sent);
        if j > 0 {
            t += jitter(config.itl * size as u32, &mut uniform);
        }
        let last = j + 1 == chunks;
        let finish = (last && fault != Some(Fault::NoDone)).then_some(if n == req.max_tokens {
            "length"
        } else {
            "stop"
        });
        let choices = w.choice(&text(sent, size), finish);
        sent += size;
        let usage = continuous.then(|| w.usage(sent));
        w.chunk(t, choices, usage);
    }
    if fault == Some(Fault::NoDone) {
        return w.steps;
    }
    if usage {
        let usage = w.usage(sent);
        w.chunk(t, json!([]), Some(usage));
    }
    w.event(t, "[DONE]");
    w.steps
}

/// A non-streamed response: its delay and JSON body.
pub fn complete_response(req: &SimRequest, config: &SimConfig) -> (Duration, Bytes) {
    let n = output_tokens(req, config);
    let content = text(0, n);
    let finish = if n == req.max_tokens {
        "length"
    } else {
        "stop"
    };
    let choice = if req.chat {
        json!({ "index": 0, "message": { "role": "assistant", "content": content }, "finish_reason": finish })
    } else {
        json!({ "index": 0, "text": content, "finish_reason": finish })
    };
    let body = json!({
        "id": "sim-nonstream",
        "object": if req.chat { "chat.completion" } else { "text_completion" },
        "model": req.model,
        "choices": [choice],
        "usage": { "prompt_tokens": req.prompt_tokens, "completion_tokens": n, "total_tokens": req.prompt_tokens + n },
    });
    let delay = config.ttft + config.itl * (n.saturating_sub(1) as u32);
    (delay, Bytes::from(body.to_string()))
}

#[cfg(test)]
mod tests;
