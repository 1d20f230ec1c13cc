//! The canary's defects a review found (issue 24, items 1, 6, 7, 8), each end to end
//! against a server replaying a made-up stream, or through `inferprobe check`.

use crate::common;

use common::process::inferprobe;

use std::time::Duration;

use common::replay::{Capture, serve};
use common::{Scrape, start_daemon};

fn checks(s: &Scrape, result: &str) -> f64 {
    s.sum("inferprobe_canary_checks_total", &[("result", result)])
}

/// A chat answer " Paris." then EOS (usage counts it): 3 tokens, `finish_reason: stop`.
/// `lead` is the logprob of " Paris".
fn paris(logprob: &str) -> Capture {
    let token = |text: &str, lp: &str| {
        format!(
            r#"data: {{"choices":[{{"index":0,"delta":{{"content":"{text}"}},"logprobs":{{"content":[{{"token":"{text}","logprob":{lp},"top_logprobs":[{{"token":"{text}","logprob":{lp}}},{{"token":" Lyon","logprob":-6.0}}]}}]}},"finish_reason":null}}]}}"#
        )
    };
    let body = [
        r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#.to_owned(),
        token(" Paris", logprob),
        token(".", "-0.02"),
        r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3}}"#.to_owned(),
        "data: [DONE]".to_owned(),
    ]
    .map(|e| e + "\n\n")
    .concat();
    Capture::stream(&body)
}

fn config(url: &str, extra: &str) -> String {
    format!(
        r#"
        [[targets]]
        name = "t"
        backend = "openai-chat"
        url = "{url}"
        model = "m"
        rate = 0.001
        {extra}
        canary = {{ interval = "20ms", max_tokens = 16 }}
        "#
    )
}

/// Item 1: the canary's short greedy answer went through the target's `validate` rules
/// (written for `ignore_eos` workload probes): a `validation` error on a healthy target
/// one request in seven, and every check unscored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_answer_is_judged_by_the_canary_not_by_validate() {
    let addr = serve(paris("-0.01"), Duration::ZERO).await;
    let toml = config(
        &format!("http://{addr}"),
        r#"validate = { output_tokens = true, finish_reasons = ["length"] }"#,
    );
    let daemon = start_daemon(&toml).await;
    let s = daemon
        .wait_for(Duration::from_secs(30), |s| checks(s, "match") >= 5.0)
        .await;
    daemon.stop().await;
    assert_eq!(s.errors("t", "validation"), 0.0);
    assert_eq!(checks(&s, "unscored"), 0.0);
}

/// Item 6: a positive logprob (or NaN sent as `null`) on a 200 is broken numerics: a
/// failed check, where it was `unscored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impossible_logprobs_fail_the_check() {
    for impossible in ["0.7", "null"] {
        let addr = serve(paris(impossible), Duration::ZERO).await;
        let daemon = start_daemon(&config(&format!("http://{addr}"), "")).await;
        let s = daemon
            .wait_for(Duration::from_secs(30), |s| {
                checks(s, "wrong_answer") >= 3.0
            })
            .await;
        let page = daemon.get("/", None).await.text().await.unwrap();
        daemon.stop().await;
        assert_eq!(checks(&s, "match") + checks(&s, "unscored"), 0.0);
        assert!(page.contains("impossible logprobs"), "{impossible}: {page}");
    }
}

/// Item 7: the shipped alerts need 5 (wrong answers) and 10 (drift) scored checks of a
/// replica in 30 minutes; a longer interval made them impossible, silently.
#[test]
fn check_warns_of_an_interval_the_alerts_cannot_fire_at() {
    let dir = tempfile::tempdir().unwrap();
    for (interval, warned) in [
        ("60s", &[][..]),
        ("4m", &["InferprobeCanaryDrift"][..]),
        (
            "10m",
            &["InferprobeWrongAnswers", "InferprobeCanaryDrift"][..],
        ),
    ] {
        let path = dir.path().join("c.toml");
        let toml = config("http://127.0.0.1:9", "").replace(
            r#"interval = "20ms""#,
            &format!("interval = \"{interval}\""),
        );
        std::fs::write(&path, toml).unwrap();
        let out = inferprobe(&["check", "--config", path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        for alert in ["InferprobeWrongAnswers", "InferprobeCanaryDrift"] {
            assert_eq!(
                stderr.contains(&format!("{alert} needs")),
                warned.contains(&alert),
                "{interval}: {stderr}"
            );
        }
    }
}

/// Item 8: a golden file recorded for another model, backend or `top_logprobs` diverges
/// on every check; `check` refuses it. `canary record --config --target` records as the
/// target sends (its backend, model and `extra_body`), so the file fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_golden_file_must_fit_its_target_and_record_takes_the_target() {
    use common::replay::serve_recording;
    let (addr, requests) = serve_recording(paris("-0.01"), Duration::ZERO).await;
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("prompts.jsonl");
    std::fs::write(&prompts, "{\"prompt\": \"The capital of France is\"}\n").unwrap();
    let golden = dir.path().join("golden.json");
    let config_path = dir.path().join("c.toml");
    let target = |backend: &str, model: &str, canary: &str| {
        format!(
            r#"
            [[targets]]
            name = "t"
            backend = "{backend}"
            url = "http://{addr}"
            model = "{model}"
            extra_body = {{ chat_template_kwargs = {{ enable_thinking = false }} }}
            canary = {{ {canary} }}
            "#
        )
    };
    std::fs::write(
        &config_path,
        target(
            "openai-chat",
            "m",
            &format!("prompts = \"{}\", top_logprobs = 3", prompts.display()),
        ),
    )
    .unwrap();
    let args = inferprobe::canary::record::RecordArgs {
        config: Some(config_path.clone()),
        target: Some("t".into()),
        out: golden.clone(),
        ..Default::default()
    };
    let recorded = inferprobe::canary::record::record(&args).await.unwrap();
    inferprobe::canary::record::write(&recorded, &golden).unwrap();
    assert_eq!(
        (
            recorded.backend.as_str(),
            recorded.model.as_str(),
            recorded.top_logprobs
        ),
        ("openai-chat", "m", 3)
    );
    let sent = requests.lock().unwrap().clone();
    assert!(
        sent.iter()
            .filter(|r| r.starts_with("POST"))
            .all(|r| r.contains("chat_template_kwargs") && r.contains("\"top_logprobs\":3")),
        "{sent:?}"
    );

    let golden_key = format!("golden = \"{}\"", golden.display());
    let fits = common::parse_config(&target("openai-chat", "m", &golden_key));
    assert!(fits.is_ok(), "{:?}", fits.err());
    for (backend, model, canary, culprit) in [
        ("openai", "m", golden_key.clone(), "backend"),
        ("openai-chat", "m2", golden_key.clone(), "model"),
        (
            "openai-chat",
            "m",
            format!("{golden_key}, top_logprobs = 5"),
            "top_logprobs",
        ),
    ] {
        let err = common::parse_config(&target(backend, model, &canary))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("targets[0].canary.golden") && err.contains(culprit),
            "{culprit}: {err}"
        );
    }
}
