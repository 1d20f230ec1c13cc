//! The adapter check (issue 58) against real llama-servers serving the tiny model with
//! random LoRA adapters (scripts/real-server/make_tiny_lora.py): three replicas list the
//! same two adapter files, one replica's `tiny-lora-a.gguf` changing nothing (an adapter
//! whose weights are not applied, vllm#55193's symptom). Ignored by `cargo test`;
//! scripts/real-server/test.sh runs it (.ci/run does).

use crate::common;

use std::time::Duration;

use common::{Scrape, llama, start_daemon};

fn checks(s: &Scrape, pod: &str, adapter: &str, result: &str) -> f64 {
    let labels = [("pod", pod), ("adapter", adapter), ("result", result)];
    s.sum("inferprobe_adapter_checks_total", &labels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs llama-server and the tiny adapters: scripts/real-server/test.sh"]
async fn a_llama_server_adapter_that_changes_nothing_reads_base_served_on_its_replica() {
    let model = llama::tiny();
    let dir = model.parent().unwrap().to_path_buf();
    let loras = ["--lora", "tiny-lora-a.gguf", "--lora", "tiny-lora-b.gguf"];
    let r0 = llama::start_in(Some(&dir), &model, 512, &loras).await;
    let r1 = llama::start_in(Some(&dir), &model, 512, &loras).await;
    let r2 = llama::start_in(Some(&dir.join("noop")), &model, 512, &loras).await;
    let tmp = tempfile::tempdir().unwrap();
    let tiny: &[(&str, &str)] = &[("model", "tiny")];
    let file = common::pool_file(
        tmp.path(),
        &[(&r0.url, tiny), (&r1.url, tiny), (&r2.url, tiny)],
    );
    // A random-weight model is rarely sure of its next token: the canary suites' margin.
    let config = common::adapters::pool_config(&file, r#"interval = "100ms", margin = 0.05"#);
    let daemon = start_daemon(&config).await;
    let (a, b) = ("tiny-lora-a", "tiny-lora-b");
    let s = daemon
        .wait_for(Duration::from_secs(120), |s| {
            checks(s, "r2", a, "base_served") >= 5.0
                && ["r0", "r1"]
                    .iter()
                    .all(|pod| checks(s, pod, a, "applied") >= 5.0)
                && ["r0", "r1", "r2"]
                    .iter()
                    .all(|pod| checks(s, pod, b, "applied") >= 5.0)
        })
        .await;
    daemon.stop().await;
    for pod in ["r0", "r1", "r2"] {
        assert_eq!(s.sum("inferprobe_adapters_listed", &[("pod", pod)]), 2.0);
        for adapter in [a, b] {
            for bad in ["diverged", "missing", "not_found", "failed"] {
                assert_eq!(checks(&s, pod, adapter, bad), 0.0, "{pod} {adapter} {bad}");
            }
        }
        assert_eq!(checks(&s, pod, b, "base_served"), 0.0, "{pod}");
        // The base model asked with every adapter at scale 0 is the base on every replica.
        let base = [("pod", pod), ("result", "diverged")];
        assert_eq!(
            s.sum("inferprobe_adapter_base_checks_total", &base),
            0.0,
            "{pod}"
        );
    }
    for pod in ["r0", "r1"] {
        assert_eq!(checks(&s, pod, a, "base_served"), 0.0, "{pod}");
    }
    assert_eq!(checks(&s, "r2", a, "applied"), 0.0);
}
