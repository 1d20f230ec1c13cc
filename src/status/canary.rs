//! The correctness canary's recent checks on the status page: what was asked, and where
//! and how an answer went wrong.

use std::fmt::Write;
use std::sync::Arc;
use std::time::SystemTime;

use super::html::{clock, escape};

/// One canary check, as the page shows it.
#[derive(Clone, Debug)]
pub struct CanaryCheck {
    pub at: SystemTime,
    pub request_id: Arc<String>,
    pub prompt: String,
    /// `match`, `diverged`, `wrong_answer` or `unscored`.
    pub result: &'static str,
    /// Where a divergence was, what the reference said there and what came instead.
    pub divergence: Option<(usize, String, String)>,
    pub drift: Option<f64>,
    /// Why unscored, or what a wrong answer said.
    pub detail: Option<String>,
}

/// The target's recent checks, newest first, when it has any.
pub(super) fn section(out: &mut String, checks: &[CanaryCheck]) {
    if checks.is_empty() {
        return;
    }
    out.push_str(
        "<h3>Correctness canary</h3><table><thead><tr><th>time</th><th>result</th><th>prompt</th>\
<th>position</th><th>expected</th><th>received</th><th>drift</th><th>request id</th><th>detail</th></tr></thead><tbody>",
    );
    for c in checks.iter().rev() {
        let class = match c.result {
            "diverged" | "wrong_answer" => "bad",
            "unscored" => "muted",
            _ => "",
        };
        let (position, expected, received) = match &c.divergence {
            Some((p, e, r)) => (p.to_string(), format!("{e:?}"), format!("{r:?}")),
            None => ("–".into(), "–".into(), "–".into()),
        };
        let _ = write!(
            out,
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            clock(c.at),
            c.result,
            escape(&c.prompt),
            position,
            escape(&expected),
            escape(&received),
            c.drift.map_or_else(|| "–".into(), |d| format!("{d:.2e}")),
            escape(&c.request_id),
            escape(c.detail.as_deref().unwrap_or("")),
        );
    }
    out.push_str("</tbody></table>");
}
