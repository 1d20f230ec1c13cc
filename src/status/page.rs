//! The status page's HTML: server-rendered, an inline SVG sparkline per target, a meta
//! refresh, no JavaScript. Everything that came from a server or a config (names, error
//! messages) is HTML-escaped.

use std::fmt::Write;
use std::time::Duration;

use super::html::{clock, escape};
use super::{Board, ProbeSummary, TargetStatus};

const REFRESH_SECONDS: u32 = 5;
/// Rows of the probe table per target (the sparkline shows the whole ring).
const TABLE_ROWS: usize = 20;

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "–".into(), |d| format!("{:.1}", d.as_secs_f64() * 1e3))
}

fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    (!sorted.is_empty()).then(|| crate::bench::percentile(sorted, p))
}

/// Figures over a target's recent probes.
struct Figures {
    probes: usize,
    success_ratio: Option<f64>,
    good_ratio: Option<f64>,
    ttft_p50: Option<f64>,
    ttft_p99: Option<f64>,
}

fn figures(probes: &[ProbeSummary]) -> Figures {
    let n = probes.len();
    let ratio = |count: usize| (n > 0).then(|| count as f64 / n as f64);
    let mut ttfts: Vec<f64> = probes
        .iter()
        .filter_map(|p| p.ttft.map(|d| d.as_secs_f64() * 1e3))
        .collect();
    ttfts.sort_by(f64::total_cmp);
    Figures {
        probes: n,
        success_ratio: ratio(probes.iter().filter(|p| p.error.is_none()).count()),
        good_ratio: ratio(probes.iter().filter(|p| p.good).count()),
        ttft_p50: percentile(&ttfts, 50.0),
        ttft_p99: percentile(&ttfts, 99.0),
    }
}

/// Latency per probe (TTFT, or E2EL for non-streamed formats) as a polyline; failures as
/// red ticks on the baseline.
fn sparkline(probes: &[ProbeSummary]) -> String {
    const W: f64 = 600.0;
    const H: f64 = 60.0;
    let value = |p: &ProbeSummary| p.ttft.or(p.e2el).map(|d| d.as_secs_f64());
    let max = probes
        .iter()
        .filter_map(value)
        .fold(0.0, f64::max)
        .max(1e-3);
    let step = W / probes.len().max(2).saturating_sub(1) as f64;
    let mut line = String::new();
    let mut ticks = String::new();
    for (i, p) in probes.iter().enumerate() {
        let x = i as f64 * step;
        match value(p) {
            Some(v) => {
                let _ = write!(line, "{x:.1},{:.1} ", H - 4.0 - (v / max) * (H - 8.0));
            }
            None => {
                let _ = write!(
                    ticks,
                    "<line x1=\"{x:.1}\" y1=\"{H}\" x2=\"{x:.1}\" y2=\"{:.1}\" class=\"fail\"/>",
                    H - 10.0
                );
            }
        }
    }
    format!(
        "<svg class=\"spark\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" aria-label=\"latency of recent probes\">\
         <polyline points=\"{}\"/>{ticks}<text x=\"2\" y=\"11\">{:.0} ms</text></svg>",
        line.trim_end(),
        max * 1e3
    )
}

fn slo_state(target: &TargetStatus, f: &Figures) -> String {
    match (&target.slo, f.good_ratio) {
        (None, _) => "<span class=\"muted\">no SLO</span>".into(),
        (Some(_), None) => "<span class=\"muted\">no probes yet</span>".into(),
        (Some(slo), Some(good)) if good >= slo.objective => format!(
            "<span class=\"ok\">meeting</span> {:.1}% good ≥ {:.2}%",
            good * 100.0,
            slo.objective * 100.0
        ),
        (Some(slo), Some(good)) => format!(
            "<span class=\"bad\">violating</span> {:.1}% good &lt; {:.2}%",
            good * 100.0,
            slo.objective * 100.0
        ),
    }
}

