//! How a sampler check's request asks for its settings, per API and server: the settings
//! sent over any the target sets, every other sampler the server has set neutral (a
//! server's defaults, such as vLLM's `generation_config.json` or llama-server's
//! `--top-k 40`, apply to whatever a request leaves out), and the logprobs read.

use serde_json::{Map, Value};

use crate::endpoint::BackendKind;
use crate::prompt::sampled::{Sampled, Server};

/// What a workload or a target may have set that changes what is sampled.
const SAMPLING_KEYS: &[&str] = &[
    "ignore_eos",
    "min_tokens",
    "n",
    "best_of",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "repeat_penalty",
    "logit_bias",
    "stop",
    "seed",
    "logprobs",
    "top_logprobs",
    // Masks and biases a target's `extra_body` may carry, which vLLM applies after it
    // takes raw logprobs: the list would no longer be what was drawn from.
    "allowed_token_ids",
    "bad_words",
    "stop_token_ids",
    "structured_outputs",
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "response_format",
    "grammar",
    "json_schema",
    "logits_processors",
    "samplers",
    "dynatemp_range",
    "dynatemp_exponent",
    "adaptive_target",
    "adaptive_decay",
    "min_keep",
    "n_probs",
];

/// llama.cpp's chain as the check judges it: a server's `--samplers` may add others
/// (adaptive-p, XTC, DRY) or reorder these, and the request's list replaces it.
const LLAMA_CHAIN: [&str; 4] = ["top_k", "top_p", "min_p", "temperature"];

/// Spell `s` in a built request body of `backend`.
pub fn apply(backend: BackendKind, body: &mut Map<String, Value>, s: &Sampled) {
    for key in SAMPLING_KEYS {
        body.remove(*key);
    }
    let p = &s.params;
    body.insert("temperature".into(), Value::from(p.temperature));
    if let Some(seed) = s.seed {
        body.insert("seed".into(), Value::from(seed));
    }
    match backend {
        BackendKind::OpenAi | BackendKind::OpenAiChat => {}
        BackendKind::Tgi => {
            body.remove("temperature");
            if let Some(Value::Object(parameters)) = body.get_mut("parameters") {
                for key in [
                    "temperature",
                    "top_p",
                    "top_k",
                    "typical_p",
                    "seed",
                    "repetition_penalty",
                ] {
                    parameters.remove(key);
                }
                parameters.insert("do_sample".into(), Value::Bool(true));
                parameters.insert("temperature".into(), Value::from(p.temperature));
            }
            return;
        }
        BackendKind::TensorRtLlm => {
            // top_k 0 with top_p 0 is the ensemble's greedy: a top-p of 1 samples.
            body.remove("min_length");
            body.insert("top_p".into(), Value::from(1.0));
            body.insert("top_k".into(), Value::from(0));
            return;
        }
        _ => return,
    }
    let chat = backend == BackendKind::OpenAiChat;
    let top_k_off = match s.server {
        // vLLM: "0 (or -1) to consider all tokens"; -1 also on versions before 0.8.
        Server::Vllm | Server::VllmProcessed => -1,
        _ => 0,
    };
    let neutral: &[(&str, Value)] = match s.server {
        Server::Vllm | Server::VllmProcessed => &[
            ("repetition_penalty", Value::from(1.0)),
            ("presence_penalty", Value::from(0.0)),
            ("frequency_penalty", Value::from(0.0)),
        ],
        Server::LlamaCpp => &[
            ("repeat_penalty", Value::from(1.0)),
            ("presence_penalty", Value::from(0.0)),
            ("frequency_penalty", Value::from(0.0)),
            ("typical_p", Value::from(1.0)),
            ("xtc_probability", Value::from(0.0)),
            ("dry_multiplier", Value::from(0.0)),
            ("top_n_sigma", Value::from(-1.0)),
            ("mirostat", Value::from(0)),
            // A server's `--dynatemp-range` turns temperature into a range, and
            // `--adaptive-target` reshapes the distribution: both off.
            ("dynatemp_range", Value::from(0.0)),
            ("adaptive_target", Value::from(-1.0)),
            ("min_keep", Value::from(0)),
            ("samplers", Value::from(LLAMA_CHAIN.to_vec())),
            ("post_sampling_probs", Value::Bool(true)),
        ],
        // Strict APIs refuse fields they do not know: temperature alone.
        Server::Auto | Server::Unknown => return,
    };
    for (key, value) in neutral {
        body.insert((*key).into(), value.clone());
    }
    body.insert("top_p".into(), Value::from(p.top_p));
    let top_k = match p.top_k {
        0 => Value::from(top_k_off),
        k => Value::from(k),
    };
    body.insert("top_k".into(), top_k);
    body.insert("min_p".into(), Value::from(p.min_p));
    super::openai_wire::ask_logprobs(body, s.top_logprobs, chat);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::sampled::Params;
    use serde_json::json;

    fn body() -> Map<String, Value> {
        let v = json!({"model": "m", "temperature": 0.0, "top_k": 1, "seed": 3, "stop": ["x"],
            "ignore_eos": true, "repetition_penalty": 1.3});
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn each_server_gets_its_settings_and_its_other_samplers_neutral() {
        let params = Params {
            temperature: 0.7,
            top_k: 0,
            top_p: 0.8,
            min_p: 0.05,
        };
        let mut b = body();
        let s = Sampled {
            params,
            top_logprobs: 20,
            server: Server::Vllm,
            seed: None,
        };
        apply(BackendKind::OpenAiChat, &mut b, &s);
        assert_eq!(
            Value::Object(b),
            json!({"model": "m", "temperature": 0.7, "top_p": 0.8, "top_k": -1, "min_p": 0.05,
                "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
                "logprobs": true, "top_logprobs": 20})
        );
        let mut b = body();
        let s = Sampled {
            server: Server::LlamaCpp,
            ..s
        };
        apply(BackendKind::OpenAi, &mut b, &s);
        assert_eq!(b["top_k"], json!(0));
        assert_eq!(b["logprobs"], json!(20));
        assert_eq!(b["post_sampling_probs"], json!(true));
        assert_eq!(b["repeat_penalty"], json!(1.0));
        assert!(!b.contains_key("repetition_penalty"));
        // A seeded pair's request carries its seed.
        let mut b = body();
        apply(
            BackendKind::OpenAiChat,
            &mut b,
            &Sampled { seed: Some(7), ..s },
        );
        assert_eq!(b["seed"], json!(7));
        // Not established: temperature alone, nothing a strict API would refuse.
        let mut b = body();
        let s = Sampled {
            server: Server::Unknown,
            top_logprobs: 0,
            ..s
        };
        apply(BackendKind::OpenAiChat, &mut b, &s);
        assert_eq!(Value::Object(b), json!({"model": "m", "temperature": 0.7}));
        let mut b = json!({"inputs": "x", "parameters": {"do_sample": false, "top_k": 1}})
            .as_object()
            .cloned()
            .unwrap();
        apply(BackendKind::Tgi, &mut b, &s);
        assert_eq!(
            Value::Object(b),
            json!({"inputs": "x", "parameters": {"do_sample": true, "temperature": 0.7}})
        );
    }
}
