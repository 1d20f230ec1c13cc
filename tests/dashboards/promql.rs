//! A small PromQL tokenizer for the dashboard checks: what an expression refers to
//! (metric names, matchers, range selectors, label lists). Enough for the dashboards'
//! queries, not a full parser.

/// What a PromQL expression refers to, from a small tokenizer: enough for the dashboards'
/// queries (strings, numbers, selectors with matchers and ranges, functions, aggregations
/// with label lists), not a full parser.
#[derive(Debug, Default)]
pub struct Refs {
    /// Metric names, each with its `{...}` matchers if it has them.
    pub selectors: Vec<(String, Option<String>)>,
    /// The text inside every `[...]`.
    pub ranges: Vec<String>,
    /// `{...}` without a metric name in front.
    pub bare_matchers: usize,
}

const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];
/// Followed by a list of label names in parentheses.
const LABEL_LIST_KEYWORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const KEYWORDS: &[&str] = &[
    "bool", "and", "or", "unless", "atan2", "offset", "inf", "nan",
];

pub fn promql_refs(expr: &str) -> Refs {
    let chars: Vec<char> = expr.chars().collect();
    let ident_start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == ':';
    let ident_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    // Index of the closing `close` after `chars[start]`, skipping string literals.
    let closing = |start: usize, close: char| {
        let mut i = start + 1;
        while i < chars.len() && chars[i] != close {
            if chars[i] == '"' || chars[i] == '\'' {
                let quote = chars[i];
                i += 1;
                while i < chars.len() && chars[i] != quote {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
            }
            i += 1;
        }
        i.min(chars.len())
    };
    let next_non_space = |mut i: usize| {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        i
    };
    let text = |from: usize, to: usize| chars[from..to.min(chars.len())].iter().collect::<String>();

    let mut refs = Refs::default();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = closing(i, c) + 1;
        } else if c == '{' {
            refs.bare_matchers += 1;
            i = closing(i, '}') + 1;
        } else if c == '[' {
            let end = closing(i, ']');
            refs.ranges.push(text(i + 1, end));
            i = end + 1;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            // A number, with an exponent such as 1e-9.
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                let exponent = matches!(chars[i], 'e' | 'E');
                i += 1;
                if exponent && i < chars.len() && matches!(chars[i], '+' | '-') {
                    i += 1;
                }
            }
        } else if ident_start(c) {
            let start = i;
            while i < chars.len() && ident_char(chars[i]) {
                i += 1;
            }
            let ident = text(start, i);
            let next = next_non_space(i);
            let next_char = chars.get(next).copied();
            let word = ident.as_str();
            if LABEL_LIST_KEYWORDS.contains(&word) && next_char == Some('(') {
                i = closing(next, ')') + 1; // `by (le, target)`: labels, not metrics
            } else if AGGREGATIONS.contains(&word) || KEYWORDS.contains(&word) {
                // `sum`, `bool`, `or`, ...: neither a metric nor a label list.
            } else if next_char == Some('(') {
                // A function call.
            } else if next_char == Some('{') {
                let end = closing(next, '}');
                refs.selectors.push((ident, Some(text(next + 1, end))));
                i = end + 1;
            } else {
                refs.selectors.push((ident, None));
            }
        } else {
            i += 1;
        }
    }
    refs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboards::{is_exported, recording_rules};

    #[test]
    fn the_tokenizer_finds_selectors_ranges_and_label_lists() {
        let refs = promql_refs(concat!(
            r#"histogram_quantile(0.99, sum by (le, node) (rate(inferprobe_x_bucket{"#,
            r#"target=~"$target", le!="{"}[$__rate_interval])))"#,
            r#" / on (target) group_left () inferprobe:y + 1e-9 > bool 0 or up"#,
        ));
        assert_eq!(
            refs.selectors,
            vec![
                (
                    "inferprobe_x_bucket".to_owned(),
                    Some(r#"target=~"$target", le!="{""#.to_owned())
                ),
                ("inferprobe:y".to_owned(), None),
                ("up".to_owned(), None),
            ]
        );
        assert_eq!(refs.ranges, vec!["$__rate_interval".to_owned()]);
        assert_eq!(refs.bare_matchers, 0);
        assert!(is_exported("inferprobe_time_to_first_token_seconds_bucket"));
        assert!(is_exported("inferprobe_time_to_first_token_seconds"));
        assert!(!is_exported("inferprobe_canary_logprob_drift"));
        assert!(!is_exported("inferprobe_requests"));
        assert!(recording_rules().contains("inferprobe:error_budget_remaining:ratio"));
    }
}
