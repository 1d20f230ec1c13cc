//! A client of the simulator's three chat dialects for tests/sim_session.rs: a session
//! that sends its whole history every turn, spelt as the session check spells it, and
//! reads each streamed answer's text, tool calls and usage.

use std::collections::BTreeMap;

use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Api {
    Chat,
    Anthropic,
    Responses,
}

pub const APIS: [Api; 3] = [Api::Chat, Api::Anthropic, Api::Responses];
pub const SYSTEM: &str = "You are a support agent. Look orders up with get_order_status.";

#[derive(Clone, Debug, Default)]
pub struct Call {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Clone, Debug)]
pub enum Message {
    User(String),
    Assistant(String, Vec<Call>),
    Results(Vec<(String, String)>),
}

/// One turn's answer, as a client reads it.
#[derive(Debug, Default)]
pub struct Reply {
    pub status: u16,
    pub served_by: Option<String>,
    pub body: String,
    pub text: String,
    pub calls: Vec<Call>,
    pub prompt_tokens: u64,
    pub cached: u64,
}

/// The tracking code the tool returns for an order: fixed per id.
pub fn code(order: &str) -> String {
    let hash = order.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("TRK-{hash:08X}")
}

pub fn result(call: &Call) -> String {
    let arguments: Value = serde_json::from_str(&call.arguments).unwrap();
    let order = arguments["order_id"].as_str().unwrap();
    json!({"order_id": order, "status": "shipped", "tracking_code": code(order)}).to_string()
}

pub struct Session {
    pub api: Api,
    pub url: String,
    pub history: Vec<Message>,
    pub headers: Vec<(&'static str, String)>,
}

impl Session {
    pub fn new(api: Api, url: &str) -> Self {
        Self {
            api,
            url: url.to_owned(),
            history: Vec::new(),
            headers: Vec::new(),
        }
    }

