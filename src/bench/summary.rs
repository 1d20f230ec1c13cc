//! The result of a finite run: the printed summary with its rows in vLLM's order and
//! format, and the JSON result with vLLM's keys where the meaning is the same (the
//! statistics are in [`super::stats`]).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::failures::{self, Samples};
use super::stats::{Goodput, Metric, Stats, percentile_name};
use crate::error::ErrorCategory;
use crate::record::Measurement;

/// One request of the run.
#[derive(Debug)]
pub struct RequestResult {
    pub request_id: String,
    /// The trace it started (`traceparent`), unless the target opted out.
    pub trace_id: Option<String>,
    /// When it was sent (after any client-side queueing), from the start of the run.
    pub start: Duration,
    /// Waiting for a `max_concurrency` slot.
    pub queued: Duration,
    pub outcome: Result<Measurement, ErrorCategory>,
    pub error: String,
    /// The prompt's length as the client counts it ([`crate::prompt::Prompt::input_tokens`]:
    /// exact with a tokenizer, else the documented approximation).
    pub input_tokens: u64,
    pub text: String,
}

impl RequestResult {
    /// vLLM 0.32's `prompt_len`: the client-side length, replaced by the usage's
    /// `prompt_tokens` when the server reports them.
    pub fn input_len(&self, m: &Measurement) -> u64 {
        m.prompt_tokens.unwrap_or(self.input_tokens)
    }
}

/// Everything the summary and the JSON result show.
#[derive(Debug)]
pub struct Summary {
    pub completed: u64,
    pub failed: u64,
    pub duration: f64,
    /// vLLM's figure: the server's `prompt_tokens` when it reports them (chat template and
    /// BOS included), else the client-side length.
    pub total_input: u64,
    /// The client-side lengths alone.
    pub total_input_client: u64,
    pub total_output: u64,
    pub good: Option<u64>,
    pub peak_output_per_s: f64,
    pub peak_concurrency: u64,
    pub metrics: Vec<(Metric, Stats)>,
    pub errors: BTreeMap<&'static str, u64>,
    /// Per category, the first few distinct messages of its failures.
    pub error_samples: BTreeMap<&'static str, Samples>,
}

impl Summary {
    pub fn compute(
        results: &[RequestResult],
        duration: Duration,
        metrics: &[Metric],
        percentiles: &[f64],
        goodput: Option<&Goodput>,
    ) -> Self {
        let ok: Vec<(&RequestResult, &Measurement)> = results
            .iter()
            .filter_map(|r| r.outcome.as_ref().ok().map(|m| (r, m)))
            .collect();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let values = |metric: Metric| -> Vec<f64> {
            match metric {
                Metric::Ttft => ok.iter().filter_map(|(_, m)| m.ttft.map(ms)).collect(),
                Metric::Tpot => ok.iter().filter_map(|(_, m)| m.tpot.map(ms)).collect(),
                Metric::Itl => ok
                    .iter()
                    .flat_map(|(_, m)| {
                        m.itl
                            .iter()
                            .flat_map(|&(gap, n)| std::iter::repeat_n(ms(gap), n as usize))
                    })
                    .collect(),
                Metric::E2el => ok.iter().map(|(_, m)| ms(m.e2el)).collect(),
            }
        };
        let mut errors = BTreeMap::new();
        for r in results {
            if let Err(category) = r.outcome {
                *errors.entry(category.as_str()).or_insert(0) += 1;
            }
        }
        let (peak_output_per_s, peak_concurrency) = peaks(&ok);
        Self {
            completed: ok.len() as u64,
            failed: (results.len() - ok.len()) as u64,
            duration: duration.as_secs_f64(),
            total_input: ok.iter().map(|(r, m)| r.input_len(m)).sum(),
            total_input_client: ok.iter().map(|(r, _)| r.input_tokens).sum(),
            total_output: ok
                .iter()
                .map(|(_, m)| m.output_tokens.map_or(0, |c| c.value()))
                .sum(),
            good: goodput.map(|slo| ok.iter().filter(|(_, m)| slo.is_good(m)).count() as u64),
            peak_output_per_s,
            peak_concurrency,
            metrics: metrics
                .iter()
                .map(|&m| (m, Stats::of(values(m), percentiles)))
                .collect(),
            errors,
            error_samples: failures::collect(results),
        }
    }

    fn per_second(&self, n: u64) -> f64 {
        if self.duration > 0.0 {
            n as f64 / self.duration
        } else {
            0.0
        }
    }

