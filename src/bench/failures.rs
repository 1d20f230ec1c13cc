//! Why requests failed: the first few distinct messages of each error category, each with
//! how many requests had it and the first one's id (to find in the server's logs), as
//! vLLM prints its failed requests' errors. Category counts alone say what kind of
//! failure, not its cause, and `--save-detailed` is rarely on for the run that failed.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use serde_json::{Value, json};

use super::RequestResult;

/// Distinct messages shown per category: enough to see that there is a second cause, few
/// enough that a run with thousands of failures still prints a screenful.
pub const SHOWN: usize = 3;

/// One distinct message of a category.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorSample {
    pub message: String,
    /// The first request (by send time) that failed with it.
    pub request_id: String,
    /// Requests that failed with it.
    pub count: u64,
}

/// A category's first [`SHOWN`] distinct messages and what they leave out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Samples {
    pub shown: Vec<ErrorSample>,
    pub other_messages: u64,
    pub other_requests: u64,
}

/// The message as one bounded line: a server's error body may hold newlines, and a
/// terminal line per message is the point. (Already redacted where it was recorded.)
fn one_line(error: &str) -> String {
    let line = error.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.as_str() {
        "" => "(no message)".into(),
        _ => crate::error::snippet(&line),
    }
}

/// Per category (in the order of the Errors by Category block), its distinct messages in
/// the order they first occurred; `results` are in send order.
pub fn collect(results: &[RequestResult]) -> BTreeMap<&'static str, Samples> {
    let mut all: BTreeMap<&'static str, (Vec<ErrorSample>, HashMap<String, usize>)> =
        BTreeMap::new();
    for r in results {
        let Err(category) = r.outcome else { continue };
        let (samples, index) = all.entry(category.as_str()).or_default();
        let message = one_line(&r.error);
        match index.get(&message) {
            Some(&i) => samples[i].count += 1,
            None => {
                index.insert(message.clone(), samples.len());
                samples.push(ErrorSample {
                    message,
                    request_id: r.request_id.clone(),
                    count: 1,
                });
            }
        }
    }
    all.into_iter()
        .map(|(category, (mut samples, _))| {
            let others = samples.split_off(samples.len().min(SHOWN));
            let summary = Samples {
                shown: samples,
                other_messages: others.len() as u64,
                other_requests: others.iter().map(|s| s.count).sum(),
            };
            (category, summary)
        })
        .collect()
}

/// The block printed after the summary when a request failed (empty otherwise).
pub fn render(samples: &BTreeMap<&'static str, Samples>) -> String {
    let mut out = String::new();
    if samples.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "Failed requests, first {SHOWN} distinct messages per category (requests, first id):"
    );
    for (category, s) in samples {
        for sample in &s.shown {
            let _ = writeln!(
                out,
                "  {category} ({}): {}  [{}]",
                sample.count, sample.message, sample.request_id
            );
        }
        if s.other_messages > 0 {
            let _ = writeln!(
                out,
                "  {category} ({}): {} more distinct messages; --save-detailed keeps every error",
                s.other_requests, s.other_messages
            );
        }
    }
    out
}

/// `{category: [{message, request_id, count}]}` for the result file.
pub fn to_json(samples: &BTreeMap<&'static str, Samples>) -> Value {
    let entries = samples.iter().map(|(category, s)| {
        let shown: Vec<Value> = s
            .shown
            .iter()
            .map(|e| json!({"message": e.message, "request_id": e.request_id, "count": e.count}))
            .collect();
        ((*category).to_owned(), Value::Array(shown))
    });
    Value::Object(entries.collect())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::ErrorCategory;

    fn failed(id: &str, category: ErrorCategory, error: &str) -> RequestResult {
        RequestResult {
            request_id: id.into(),
            trace_id: None,
            start: Duration::ZERO,
            queued: Duration::ZERO,
            outcome: Err(category),
            error: error.into(),
            input_tokens: 1,
            text: String::new(),
        }
    }

    #[test]
    fn each_category_shows_its_first_distinct_messages_with_counts_and_an_id() {
        use ErrorCategory::{Http5xx, RateLimited};
        let results = vec![
            failed("r0", Http5xx, "HTTP 503: overloaded"),
            failed("r1", RateLimited, "HTTP 429: slow down"),
            failed("r2", Http5xx, "HTTP 503:\n  overloaded"),
            failed("r3", Http5xx, "HTTP 500: a"),
            failed("r4", Http5xx, "HTTP 500: b"),
            failed("r5", Http5xx, "HTTP 500: c"),
            failed("r6", Http5xx, "HTTP 500: c"),
            failed("r7", Http5xx, "HTTP 500: d"),
        ];
        let samples = collect(&results);
        assert_eq!(
            samples.keys().copied().collect::<Vec<_>>(),
            ["http_5xx", "rate_limited"]
        );
        let http = &samples["http_5xx"];
        let sample = |m: &str, id: &str, count| ErrorSample {
            message: m.into(),
            request_id: id.into(),
            count,
        };
        assert_eq!(
            http.shown,
            [
                sample("HTTP 503: overloaded", "r0", 2),
                sample("HTTP 500: a", "r3", 1),
                sample("HTTP 500: b", "r4", 1),
            ],
            "a message split over lines is the same message"
        );
        assert_eq!((http.other_messages, http.other_requests), (2, 3));

        let text = render(&samples);
        assert_eq!(
            text,
            "Failed requests, first 3 distinct messages per category (requests, first id):\n\
             \x20 http_5xx (2): HTTP 503: overloaded  [r0]\n\
             \x20 http_5xx (1): HTTP 500: a  [r3]\n\
             \x20 http_5xx (1): HTTP 500: b  [r4]\n\
             \x20 http_5xx (3): 2 more distinct messages; --save-detailed keeps every error\n\
             \x20 rate_limited (1): HTTP 429: slow down  [r1]\n"
        );
        let json = to_json(&samples);
        assert_eq!(json["http_5xx"][0]["count"], 2);
        assert_eq!(json["http_5xx"].as_array().map(Vec::len), Some(SHOWN));
        assert_eq!(json["rate_limited"][0]["request_id"], "r1");
    }

    #[test]
    fn a_long_message_is_cut() {
        let long = "x".repeat(1000);
        let samples = collect(&[failed("r0", ErrorCategory::Other, &long)]);
        let message = &samples["other"].shown[0].message;
        assert_eq!(
            message.chars().count(),
            201,
            "200 characters and an ellipsis"
        );
    }

    #[test]
    fn no_failure_prints_nothing() {
        assert_eq!(render(&collect(&[])), "");
        assert_eq!(to_json(&collect(&[])), json!({}));
    }
}