    fn body(&self) -> (String, Value) {
        let parameters = json!({"type": "object", "properties": {"order_id": {"type": "string"}},
                                "required": ["order_id"]});
        let tool = json!({"name": "get_order_status", "description": "An order's status"});
        match self.api {
            Api::Chat => {
                let mut messages = vec![json!({"role": "system", "content": SYSTEM})];
                for message in &self.history {
                    match message {
                        Message::User(text) => messages.push(json!({"role": "user", "content": text})),
                        Message::Assistant(text, calls) if calls.is_empty() => {
                            messages.push(json!({"role": "assistant", "content": text}))
                        }
                        Message::Assistant(_, calls) => {
                            let calls: Vec<Value> = calls.iter().map(|c| json!({"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments}})).collect();
                            messages.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
                        }
                        Message::Results(results) => messages.extend(results.iter().map(|(id, content)| {
                            json!({"role": "tool", "tool_call_id": id, "content": content})
                        })),
                    }
                }
                let mut function = tool;
                function["parameters"] = parameters;
                let body = json!({"model": "m", "stream": true, "max_tokens": 64,
                    "stream_options": {"include_usage": true}, "messages": messages,
                    "tools": [{"type": "function", "function": function}], "tool_choice": "auto"});
                ("/v1/chat/completions".into(), body)
            }
            Api::Anthropic => {
                let mut messages: Vec<Value> = self
                    .history
                    .iter()
                    .map(|message| match message {
                        Message::User(text) => {
                            json!({"role": "user", "content": [{"type": "text", "text": text}]})
                        }
                        Message::Assistant(text, calls) => {
                            let mut blocks = Vec::new();
                            if !text.is_empty() {
                                blocks.push(json!({"type": "text", "text": text}));
                            }
                            blocks.extend(calls.iter().map(|c| {
                                json!({"type": "tool_use", "id": c.id, "name": c.name,
                            "input": serde_json::from_str::<Value>(&c.arguments).unwrap()})
                            }));
                            json!({"role": "assistant", "content": blocks})
                        }
                        Message::Results(results) => {
                            let blocks: Vec<Value> = results
                                .iter()
                                .map(|(id, content)| {
                                    json!({"type": "tool_result",
                            "tool_use_id": id, "content": content})
                                })
                                .collect();
                            json!({"role": "user", "content": blocks})
                        }
                    })
                    .collect();
                // The incremental pattern: a breakpoint on the last block of the last message.
                let last = messages.last_mut().unwrap()["content"]
                    .as_array_mut()
                    .unwrap();
                last.last_mut().unwrap()["cache_control"] = json!({"type": "ephemeral"});
                let mut tool = tool;
                tool["input_schema"] = parameters;
                let body = json!({"model": "m", "stream": true, "max_tokens": 64, "system": SYSTEM,
                    "messages": messages, "tools": [tool], "tool_choice": {"type": "auto"}});
                ("/v1/messages".into(), body)
            }
            Api::Responses => {
                let mut input = Vec::new();
                for message in &self.history {
                    match message {
                        Message::User(text) => input.push(json!({"role": "user", "content": text})),
                        Message::Assistant(text, calls) => {
                            if !text.is_empty() {
                                input.push(json!({"role": "assistant", "content": text}));
                            }
                            input.extend(calls.iter().map(|c| json!({"type": "function_call", "call_id": c.id,
                                "name": c.name, "arguments": c.arguments})));
                        }
                        Message::Results(results) => input.extend(results.iter().map(|(id, output)| {
                            json!({"type": "function_call_output", "call_id": id, "output": output})
                        })),
                    }
                }
                let mut tool = tool;
                tool["type"] = json!("function");
                tool["parameters"] = parameters;
                let body = json!({"model": "m", "stream": true, "max_output_tokens": 64,
                    "instructions": SYSTEM, "input": input, "tools": [tool], "tool_choice": "auto"});
                ("/v1/responses".into(), body)
            }
        }
    }

    /// Send the history (after `user`'s message, if any); the answer joins it on success.
    pub async fn turn(&mut self, user: Option<&str>) -> Reply {
        if let Some(text) = user {
            self.history.push(Message::User(text.into()));
        }
        let (path, body) = self.body();
        let mut request = reqwest::Client::new()
            .post(format!("{}{path}", self.url))
            .json(&body);
        for (name, value) in &self.headers {
            request = request.header(*name, value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let served_by = response
            .headers()
            .get("x-served-by")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        let mut reply = match status {
            200 => parse(self.api, &text),
            _ => Reply::default(),
        };
        (reply.status, reply.served_by, reply.body) = (status, served_by, text);
        if status == 200 {
            self.history
                .push(Message::Assistant(reply.text.clone(), reply.calls.clone()));
        }
        reply
    }

    /// Run the calls of `reply` and send their results.
    pub async fn results(&mut self, reply: &Reply) -> Reply {
        let results = reply
            .calls
            .iter()
            .map(|c| (c.id.clone(), result(c)))
            .collect();
        self.history.push(Message::Results(results));
        self.turn(None).await
    }
}

/// The SSE `data:` payloads of a stream, as JSON.
fn events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|event| event.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

fn parse(api: Api, body: &str) -> Reply {
    let mut reply = Reply::default();
    let mut calls: BTreeMap<u64, Call> = BTreeMap::new();
    let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
    for e in events(body) {
        match api {
            Api::Chat => {
                if let Some(usage) = e.get("usage").filter(|u| !u.is_null()) {
                    reply.prompt_tokens = usage["prompt_tokens"].as_u64().unwrap();
                    reply.cached = usage["prompt_tokens_details"]["cached_tokens"]
                        .as_u64()
                        .unwrap_or(0);
                }
                let Some(delta) = e["choices"].get(0).map(|c| &c["delta"]) else {
                    continue;
                };
                reply.text += &s(&delta["content"]);
                for d in delta["tool_calls"].as_array().into_iter().flatten() {
                    let call = calls.entry(d["index"].as_u64().unwrap()).or_default();
                    call.id += &s(&d["id"]);
                    call.name += &s(&d["function"]["name"]);
                    call.arguments += &s(&d["function"]["arguments"]);
                }
            }
            Api::Anthropic => match e["type"].as_str().unwrap() {
                "message_start" => {
                    let usage = &e["message"]["usage"];
                    let n = |k: &str| usage[k].as_u64().unwrap_or(0);
                    reply.cached = n("cache_read_input_tokens");
                    reply.prompt_tokens =
                        n("input_tokens") + reply.cached + n("cache_creation_input_tokens");
                }
                "content_block_start" if e["content_block"]["type"] == "tool_use" => {
                    let call = calls.entry(e["index"].as_u64().unwrap()).or_default();
                    (call.id, call.name) =
                        (s(&e["content_block"]["id"]), s(&e["content_block"]["name"]));
                }
                "content_block_delta" => {
                    reply.text += &s(&e["delta"]["text"]);
                    if e["delta"]["type"] == "input_json_delta" {
                        calls
                            .entry(e["index"].as_u64().unwrap())
                            .or_default()
                            .arguments += &s(&e["delta"]["partial_json"]);
                    }
                }
                _ => {}
            },
            Api::Responses => match e["type"].as_str().unwrap() {
                "response.output_text.delta" => reply.text += &s(&e["delta"]),
                "response.output_item.added" if e["item"]["type"] == "function_call" => {
                    let call = calls
                        .entry(e["output_index"].as_u64().unwrap())
                        .or_default();
                    (call.id, call.name) = (s(&e["item"]["call_id"]), s(&e["item"]["name"]));
                }
                "response.function_call_arguments.delta" => {
                    calls
                        .entry(e["output_index"].as_u64().unwrap())
                        .or_default()
                        .arguments += &s(&e["delta"]);
                }
                "response.completed" | "response.incomplete" => {
                    let usage = &e["response"]["usage"];
                    reply.prompt_tokens = usage["input_tokens"].as_u64().unwrap();
                    reply.cached = usage["input_tokens_details"]["cached_tokens"]
                        .as_u64()
                        .unwrap_or(0);
                }
                _ => {}
            },
        }
    }
    reply.calls = calls.into_values().collect();
    reply
}
