//! The adapter check's fixtures: simulators serving LoRA adapters as vLLM does, a file_sd
//! pool of them checked by the adapter check, and counts of its checks.

use std::path::Path;
use std::time::Duration;

use inferprobe::sim::SimConfig;
use inferprobe::sim::adapters::{AdapterFault, LoraFlags};

use super::{Scrape, Sim};

pub fn sim(adapters: &[&str], faults: &[(&str, AdapterFault)]) -> SimConfig {
    let lora = LoraFlags {
        adapters: adapters
            .iter()
            .map(|a| ((*a).to_owned(), format!("/adapters/{a}")))
            .collect(),
        lora_faults: faults.iter().map(|(a, f)| ((*a).to_owned(), *f)).collect(),
        served_model_name: Some("m".into()),
    };
    SimConfig {
        ttft: Duration::from_millis(2),
        itl: Duration::from_micros(200),
        lora: Box::new(lora),
        ..SimConfig::default()
    }
}

/// A file_sd block `pool` checked by the adapter check with `adapters`' settings.
pub fn pool_config(file: &Path, adapters: &str) -> String {
    format!(
        r#"
        [[discovery]]
        name = "pool"
        source = "file"
        path = "{}"
        refresh = "100ms"
        [discovery.template]
        backend = "openai-chat"
        rate = 1e-6
        adapters = {{ {adapters} }}
        "#,
        file.display()
    )
}

/// One target `lone` (model `m`, the completions API) at `url`, checked by the adapter
/// check with `adapters`' settings.
pub fn lone_config(url: &str, adapters: &str) -> String {
    format!(
        r#"
        [[targets]]
        name = "lone"
        url = "{url}"
        model = "m"
        backend = "openai"
        rate = 1e-6
        adapters = {{ {adapters} }}
        "#
    )
}

/// The golden file `canary record --adapters` writes at `path` from the chat endpoint at
/// `url` (16 tokens), and what it holds.
pub async fn record(url: &str, path: &Path) -> inferprobe::endpoint::canary::Golden {
    use inferprobe::canary::record::{RecordArgs, write};
    let args = RecordArgs {
        backend: Some("openai-chat".into()),
        url: Some(url.to_owned()),
        model: Some("m".into()),
        max_tokens: Some(16),
        adapters: true,
        out: path.to_owned(),
        ..RecordArgs::default()
    };
    let golden = inferprobe::adapters::record_golden(&args).await.unwrap();
    write(&golden, path).unwrap();
    golden
}

/// A file_sd file naming each simulator as a pod `r<i>` of model `m`.
pub fn pool_file(dir: &Path, sims: &[&Sim]) -> std::path::PathBuf {
    let addresses: Vec<String> = sims.iter().map(|s| s.addr.to_string()).collect();
    let model: &[(&str, &str)] = &[("model", "m")];
    let members: Vec<_> = addresses.iter().map(|a| (a.as_str(), model)).collect();
    super::pool_file(dir, &members)
}

/// An adapter's checks on a pod with `result`.
pub fn checks(s: &Scrape, pod: &str, adapter: &str, result: &str) -> f64 {
    let labels = [("pod", pod), ("adapter", adapter), ("result", result)];
    s.sum("inferprobe_adapter_checks_total", &labels)
}

/// The base model's checks on a pod with `result`.
pub fn base(s: &Scrape, pod: &str, result: &str) -> f64 {
    let labels = [("pod", pod), ("result", result)];
    s.sum("inferprobe_adapter_base_checks_total", &labels)
}

/// The results the alerts count against an adapter.
pub const BAD: [&str; 5] = ["base_served", "diverged", "missing", "not_found", "failed"];

/// POST `body` to the simulator's `path` (loading and unloading adapters).
pub async fn post(url: &str, path: &str, body: serde_json::Value) -> reqwest::StatusCode {
    let response = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    response.status()
}
