//! The simulator's timing model: when each write of a response happens, faults included.
//!
//! The first token chunk is written at `ttft`, each later chunk of k tokens k·`itl` after
//! the previous one, on an absolute schedule from the request's arrival, so with per-chunk
//! usage every ITL observation should equal `itl` and TTFT should equal `ttft` plus
//! transport overhead. Events before the first token (a chat role chunk, `message_start`)
//! are written on arrival, so a probe that took TTFT on one of them would report ~0.
//! Images and videos lengthen the prefill: `ttft` grows by the configured time per item
//! and per megapixel ([`first_token`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rand::{Rng, RngExt};
use serde_json::{Value, json};

use super::SimConfig;
use super::conversation::Turn;
use super::faults::Fault;
use super::render::{self, CallRef, Ctx};
use super::request::{Dialect, SimRequest};
use super::structured::{self, Answer};

const MAX_OUTPUT_TOKENS: u64 = 100_000;
/// The media's share of TTFT is capped: the item count and pixels are the client's, and
/// an instant too far out would overflow.
const MAX_MEDIA_PREFILL: Duration = Duration::from_secs(24 * 3600);

const WORDS: &[&str] = &[
    "probe", "token", "stream", "latency", "model", "server", "metric", "river", "stone", "light",
    "cloud", "field", "north", "quiet", "green", "paper",
];

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
    /// This write carries output tokens (for the ground-truth timeline).
    pub token: bool,
}

/// The output length the simulator will produce for `req`.
pub fn output_tokens(req: &SimRequest, config: &SimConfig) -> u64 {
    config
        .output_tokens
        .map_or(req.max_tokens, |n| u64::from(n.get()))
        .clamp(1, MAX_OUTPUT_TOKENS)
}

/// Time to first token: `ttft`, plus the prefill of the request's images and videos.
pub fn first_token(req: &SimRequest, config: &SimConfig) -> Duration {
    let thinking = config.itl.saturating_mul(config.hidden_reasoning);
    let items = u32::try_from(req.media_items).unwrap_or(u32::MAX);
    let per_item = config.prefill.per_image.saturating_mul(items);
    let megapixels = req.image_pixels as f64 / 1e6;
    let per_pixel =
        Duration::try_from_secs_f64(config.prefill.per_megapixel.as_secs_f64() * megapixels)
            .unwrap_or(MAX_MEDIA_PREFILL);
    let uncached = req
        .prompt_tokens
        .saturating_sub(req.cached_tokens.unwrap_or(0));
    let per_token = config
        .prefill
        .per_token
        .saturating_mul(u32::try_from(uncached).unwrap_or(u32::MAX))
        .min(MAX_MEDIA_PREFILL);
    config.ttft + thinking + per_token + per_item.saturating_add(per_pixel).min(MAX_MEDIA_PREFILL)
}

fn text(from: u64, count: u64) -> String {
    (from..from + count)
        .map(|i| format!(" {}", WORDS[i as usize % WORDS.len()]))
        .collect()
}

fn send(steps: &mut Vec<Step>, at: Duration, text: String) {
    steps.push(Step {
        at,
        action: Action::Send(Bytes::from(text)),
        token: false,
    });
}

/// The timeline of a streamed response with an optional fault.
pub fn stream_plan(
    req: &SimRequest,
    config: &SimConfig,
    fault: Option<Fault>,
    rng: &mut impl Rng,
) -> Vec<Step> {
    let steps = event_plan(req, config, fault, rng);
    if !super::framing::is_bedrock(req.dialect) {
        return steps;
    }
    steps
        .into_iter()
        .map(|step| match step.action {
            Action::Send(bytes) => Step {
                action: Action::Send(super::framing::framed(req.dialect, bytes)),
                ..step
            },
            Action::Reset => step,
        })
        .collect()
}

