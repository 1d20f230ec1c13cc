//! The JSON result file of `inferprobe bench`: vLLM's keys where the meaning is the same,
//! so the tools that read `vllm bench serve` results read these, plus errors by category.

use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};

use super::{BenchArgs, Plan, RequestResult, Summary};
use crate::record::Measurement;

/// The result file: vLLM's keys where the meaning is the same, plus errors by category.
pub(super) fn json(
    args: &BenchArgs,
    plan: &Plan,
    summary: &Summary,
    results: &[RequestResult],
) -> Value {
    let target = &plan.target;
    let mut out = Map::new();
    let date = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    out.insert("date".into(), json!(date));
    out.insert("endpoint_type".into(), json!(target.backend.as_str()));
    out.insert("backend".into(), json!(target.backend.as_str()));
    out.insert("label".into(), Value::Null);
    out.insert("model_id".into(), json!(target.model));
    out.insert(
        "tokenizer_id".into(),
        json!(target.prompts.tokenizer.as_ref().map(|t| t.path())),
    );
    out.insert("num_prompts".into(), json!(results.len()));
    let rate = if plan.traffic.rate.is_finite() {
        json!(plan.traffic.rate)
    } else {
        json!("inf")
    };
    out.insert("request_rate".into(), rate);
    out.insert("burstiness".into(), json!(plan.traffic.burstiness));
    out.insert("max_concurrency".into(), json!(args.max_concurrency));
    if let Some((strategy, start, end)) = plan.traffic.ramp_up {
        out.insert(
            "ramp_up_strategy".into(),
            json!(format!("{strategy:?}").to_lowercase()),
        );
        out.insert("ramp_up_start_rps".into(), json!(start));
        out.insert("ramp_up_end_rps".into(), json!(end));
    }
    summary.write_json(&mut out);
    let secs = |d: Duration| d.as_secs_f64();
    out.insert(
        "latencies".into(),
        json!(
            results
                .iter()
                .map(|r| r.outcome.as_ref().map_or(0.0, |m| secs(m.e2el)))
                .collect::<Vec<_>>()
        ),
    );
    out.insert(
        "queue_times".into(),
        json!(results.iter().map(|r| secs(r.queued)).collect::<Vec<_>>()),
    );
    if args.save_detailed {
        fn ok(r: &RequestResult) -> Option<&Measurement> {
            r.outcome.as_ref().ok()
        }
        out.insert(
            "request_ids".into(),
            json!(
                results
                    .iter()
                    .map(|r| r.request_id.as_str())
                    .collect::<Vec<_>>()
            ),
        );
        out.insert(
            "trace_ids".into(),
            json!(
                results
                    .iter()
                    .map(|r| r.trace_id.as_deref())
                    .collect::<Vec<_>>()
            ),
        );
        // vLLM's `input_lens` (the server's count when reported), and the client's.
        out.insert(
            "input_lens".into(),
            json!(
                results
                    .iter()
                    .map(|r| ok(r).map_or(r.input_tokens, |m| r.input_len(m)))
                    .collect::<Vec<_>>()
            ),
        );
        out.insert(
            "input_lens_client".into(),
            json!(results.iter().map(|r| r.input_tokens).collect::<Vec<_>>()),
        );
        out.insert(
            "output_lens".into(),
            json!(
                results
                    .iter()
                    .map(|r| ok(r).and_then(|m| m.output_tokens).map_or(0, |c| c.value()))
                    .collect::<Vec<_>>()
            ),
        );
        out.insert(
            "ttfts".into(),
            json!(
                results
                    .iter()
                    .map(|r| ok(r).and_then(|m| m.ttft).map_or(0.0, secs))
                    .collect::<Vec<_>>()
            ),
        );
        let itls: Vec<Vec<f64>> = results
            .iter()
            .map(|r| {
                ok(r).map_or_else(Vec::new, |m| {
                    m.itl
                        .iter()
                        .flat_map(|&(gap, n)| std::iter::repeat_n(secs(gap), n as usize))
                        .collect()
                })
            })
            .collect();
        out.insert("itls".into(), json!(itls));
        out.insert(
            "start_times".into(),
            json!(results.iter().map(|r| secs(r.start)).collect::<Vec<_>>()),
        );
        out.insert(
            "generated_texts".into(),
            json!(results.iter().map(|r| r.text.as_str()).collect::<Vec<_>>()),
        );
        out.insert(
            "errors".into(),
            json!(results.iter().map(|r| r.error.as_str()).collect::<Vec<_>>()),
        );
    }
    Value::Object(out)
}
