//! The adapter check's recent checks on the status page (docs/adapters.md): per adapter,
//! what its answer followed and where it parted from its reference, so a `base_served` or
//! a `missing` can be read without a query.

use std::fmt::Write;
use std::time::SystemTime;

use super::html::{clock, escape};

/// One adapter's check (or the base model's: `adapter` empty), as the page shows it.
#[derive(Clone, Debug)]
pub struct AdapterCheck {
    pub at: SystemTime,
    pub adapter: String,
    /// An adapter check's result, or the base model's (`match`, `diverged`, …).
    pub result: &'static str,
    pub prompt: String,
    /// Where it parted from its reference, with the expected and received tokens; or why
    /// it was not judged.
    pub detail: String,
}

/// The target's recent adapter checks, newest first, when it has any.
pub(super) fn section(out: &mut String, checks: &[AdapterCheck]) {
    if checks.is_empty() {
        return;
    }
    out.push_str(
        "<h3>Adapters</h3><table><thead><tr><th>time</th><th>adapter</th><th>result</th>\
<th>prompt</th><th>detail</th></tr></thead><tbody>",
    );
    for c in checks.iter().rev() {
        let class = match c.result {
            "base_served" | "diverged" | "missing" | "not_found" | "failed" => "bad",
            "unscored" => "muted",
            _ => "",
        };
        let adapter = match c.adapter.as_str() {
            "" => "(base model)",
            name => name,
        };
        let _ = write!(
            out,
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            clock(c.at),
            escape(adapter),
            c.result,
            escape(&c.prompt),
            escape(&c.detail),
        );
    }
    out.push_str("</tbody></table>");
}