    /// The summary block, as `vllm bench serve` prints it, plus errors by category inside
    /// it and, after it, the failures' messages.
    pub fn render(&self, max_concurrency: Option<usize>, configured_rate: Option<f64>) -> String {
        let mut out = String::new();
        let row = |out: &mut String, label: &str, value: &str| {
            let _ = writeln!(out, "{label:<40} {value:<10}");
        };
        let float = |v: f64| format!("{v:.2}");
        let _ = writeln!(out, "{:=^50}", " Serving Benchmark Result ");
        row(
            &mut out,
            "Successful requests:",
            &self.completed.to_string(),
        );
        row(&mut out, "Failed requests:", &self.failed.to_string());
        if let Some(c) = max_concurrency {
            row(&mut out, "Maximum request concurrency:", &c.to_string());
        }
        if let Some(rate) = configured_rate {
            row(&mut out, "Request rate configured (RPS):", &float(rate));
        }
        row(&mut out, "Benchmark duration (s):", &float(self.duration));
        row(
            &mut out,
            "Total input tokens:",
            &self.total_input.to_string(),
        );
        row(
            &mut out,
            "Total generated tokens:",
            &self.total_output.to_string(),
        );
        row(
            &mut out,
            "Request throughput (req/s):",
            &float(self.per_second(self.completed)),
        );
        if let Some(good) = self.good {
            row(
                &mut out,
                "Request goodput (req/s):",
                &float(self.per_second(good)),
            );
        }
        row(
            &mut out,
            "Output token throughput (tok/s):",
            &float(self.per_second(self.total_output)),
        );
        row(
            &mut out,
            "Peak output token throughput (tok/s):",
            &float(self.peak_output_per_s),
        );
        row(
            &mut out,
            "Peak concurrent requests:",
            &float(self.peak_concurrency as f64),
        );
        let total = self.total_input + self.total_output;
        row(
            &mut out,
            "Total token throughput (tok/s):",
            &float(self.per_second(total)),
        );
        for (metric, stats) in &self.metrics {
            let _ = writeln!(out, "{:-^50}", metric.title());
            let name = metric.label();
            row(&mut out, &format!("Mean {name} (ms):"), &float(stats.mean));
            row(
                &mut out,
                &format!("Median {name} (ms):"),
                &float(stats.median),
            );
            for (p, v) in &stats.percentiles {
                row(
                    &mut out,
                    &format!("P{} {name} (ms):", percentile_name(*p)),
                    &float(*v),
                );
            }
        }
        if !self.errors.is_empty() {
            let _ = writeln!(out, "{:-^50}", "Errors by Category");
            for (category, n) in &self.errors {
                row(&mut out, &format!("{category}:"), &n.to_string());
            }
        }
        let _ = writeln!(out, "{}", "=".repeat(50));
        // After the closing line, so the block above stays vLLM's layout.
        out.push_str(&failures::render(&self.error_samples));
        out
    }

    /// vLLM's result keys (where the meaning is the same) into `out`.
    pub fn write_json(&self, out: &mut Map<String, Value>) {
        let mut put = |k: &str, v: Value| {
            out.insert(k.to_owned(), v);
        };
        put("duration", json!(self.duration));
        put("completed", json!(self.completed));
        put("failed", json!(self.failed));
        put("total_input_tokens", json!(self.total_input));
        put("total_input_tokens_client", json!(self.total_input_client));
        put("total_output_tokens", json!(self.total_output));
        put("request_throughput", json!(self.per_second(self.completed)));
        put(
            "request_goodput",
            self.good.map_or(Value::Null, |g| json!(self.per_second(g))),
        );
        put(
            "output_throughput",
            json!(self.per_second(self.total_output)),
        );
        put(
            "total_token_throughput",
            json!(self.per_second(self.total_input + self.total_output)),
        );
        put("max_output_tokens_per_s", json!(self.peak_output_per_s));
        put("max_concurrent_requests", json!(self.peak_concurrency));
        for (metric, stats) in &self.metrics {
            let key = metric.key();
            put(&format!("mean_{key}_ms"), json!(stats.mean));
            put(&format!("median_{key}_ms"), json!(stats.median));
            put(&format!("std_{key}_ms"), json!(stats.std));
            for (p, v) in &stats.percentiles {
                put(&format!("p{}_{key}_ms", percentile_name(*p)), json!(v));
            }
        }
        put("errors_by_category", json!(self.errors));
        put("error_samples", failures::to_json(&self.error_samples));
    }
}

/// Peak tokens per second and peak concurrency, from one-second buckets over the run (as
/// vLLM computes them: token events at start + TTFT + cumulative ITL).
fn peaks(ok: &[(&RequestResult, &Measurement)]) -> (f64, u64) {
    let Some(first) = ok.iter().map(|(r, _)| r.start).min() else {
        return (0.0, 0);
    };
    let last = ok
        .iter()
        .map(|(r, m)| r.start + m.e2el)
        .max()
        .unwrap_or(first);
    let buckets = (last - first).as_secs_f64().ceil() as usize + 1;
    let mut tokens = vec![0u64; buckets];
    let mut requests = vec![0u64; buckets];
    let bucket =
        |at: Duration| ((at.saturating_sub(first)).as_secs_f64() as usize).min(buckets - 1);
    for (r, m) in ok {
        if let Some(ttft) = m.ttft {
            let mut at = r.start + ttft;
            tokens[bucket(at)] += 1;
            for &(gap, n) in &m.itl {
                for _ in 0..n {
                    at += gap;
                    tokens[bucket(at)] += 1;
                }
            }
        }
        for slot in &mut requests[bucket(r.start)..=bucket(r.start + m.e2el)] {
            *slot += 1;
        }
    }
    let max = |v: &[u64]| v.iter().copied().max().unwrap_or(0);
    (max(&tokens) as f64, max(&requests))
}

#[cfg(test)]
mod tests;
