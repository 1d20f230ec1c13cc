//! LoRA adapters on the simulator's toy model, as vLLM serves them (`--enable-lora`): each
//! adapter listed in `GET /v1/models` with `parent` = the base model and `root` = its
//! path, asked for by name in a request's `model`, its answers the toy model's with
//! weights of its own (a pure function of its path, so two replicas loading one path
//! answer alike, and a new version at another path answers differently). Adapters are
//! loaded and unloaded at run time through vLLM's `POST /v1/load_lora_adapter` and
//! `/v1/unload_lora_adapter`.
//!
//! With `--served-model-name` (or any adapter) a request for a model that is neither the
//! base nor a loaded adapter gets vLLM's 404; without, any name is the base (as before).
//!
//! The faults the adapter check must see (`--lora-fault NAME=FAULT`, or `"fault"` in a
//! load request's body):
//! - `base-served`: listed, accepted, and answered by the base model (vllm#55193);
//! - `corrupts-base`: while loaded, the base model's own answers are corrupted (vllm#42008);
//! - `not-found`: listed, but a request for it gets a 404 (a controller that says loaded).

use std::collections::BTreeMap;
use std::sync::Mutex;

use http::StatusCode;
use serde_json::{Value, json};

use super::model::{hash, mix};

/// The base model's name in `/v1/models` when none is set.
pub const DEFAULT_BASE: &str = "sim";

/// The share of sure tokens a `corrupts-base` adapter corrupts in the base's answers.
const CORRUPTION: f64 = 0.5;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AdapterFault {
    BaseServed,
    CorruptsBase,
    NotFound,
}

/// `--lora`, `--lora-fault`, `--served-model-name`.
#[derive(Clone, Debug, Default, PartialEq, clap::Args)]
pub struct LoraFlags {
    /// A LoRA adapter loaded at start, `NAME` or `NAME=PATH` (vLLM's `--lora-modules`);
    /// its weights follow from its path (default `/adapters/NAME`). Repeatable.
    #[arg(long = "lora", value_name = "NAME[=PATH]", value_parser = parse_lora)]
    pub adapters: Vec<(String, String)>,
    /// A fault of one adapter, `NAME=base-served|corrupts-base|not-found`. Repeatable.
    #[arg(long = "lora-fault", value_name = "NAME=FAULT", value_parser = parse_lora_fault)]
    pub lora_faults: Vec<(String, AdapterFault)>,
    /// The base model's name: `/v1/models` lists it, and a request for a name that is
    /// neither it nor a loaded adapter gets a 404 (without it: `sim`, and any name is
    /// the base while no adapter is loaded).
    #[arg(long = "served-model-name", value_name = "NAME")]
    pub served_model_name: Option<String>,
}

fn parse_lora(spec: &str) -> Result<(String, String), String> {
    let (name, path) = match spec.split_once('=') {
        Some((name, path)) => (name.trim(), path.trim().to_owned()),
        None => (spec.trim(), format!("/adapters/{}", spec.trim())),
    };
    if name.is_empty() || path.is_empty() {
        return Err(format!("`{spec}`: expected NAME or NAME=PATH"));
    }
    Ok((name.to_owned(), path))
}

fn parse_lora_fault(spec: &str) -> Result<(String, AdapterFault), String> {
    use clap::ValueEnum;
    let (name, fault) = spec
        .split_once('=')
        .ok_or_else(|| format!("`{spec}`: expected NAME=FAULT, e.g. a=base-served"))?;
    let fault = AdapterFault::from_str(fault.trim(), true)
        .map_err(|_| format!("`{spec}`: the fault is base-served, corrupts-base or not-found"))?;
    Ok((name.trim().to_owned(), fault))
}

#[derive(Clone, Debug)]
struct Adapter {
    path: String,
    fault: Option<AdapterFault>,
}

/// Who answers a request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Answerer {
    /// The base model; `corrupted`: a loaded adapter corrupts it.
    Base { corrupted: bool },
    /// An adapter, with its weights' seed.
    Adapter(u64),
    /// No such model: vLLM's 404.
    NotFound,
}

impl Answerer {
    /// The toy model that answers, from the base's flags.
    pub fn model(self, base: &super::model::ModelFlags) -> super::model::ModelFlags {
        let mut model = base.clone();
        match self {
            Self::Base { corrupted: true } => model.corrupt_rate = CORRUPTION,
            Self::Adapter(seed) => model.weights_seed = mix(base.weights_seed ^ seed),
            Self::Base { .. } | Self::NotFound => {}
        }
        model
    }
}

/// The adapters loaded now.
#[derive(Debug)]
pub struct Adapters {
    base: String,
    strict: bool,
    loaded: Mutex<BTreeMap<String, Adapter>>,
}

