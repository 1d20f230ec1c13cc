//! The prefix-cache check's recent pairs on the status page (docs/prefix-cache.md): what
//! each pair's second request had cached against its first, and how much sooner its first
//! token came, so a `miss` can be read without a query.

use std::fmt::Write;
use std::time::{Duration, SystemTime};

use super::html::{clock, escape};

/// One pair, as the page shows it.
#[derive(Clone, Debug)]
pub struct PrefixCheck {
    pub at: SystemTime,
    /// The warm request's id (the cold one's ends in `-0` instead of `-1`).
    pub request_id: String,
    /// `hit`, `miss`, `unreported` or `failed`, and the rule that judged it.
    pub result: &'static str,
    pub rule: &'static str,
    /// Cached prompt tokens the server reported, cold and warm.
    pub cached: (Option<u64>, Option<u64>),
    /// TTFT, cold and warm.
    pub ttft: (Option<Duration>, Option<Duration>),
    /// Why a pair failed.
    pub detail: Option<String>,
}

fn tokens(n: Option<u64>) -> String {
    n.map_or_else(|| "–".into(), |n| n.to_string())
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "–".into(), |d| format!("{:.1}", d.as_secs_f64() * 1e3))
}

/// The target's recent pairs, newest first, when it has any.
pub(super) fn section(out: &mut String, checks: &[PrefixCheck]) {
    if checks.is_empty() {
        return;
    }
    out.push_str(
        "<h3>Prefix cache</h3><table><thead><tr><th>time</th><th>result</th><th>rule</th>\
<th>cached tokens cold → warm</th><th>TTFT ms cold → warm</th><th>request id</th><th>detail</th></tr></thead><tbody>",
    );
    for c in checks.iter().rev() {
        let class = match c.result {
            "miss" | "failed" => "bad",
            "unreported" => "muted",
            _ => "",
        };
        let _ = write!(
            out,
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}</td><td>{} → {}</td><td>{} → {}</td><td><code>{}</code></td><td>{}</td></tr>",
            clock(c.at),
            c.result,
            c.rule,
            tokens(c.cached.0),
            tokens(c.cached.1),
            ms(c.ttft.0),
            ms(c.ttft.1),
            escape(&c.request_id),
            escape(c.detail.as_deref().unwrap_or("")),
        );
    }
    out.push_str("</tbody></table>");
}
