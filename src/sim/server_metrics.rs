//! The simulator's own account of what it did, on `GET /metrics` under vLLM's names, so a
//! dashboard can put the probe's view beside the server's and the Prometheus proof can show
//! every such query returning data: `vllm:time_to_first_token_seconds`,
//! `vllm:inter_token_latency_seconds`, `vllm:request_time_per_output_token_seconds`,
//! `vllm:e2e_request_latency_seconds`, `vllm:request_queue_time_seconds`,
//! `vllm:request_prefill_time_seconds`, `vllm:request_decode_time_seconds` (histograms, vLLM
//! 0.32's buckets and labels `model_name`, `engine`), `vllm:prompt_tokens_total` and
//! `vllm:generation_tokens_total`. The times are the simulator's plan (it has no queue, so
//! queue time is 0; prefill is its time to first token), recorded when a response starts.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

const TTFT: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
const INTER_TOKEN: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
const REQUEST: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// (name, buckets), in exposition order.
const HISTOGRAMS: [(&str, &[f64]); 7] = [
    ("vllm:time_to_first_token_seconds", TTFT),
    ("vllm:inter_token_latency_seconds", INTER_TOKEN),
    ("vllm:request_time_per_output_token_seconds", INTER_TOKEN),
    ("vllm:e2e_request_latency_seconds", REQUEST),
    ("vllm:request_queue_time_seconds", REQUEST),
    ("vllm:request_prefill_time_seconds", REQUEST),
    ("vllm:request_decode_time_seconds", REQUEST),
];

#[derive(Clone, Debug, Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, buckets: &[f64], value: f64, times: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; buckets.len()];
        }
        for (bound, count) in buckets.iter().zip(&mut self.counts) {
            if value <= *bound {
                *count += times;
            }
        }
        self.sum += value * times as f64;
        self.count += times;
    }
}

#[derive(Debug, Default)]
struct Model {
    histograms: [Histogram; 7],
    prompt_tokens: u64,
    generation_tokens: u64,
}

/// Per served model name.
#[derive(Debug, Default)]
pub struct ServerMetrics {
    models: Mutex<BTreeMap<String, Model>>,
}

/// What the simulator plans for one request.
pub struct Served {
    pub ttft: Duration,
    pub itl: Duration,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
}

/// At most this many model names are kept: they come from clients.
const MAX_MODELS: usize = 64;

impl ServerMetrics {
    pub fn record(&self, model: &str, served: &Served) {
        let mut models = self.models.lock().unwrap_or_else(|e| e.into_inner());
        if !models.contains_key(model) && models.len() >= MAX_MODELS {
            return;
        }
        let m = models.entry(model.to_owned()).or_default();
        let (ttft, itl) = (served.ttft.as_secs_f64(), served.itl.as_secs_f64());
        let gaps = served.output_tokens.saturating_sub(1);
        let decode = itl * gaps as f64;
        let observations = [
            (ttft, 1),
            (itl, gaps),
            (itl, u64::from(gaps > 0)),
            (ttft + decode, 1),
            (0.0, 1),
            (ttft, 1),
            (decode, 1),
        ];
        for ((histogram, (_, buckets)), (value, times)) in
            m.histograms.iter_mut().zip(HISTOGRAMS).zip(observations)
        {
            if times > 0 {
                histogram.observe(buckets, value, times);
            }
        }
        m.prompt_tokens += served.prompt_tokens;
        m.generation_tokens += served.output_tokens;
    }

    /// The text exposition (format 0.0.4).
    pub fn render(&self) -> String {
        let models = self.models.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        let label = |model: &str| format!("engine=\"0\",model_name=\"{}\"", escape(model));
        for (i, (name, buckets)) in HISTOGRAMS.iter().enumerate() {
            let _ = writeln!(out, "# TYPE {name} histogram");
            for (model, m) in models.iter() {
                let h = &m.histograms[i];
                let labels = label(model);
                for (bound, count) in buckets
                    .iter()
                    .zip(h.counts.iter().chain(std::iter::repeat(&0)))
                {
                    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound:?}\"}} {count}");
                }
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
                let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum);
                let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count);
            }
        }
        for (name, prompt) in [
            ("vllm:prompt_tokens_total", true),
            ("vllm:generation_tokens_total", false),
        ] {
            let _ = writeln!(out, "# TYPE {name} counter");
            for (model, m) in models.iter() {
                let tokens = if prompt {
                    m.prompt_tokens
                } else {
                    m.generation_tokens
                };
                let _ = writeln!(out, "{name}{{{}}} {tokens}", label(model));
            }
        }
        out
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_counted_under_vllms_names() {
        let metrics = ServerMetrics::default();
        let served = Served {
            ttft: Duration::from_millis(50),
            itl: Duration::from_millis(20),
            prompt_tokens: 9,
            output_tokens: 5,
        };
        metrics.record("m\"x", &served);
        let text = metrics.render();
        for line in [
            r#"vllm:time_to_first_token_seconds_bucket{engine="0",model_name="m\"x",le="0.06"} 1"#,
            r#"vllm:inter_token_latency_seconds_count{engine="0",model_name="m\"x"} 4"#,
            r#"vllm:request_decode_time_seconds_sum{engine="0",model_name="m\"x"} 0.08"#,
            r#"vllm:request_queue_time_seconds_bucket{engine="0",model_name="m\"x",le="0.3"} 1"#,
            r#"vllm:generation_tokens_total{engine="0",model_name="m\"x"} 5"#,
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
    }
}