impl Adapters {
    pub fn new(flags: &LoraFlags) -> Self {
        let fault = |name: &str| {
            flags
                .lora_faults
                .iter()
                .find(|(n, _)| n == name)
                .map(|&(_, f)| f)
        };
        let loaded = flags
            .adapters
            .iter()
            .map(|(name, path)| {
                let adapter = Adapter {
                    path: path.clone(),
                    fault: fault(name),
                };
                (name.clone(), adapter)
            })
            .collect();
        Self {
            base: flags
                .served_model_name
                .clone()
                .unwrap_or_else(|| DEFAULT_BASE.to_owned()),
            strict: flags.served_model_name.is_some(),
            loaded: Mutex::new(loaded),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Adapter>> {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// Who answers a request for `model`.
    pub fn resolve(&self, model: &str) -> Answerer {
        let loaded = self.lock();
        let corrupted = loaded
            .values()
            .any(|a| a.fault == Some(AdapterFault::CorruptsBase));
        match loaded.get(model) {
            Some(a) if a.fault == Some(AdapterFault::NotFound) => Answerer::NotFound,
            Some(a) if a.fault == Some(AdapterFault::BaseServed) => Answerer::Base { corrupted },
            Some(a) => Answerer::Adapter(hash(0, a.path.as_bytes())),
            None if model == self.base || (!self.strict && loaded.is_empty()) => {
                Answerer::Base { corrupted }
            }
            None => Answerer::NotFound,
        }
    }

    /// The adapters' entries of `GET /v1/models`, as vLLM lists them.
    pub fn listing(&self) -> Vec<Value> {
        self.lock()
            .iter()
            .map(|(name, a)| {
                json!({"id": name, "object": "model", "owned_by": "vllm", "root": a.path,
                       "parent": self.base, "max_model_len": null})
            })
            .collect()
    }

    /// `POST /v1/load_lora_adapter {"lora_name", "lora_path"}` (and the simulator's own
    /// `"fault"`), answered as vLLM answers.
    pub fn load(&self, body: &[u8]) -> (StatusCode, String) {
        let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let field = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or("").trim();
        let (name, path) = (field("lora_name"), field("lora_path"));
        if name.is_empty() || path.is_empty() {
            return (
                StatusCode::BAD_REQUEST,
                "Both 'lora_name' and 'lora_path' must be provided.".into(),
            );
        }
        let fault = match field("fault") {
            "" => None,
            f => match parse_lora_fault(&format!("{name}={f}")) {
                Ok((_, f)) => Some(f),
                Err(e) => return (StatusCode::BAD_REQUEST, e),
            },
        };
        let mut loaded = self.lock();
        if loaded.contains_key(name) {
            return (
                StatusCode::BAD_REQUEST,
                format!("The lora adapter '{name}' has already been loaded."),
            );
        }
        let adapter = Adapter {
            path: path.to_owned(),
            fault,
        };
        loaded.insert(name.to_owned(), adapter);
        (
            StatusCode::OK,
            format!("Success: LoRA adapter '{name}' added successfully."),
        )
    }

    /// `POST /v1/unload_lora_adapter {"lora_name"}`.
    pub fn unload(&self, body: &[u8]) -> (StatusCode, String) {
        let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let name = body.get("lora_name").and_then(Value::as_str).unwrap_or("");
        match self.lock().remove(name) {
            Some(_) => (
                StatusCode::OK,
                format!("Success: LoRA adapter '{name}' removed successfully."),
            ),
            None => (
                StatusCode::NOT_FOUND,
                format!("The lora adapter '{name}' cannot be found."),
            ),
        }
    }
}

/// vLLM's 404 for a model it does not serve.
pub fn not_found_message(model: &str) -> String {
    format!("The model `{model}` does not exist.")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(adapters: &[&str], faults: &[&str], name: Option<&str>) -> LoraFlags {
        LoraFlags {
            adapters: adapters.iter().map(|s| parse_lora(s).unwrap()).collect(),
            lora_faults: faults
                .iter()
                .map(|s| parse_lora_fault(s).unwrap())
                .collect(),
            served_model_name: name.map(str::to_owned),
        }
    }

    #[test]
    fn adapters_answer_with_their_own_weights_and_faults_as_configured() {
        let a = Adapters::new(&flags(&["a", "b=/x/b", "c"], &["b=base-served"], None));
        let Answerer::Adapter(seed) = a.resolve("a") else {
            panic!("a is an adapter")
        };
        assert_eq!(a.resolve("a"), Answerer::Adapter(seed), "a pure function");
        assert_eq!(a.resolve("b"), Answerer::Base { corrupted: false });
        assert_ne!(a.resolve("c"), Answerer::Adapter(seed));
        // With adapters loaded, an unknown name is vLLM's 404; the base answers.
        assert_eq!(a.resolve("nope"), Answerer::NotFound);
        assert_eq!(a.resolve("sim"), Answerer::Base { corrupted: false });
        let listed = a.listing();
        assert_eq!(listed.len(), 3);
        assert_eq!(listed[1]["root"], "/x/b");
        assert_eq!(listed[1]["parent"], "sim");
    }

    #[test]
    fn load_and_unload_at_run_time_as_vllm_answers() {
        let a = Adapters::new(&flags(&[], &[], Some("base")));
        assert_eq!(a.resolve("m"), Answerer::NotFound, "strict: another name");
        let (status, _) =
            a.load(br#"{"lora_name": "x", "lora_path": "/p/x", "fault": "corrupts-base"}"#);
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            a.load(br#"{"lora_name": "x", "lora_path": "/p"}"#).0,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(a.load(b"not json").0, StatusCode::BAD_REQUEST);
        assert_eq!(a.resolve("base"), Answerer::Base { corrupted: true });
        assert!(matches!(a.resolve("x"), Answerer::Adapter(_)));
        assert_eq!(a.unload(br#"{"lora_name": "x"}"#).0, StatusCode::OK);
        assert_eq!(a.unload(br#"{"lora_name": "x"}"#).0, StatusCode::NOT_FOUND);
        assert_eq!(a.resolve("x"), Answerer::NotFound);
        assert_eq!(a.resolve("base"), Answerer::Base { corrupted: false });
        // Without a served name and no adapter, any name is the base (the old behaviour).
        let open = Adapters::new(&LoraFlags::default());
        assert_eq!(
            open.resolve("anything"),
            Answerer::Base { corrupted: false }
        );
    }
}