/// [`stream_plan`] before its framing: the dialect's events as SSE.
fn event_plan(
    req: &SimRequest,
    config: &SimConfig,
    fault: Option<Fault>,
    rng: &mut impl Rng,
) -> Vec<Step> {
    // A conversation's turn is answered as a tool-following model would; a structured
    // request by its schema, a few characters per token.
    let id_prefix = match req.dialect {
        Dialect::Anthropic => "toolu_",
        _ => "call_",
    };
    let turn = (req.conversation).reply(req.structure.as_ref(), id_prefix, req.max_tokens, fault);
    let structured = match turn {
        Some(Turn::Answer(answer)) => Some(answer),
        Some(Turn::Filler) => None,
        None => req
            .structure
            .as_ref()
            .map(|s| structured::answer(s, &req.prompt, req.max_tokens, fault)),
    };
    let n = match &structured {
        Some(a) => a.pieces().len().max(1) as u64,
        None => output_tokens(req, config),
    };
    // A greedy request is answered by the toy model, token by token.
    let top_k = req.logprobs.unwrap_or(0) as usize;
    let answer = match (&req.sampling, &structured) {
        (Some(s), None) => Some(config.model.sample(&req.prompt, s, n as usize, top_k, rng)),
        _ => (req.greedy && structured.is_none())
            .then(|| config.model.generate(&req.prompt, n as usize, top_k, rng)),
    };
    let calls = structured.as_ref().map_or(0, |a| a.heads().len() as u64);
    let mut uniform = || rng.random::<f64>();
    let mut jitter = |d: Duration| {
        if config.jitter > 0.0 {
            d.mul_f64((1.0 + config.jitter * (2.0 * uniform() - 1.0)).max(0.0))
        } else {
            d
        }
    };
    let usage = config.usage && req.include_usage;
    let ctx = Ctx {
        req: req.clone(),
        id: format!("sim-{:016x}", rand::random::<u64>()),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        usage,
        continuous: usage && config.continuous_usage && req.continuous_usage,
        hidden: u64::from(config.hidden_reasoning),
        reasoning: u64::from(config.reasoning),
        calls,
    };
    let r = render::renderer(req.dialect);
    let mut steps = Vec::new();
    let preamble = r.preamble(&ctx);
    let skip_role = req.dialect == Dialect::Chat && !config.role_chunk;
    if !skip_role {
        for event in preamble {
            send(&mut steps, Duration::ZERO, event);
        }
    }
    if fault == Some(Fault::Empty) {
        let t = jitter(first_token(req, config));
        send(&mut steps, t, r.chunk(&ctx, "", 0, Some("stop")));
        for event in r.epilogue(&ctx, 0) {
            send(&mut steps, t, event);
        }
        return steps;
    }
    let mut sizes = Vec::new();
    let mut planned = 0;
    while planned < n {
        let size = config
            .tokens_per_chunk
            .nth(sizes.len() as u64)
            .min(n - planned);
        sizes.push(size);
        planned += size;
    }
    let chunks = sizes.len() as u64;
    // Mid-stream faults strike before this chunk: at least one token has been sent.
    let strike_at = (chunks / 2).max(1);
    let mut t = jitter(first_token(req, config));
    if fault == Some(Fault::TtftStall) {
        t += config.stall;
    }
    let mut sent = 0;
    for j in 0..=chunks {
        if j == strike_at {
            match fault {
                Some(fault @ (Fault::ErrorEvent | Fault::OverloadedEvent)) => {
                    let event = match (fault, req.dialect) {
                        (Fault::ErrorEvent, Dialect::BedrockInvoke) => {
                            format!(
                                "event: exception/internalServerException\ndata: {}\n\n",
                                json!({"message": "simulated internal error"})
                            )
                        }
                        (Fault::ErrorEvent, _) => r.error(&ctx),
                        (_, Dialect::Gemini) => format!(
                            "data: {}\r\n\r\n",
                            json!({"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}})
                        ),
                        (_, Dialect::BedrockConverse | Dialect::BedrockInvoke) => {
                            format!(
                                "event: exception/serviceUnavailableException\ndata: {}\n\n",
                                json!({"message": "Bedrock is unable to process your request."})
                            )
                        }
                        (_, Dialect::Anthropic) => {
                            format!("event: error\ndata: {}\n\n", super::faults::OVERLOADED)
                        }
                        _ => format!("data: {}\n\n", super::faults::OVERLOADED),
                    };
                    send(&mut steps, t, event);
                    if matches!(
                        req.dialect,
                        Dialect::Completions | Dialect::Chat | Dialect::Audio
                    ) {
                        send(&mut steps, t, "data: [DONE]\n\n".into()); // as vLLM does
                    }
                    return steps;
                }
                Some(Fault::Reset) => {
                    steps.push(Step {
                        at: t,
                        action: Action::Reset,
                        token: false,
                    });
                    return steps;
                }
                Some(Fault::Stall) => t += config.stall,
                Some(Fault::ContentFilter) => {
                    for event in r.filtered(&ctx, sent) {
                        send(&mut steps, t, event);
                    }
                    return steps;
                }
                Some(Fault::MalformedJson) => send(&mut steps, t, render::MALFORMED.into()),
                // Bytes that are not what was framed: invalid UTF-8 in SSE, a CRC that
                // fails once framed in the AWS event stream.
                Some(Fault::CorruptFrame) => steps.push(Step {
                    at: t,
                    action: Action::Send(Bytes::from_static(b"data: \xff\n\n")),
                    token: false,
                }),
                _ => {}
            }
        }
        if j == chunks {
            break;
        }
        let size = sizes[j as usize];
        if j > 0 {
            t += jitter(config.itl * size as u32);
        }
        let last = j + 1 == chunks;
        let finish = (last && fault != Some(Fault::NoDone)).then_some(if n == req.max_tokens {
            "length"
        } else if calls > 0 {
            "tool_calls"
        } else {
            "stop"
        });
        sent += size;
        let piece = match (&answer, &structured) {
            (_, Some(Answer::Text(pieces))) => {
                let text = pieces[(sent - size) as usize..sent as usize].concat();
                r.chunk(&ctx, &text, sent, finish)
            }
            (_, Some(calls)) => tool_chunks(r, &ctx, calls, (sent - size) as usize, sent, finish),
            (None, None) if ctx.reasoning > sent - size => {
                // Reasoning first; the rest of the chunk (if any) is the answer's.
                let thought = ctx.reasoning.min(sent) - (sent - size);
                let rest = size - thought;
                let mut piece = r.reasoning_chunk(
                    &ctx,
                    &text(sent - size, thought),
                    sent - rest,
                    finish.filter(|_| rest == 0),
                );
                if rest > 0 {
                    piece += &r.chunk(&ctx, &text(sent - rest, rest), sent, finish);
                }
                piece
            }
            (answer, None) => match answer {
                Some(tokens) => {
                    let tokens = &tokens[(sent - size) as usize..sent as usize];
                    let text: String = tokens.iter().map(|t| t.text.as_str()).collect();
                    match req.logprobs {
                        Some(_) => r.chunk_logprobs(&ctx, &text, sent, finish, tokens),
                        None => r.chunk(&ctx, &text, sent, finish),
                    }
                }
                None => r.chunk(&ctx, &text(sent - size, size), sent, finish),
            },
        };
        steps.push(Step {
            at: t,
            action: Action::Send(Bytes::from(piece)),
            token: true,
        });
    }
    if fault != Some(Fault::NoDone) {
        for event in r.epilogue(&ctx, sent) {
            send(&mut steps, t, event);
        }
    }
    steps
}

/// The pieces `from..sent` of an answer's calls: a chunk of each call they belong to,
/// opening the calls that start in them, `finish` on the last.
fn tool_chunks(
    r: &dyn render::Render,
    ctx: &Ctx,
    answer: &Answer,
    from: usize,
    sent: u64,
    finish: Option<&str>,
) -> String {
    let runs = answer.runs(from, sent as usize);
    let last = runs.len().saturating_sub(1);
    let mut events = String::new();
    for (i, (index, open, range)) in runs.into_iter().enumerate() {
        let Some(head) = answer.heads().get(index) else {
            continue;
        };
        let call = CallRef {
            index,
            id: head.id.as_deref(),
            name: &head.name,
            open,
        };
        let text = answer.pieces()[range].concat();
        events += &r.tool_chunk(
            ctx,
            &call,
            &text,
            sent,
            (i == last).then_some(finish).flatten(),
        );
    }
    events
}

/// The writes of a streamed response, lazily: `endless` never ends and `drip` spreads the
/// normal response over one byte per interval.
pub fn stream_steps(
    req: &SimRequest,
    config: &SimConfig,
    fault: Option<Fault>,
    rng: &mut impl Rng,
) -> Box<dyn Iterator<Item = Step> + Send> {
    match fault {
        Some(Fault::Endless) => {
            let plan = stream_plan(req, config, None, rng);
            let preamble: Vec<Step> = plan.into_iter().take_while(|s| s.at.is_zero()).collect();
            let ctx = Ctx {
                req: req.clone(),
                id: "sim-endless".into(),
                created: 0,
                usage: false,
                continuous: false,
                hidden: 0,
                reasoning: 0,
                calls: 0,
            };
            let r = render::renderer(req.dialect);
            let (ttft, itl) = (first_token(req, config), config.itl);
            let tokens = (0u64..).map(move |i| Step {
                at: ttft + itl * i as u32,
                action: Action::Send(super::framing::framed(
                    ctx.req.dialect,
                    Bytes::from(r.chunk(&ctx, &text(i, 1), i + 1, None)),
                )),
                token: true,
            });
            Box::new(preamble.into_iter().chain(tokens))
        }
        Some(Fault::Drip) => {
            let bytes: Vec<u8> = stream_plan(req, config, None, rng)
                .into_iter()
                .filter_map(|s| match s.action {
                    Action::Send(bytes) => Some(bytes),
                    Action::Reset => None,
                })
                .flat_map(|b| b.to_vec())
                .collect();
            let (ttft, drip) = (first_token(req, config), config.drip_interval);
            Box::new(bytes.into_iter().enumerate().map(move |(i, byte)| Step {
                at: ttft + drip * i as u32,
                action: Action::Send(Bytes::copy_from_slice(&[byte])),
                token: false,
            }))
        }
        _ => Box::new(stream_plan(req, config, fault, rng).into_iter()),
    }
}

/// A non-streamed response: its delay and JSON body (completions, chat, embeddings).
pub fn whole_response(req: &SimRequest, config: &SimConfig) -> (Duration, Value) {
    let n = output_tokens(req, config);
    let mut usage = json!({ "prompt_tokens": req.prompt_tokens, "completion_tokens": n, "total_tokens": req.prompt_tokens + n });
    if let Some(cached) = req.reported_cached {
        usage["prompt_tokens_details"] = json!({ "cached_tokens": cached });
    }
    if req.dialect == Dialect::Embeddings {
        let dims = config.embedding_dimensions as usize;
        let vector: Vec<f64> = (0..dims).map(|i| ((i as f64) * 0.37).sin()).collect();
        let usage =
            json!({ "prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens });
        let body = json!({
            "object": "list", "model": req.model, "usage": usage,
            "data": [{ "object": "embedding", "index": 0, "embedding": vector }],
        });
        return (first_token(req, config), body);
    }
    let top_k = req.logprobs.unwrap_or(0) as usize;
    let answer = match &req.sampling {
        Some(s) => Some(
            config
                .model
                .sample(&req.prompt, s, n as usize, top_k, &mut rand::rng()),
        ),
        None => req.greedy.then(|| {
            config
                .model
                .generate(&req.prompt, n as usize, top_k, &mut rand::rng())
        }),
    };
    let content = match &answer {
        Some(tokens) => tokens.iter().map(|t| t.text.as_str()).collect(),
        None => text(0, n),
    };
    let finish = if n == req.max_tokens {
        "length"
    } else {
        "stop"
    };
    let chat = req.dialect == Dialect::Chat;
    let logprobs = match (&answer, req.logprobs) {
        (Some(tokens), Some(_)) => render::logprobs_json(chat, tokens),
        _ => Value::Null,
    };
    let choice = if chat {
        json!({ "index": 0, "message": { "role": "assistant", "content": content }, "logprobs": logprobs, "finish_reason": finish })
    } else {
        json!({ "index": 0, "text": content, "logprobs": logprobs, "finish_reason": finish })
    };
    let body = json!({
        "id": "sim-nonstream",
        "object": if req.dialect == Dialect::Chat { "chat.completion" } else { "text_completion" },
        "model": req.model,
        "choices": [choice],
        "usage": usage,
    });
    let delay = first_token(req, config) + config.itl * (n.saturating_sub(1) as u32);
    (delay, body)
}

#[cfg(test)]
mod tests;
