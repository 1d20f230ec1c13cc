//! The label names the exporter writes on a target's series beside the target's own labels
//! (`[labels]`, a target's `labels`, what discovery found). The code that builds a series
//! spells each name through these constants, and [`RESERVED`] is the list of them all: a
//! user label of one of these names would give a series that name twice, and Prometheus
//! rejects the whole scrape for it ("duplicate label names"), so every target of the process
//! goes dark. `config` refuses them; `discovery` renames a discovered one `exported_<name>`,
//! as Prometheus does a scraped label that clashes with a target label. `tests/exposition.rs`
//! scrapes a daemon with every feature on and holds this list to what it really writes.
//!
//! Exemplar labels (`request_id`, `trace_id`) are a label set of their own and may share a
//! name with a series label, so they are not here.

/// The target's name (a discovery block's, for its replicas).
pub const TARGET: &str = "target";
pub const MODEL: &str = "model";
pub const BACKEND: &str = "backend";
/// Of `inferprobe_request_errors_total`.
pub const CATEGORY: &str = "category";
/// Why an arrival was skipped; why a structured answer was unusable.
pub const REASON: &str = "reason";
/// The canary's reference group (a version, a revision).
pub const GROUP: &str = "group";
/// The other group a canary answer was compared with (the rollout gate's pair).
pub const BASELINE: &str = "baseline";
/// A canary check's result.
pub const RESULT: &str = "result";
/// What a structured check asked of the server (`json`, `named_tool`, …).
pub const CAPABILITY: &str = "capability";
/// What judged a prefix-cache check (`usage`, `ttft`, `none`).
pub const RULE: &str = "rule";
/// Which threshold an `inferprobe_slo_threshold_seconds` or SLI counter series is.
pub const SLO: &str = "slo";
/// A histogram bucket's upper bound (prometheus-client writes it).
pub const LE: &str = "le";
/// An SLO threshold's value as its histogram's `le` spells it, so the rules pick that
/// bucket (`label_replace` to `le`). Not `le` itself: `promtool check metrics` refuses `le`
/// on anything but a histogram.
pub const BOUND: &str = "bound";

/// A LoRA adapter of the target's model (the adapter check's series).
pub const ADAPTER: &str = "adapter";

/// What a rate limit counts (`requests`, `tokens`, …: [`crate::quota::RESOURCES`]).
pub const RESOURCE: &str = "resource";

/// Where a request's time went (`resolve`, `connect`, `tls`, `processing`).
pub const PHASE: &str = "phase";

/// Whose certificate chain an expiry is of (`server`, `client`).
pub const CHAIN: &str = "chain";

/// Every name above.
pub const RESERVED: [&str; 17] = [
    TARGET, MODEL, BACKEND, CATEGORY, REASON, GROUP, BASELINE, RESULT, CAPABILITY, RULE, SLO, LE,
    BOUND, ADAPTER, RESOURCE, PHASE, CHAIN,
];