fn section(out: &mut String, target: &TargetStatus) {
    let probes = target.probes();
    let f = figures(&probes);
    let pct = |r: Option<f64>| r.map_or_else(|| "–".into(), |r| format!("{:.1}%", r * 100.0));
    let _ = write!(
        out,
        "<section id=\"{id}\"><h2>{name}</h2><p class=\"meta\">{backend} · {model} · {url} · {rate} probes/s{origin}</p>\
         <dl><dt>success</dt><dd class=\"success\">{success}</dd><dt>TTFT p50</dt><dd>{p50}</dd>\
         <dt>TTFT p99</dt><dd>{p99}</dd><dt>SLO</dt><dd class=\"slo\">{slo}</dd><dt>probes</dt><dd>{n}</dd></dl>{spark}",
        id = escape(&target.name),
        name = escape(&target.name),
        backend = target.backend,
        model = escape(&target.model),
        url = escape(&target.url),
        rate = target.rate,
        origin = target
            .origin
            .as_deref()
            .map_or_else(String::new, |o| format!(" · discovered: {}", escape(o))),
        success = pct(f.success_ratio),
        p50 = f
            .ttft_p50
            .map_or_else(|| "–".into(), |v| format!("{v:.1} ms")),
        p99 = f
            .ttft_p99
            .map_or_else(|| "–".into(), |v| format!("{v:.1} ms")),
        slo = slo_state(target, &f),
        n = f.probes,
        spark = sparkline(&probes),
    );
    out.push_str("<table><thead><tr><th>time (UTC)</th><th>outcome</th><th>TTFT ms</th><th>E2EL ms</th><th>tokens</th><th>request id</th><th>trace id</th><th>detail</th></tr></thead><tbody>");
    for p in probes.iter().rev().take(TABLE_ROWS) {
        let (outcome, class, mut detail) = match &p.error {
            None => (
                "ok".to_owned(),
                if p.good { "good" } else { "slow" },
                String::new(),
            ),
            Some((category, message)) => {
                (category.to_string(), "bad", crate::error::snippet(message))
            }
        };
        if !p.media.is_empty() {
            detail = match detail.is_empty() {
                true => format!("sent {}", p.media),
                false => format!("sent {}: {detail}", p.media),
            };
        }
        let _ = write!(
            out,
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td></tr>",
            clock(p.at),
            escape(&outcome),
            ms(p.ttft),
            ms(p.e2el),
            p.output_tokens
                .map_or_else(|| "–".into(), |n| n.to_string()),
            escape(&p.request_id),
            p.trace_id.as_deref().unwrap_or("–"),
            escape(&detail),
        );
    }
    out.push_str("</tbody></table>");
    super::canary::section(out, &target.canary_checks());
    super::prefix::section(out, &target.prefix_checks());
    super::sampler::section(out, &target.sampler());
    super::adapters::section(out, &target.adapter_checks());
    out.push_str("</section>");
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}\
h1{font-size:1.4em}section{margin:2em 0;border-top:1px solid #ddd}\
.meta{color:#666}dl{display:flex;gap:1.5em;flex-wrap:wrap}dt{color:#666}dd{margin:0 0 0 .4em;font-weight:600}\
table{border-collapse:collapse;margin-top:1em}td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #eee}\
tr.bad td{color:#b00}tr.slow td{color:#a60}tr.muted td{color:#888}.ok{color:#080;font-weight:600}.bad{color:#b00;font-weight:600}\
.muted{color:#888}.spark polyline{fill:none;stroke:#36c;stroke-width:1.5}.spark .fail{stroke:#d00;stroke-width:2}\
.spark text{font-size:10px;fill:#888}";

/// The whole page.
pub fn render(board: &Board) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <title>inferprobe</title><style>{STYLE}</style></head><body><h1>inferprobe {}</h1>\
         <p class=\"meta\">Recent probes per target; refreshes every {REFRESH_SECONDS} s. Metrics: <a href=\"/metrics\">/metrics</a> · \
         configuration: <a href=\"/config\">/config</a></p>",
        env!("CARGO_PKG_VERSION"),
    );
    let targets = board.targets();
    if targets.is_empty() {
        out.push_str("<p>No targets.</p>");
    }
    for target in &targets {
        section(&mut out, target);
    }
    out.push_str("</body></html>\n");
    out
}
