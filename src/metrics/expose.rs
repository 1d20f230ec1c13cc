//! The /metrics exposition, in the format the scraper asked for.
//!
//! prometheus-client writes OpenMetrics text (with exemplars). Prometheus asks for that
//! and gets it. Everything else (curl, promtool, older agents) gets the classic Prometheus
//! text format 0.0.4, derived from the same bytes: exemplars, `# UNIT` and `# EOF` dropped,
//! and counter families renamed to their `_total` sample name, which is what 0.0.4 expects.

use std::time::SystemTime;

use prometheus_client::registry::Registry;

use super::native::NativeBuckets;
use super::{HistogramMode, TargetLabels};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    Text,
    /// The Prometheus protobuf format, length-delimited `MetricFamily` messages: the only
    /// one that carries native histograms. Prometheus asks for it first when native
    /// histograms are on (2.x `--enable-feature=native-histograms`, 3.x `scrape_protocols`).
    Protobuf,
}

impl Format {
    /// Pick the format from an `Accept` header: of the media ranges it lists, the one with
    /// the highest `q` that names a format we write (the first of equals), as HTTP content
    /// negotiation does. Prometheus 2.x with native histograms lists protobuf first
    /// (q=0.7 above OpenMetrics' 0.6); 3.x weighs its `scrape_protocols` in the order given.
    /// Protobuf counts only as the delimited `MetricFamily` stream Prometheus asks for.
    /// Without a match (curl, promtool, `*/*`) the classic text format.
    pub fn negotiate(accept: Option<&str>) -> Self {
        let mut best: Option<(f64, Self)> = None;
        for range in accept.unwrap_or_default().split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let mut q = 1.0;
            let (mut proto, mut encoding) = (None, None);
            for param in parts {
                let Some((name, value)) = param.split_once('=') else {
                    continue;
                };
                let value = value.trim().trim_matches('"');
                match name.trim().to_ascii_lowercase().as_str() {
                    "q" => {
                        q = value
                            .parse()
                            .ok()
                            .filter(|q: &f64| (0.0..=1.0).contains(q))
                            .unwrap_or(0.0)
                    }
                    "proto" => proto = Some(value.to_owned()),
                    "encoding" => encoding = Some(value.to_owned()),
                    _ => {}
                }
            }
            let format = match media.as_str() {
                "application/vnd.google.protobuf"
                    if proto.as_deref() == Some("io.prometheus.client.MetricFamily")
                        && encoding.as_deref().is_none_or(|e| e == "delimited") =>
                {
                    Self::Protobuf
                }
                "application/openmetrics-text" => Self::OpenMetrics,
                "text/plain" => Self::Text,
                _ => continue,
            };
            if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
                best = Some((q, format));
            }
        }
        best.map_or(Self::Text, |(_, format)| format)
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Self::Text => "text/plain; version=0.0.4; charset=utf-8",
            Self::Protobuf => {
                "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
            }
        }
    }
}

/// A per-target histogram's series (family name, labels) as encoded in this scrape: its
/// native buckets as they were when its classic part was encoded (`None` for a family
/// without them), and when it was made.
pub type DualOf<'a> =
    &'a dyn Fn(&str, &TargetLabels) -> Option<(Option<NativeBuckets>, SystemTime)>;

/// When a target's series were made, by its labels.
pub type BuiltOf<'a> = &'a dyn Fn(&TargetLabels) -> Option<SystemTime>;

pub fn encode(
    registry: &Registry,
    format: Format,
    mode: HistogramMode,
    dual: DualOf<'_>,
    built: BuiltOf<'_>,
) -> Result<Vec<u8>, std::fmt::Error> {
    if format == Format::Protobuf {
        return encode_protobuf(registry, mode, dual, built);
    }
    let mut open_metrics = String::with_capacity(16 * 1024);
    prometheus_client::encoding::text::encode(&mut open_metrics, registry)?;
    Ok(match format {
        Format::Text => to_text_format(&open_metrics),
        _ => open_metrics,
    }
    .into_bytes())
}

/// prometheus-client's protobuf encoding, with each per-target histogram's native buckets
/// added to its classic ones (and their exemplars) in the same histogram message, from the
/// copy made when its classic part was encoded (so count, sum and buckets are one
/// snapshot: `super::dual`), and its start timestamp.
/// In `native` mode the classic buckets go and their exemplars move to the histogram's own
/// exemplar list (read by Prometheus 2.50 and later); in `both`, Prometheus reads a native
/// histogram's exemplars from its classic buckets.
fn encode_protobuf(
    registry: &Registry,
    mode: HistogramMode,
    dual: DualOf<'_>,
    built: BuiltOf<'_>,
) -> Result<Vec<u8>, std::fmt::Error> {
    use prometheus_client::encoding::prometheus_protobuf::{encode, prometheus_data_model};
    use prost::Message;
    let mut families = {
        let _keep = super::dual::keeping_native();
        encode(registry)?
    };
    for family in &mut families {
        for metric in &mut family.metric {
            let labels = TargetLabels::new(
                metric
                    .label
                    .iter()
                    .map(|l| (l.name.clone(), l.value.clone()))
                    .collect(),
            );
            if let Some(counter) = metric.counter.as_mut() {
                counter.start_timestamp = target_built(&labels, built).map(Into::into);
            }
            let Some(histogram) = metric.histogram.as_mut() else {
                continue;
            };
            let Some((buckets, created)) = dual(&family.name, &labels) else {
                histogram.start_timestamp = target_built(&labels, built).map(Into::into);
                continue;
            };
            histogram.start_timestamp = Some(created.into());
            let Some(buckets) = buckets.filter(|_| mode != HistogramMode::Classic) else {
                continue;
            };
            if buckets.count() != histogram.sample_count {
                // Never sent: Prometheus would reject the whole scrape. `super::dual`
                // makes it impossible; this keeps it so if that ever breaks.
                tracing::error!(
                    family = %family.name,
                    count = histogram.sample_count,
                    native = buckets.count(),
                    "a histogram's native buckets disagree with its count; sent classic only"
                );
                continue;
            }
            if mode == HistogramMode::Native {
                let classic = std::mem::take(&mut histogram.bucket);
                histogram.exemplars = classic.into_iter().filter_map(|b| b.exemplar).collect();
            }
            let (spans, deltas) = buckets.spans_and_deltas();
            histogram.schema = buckets.schema();
            histogram.zero_threshold = buckets.zero_threshold();
            histogram.zero_count = buckets.zero_count();
            histogram.positive_span = spans
                .into_iter()
                .map(|(offset, length)| prometheus_data_model::BucketSpan { offset, length })
                .collect();
            histogram.positive_delta = deltas;
        }
    }
    let mut out = Vec::with_capacity(64 * 1024);
    for family in families {
        family
            .encode_length_delimited(&mut out)
            .map_err(|_| std::fmt::Error)?;
    }
    Ok(out)
}

/// When the series of the target a per-target series belongs to were made: its labels
/// are the target's, then the family's own (`category`, `reason`, `slo`, …), so the longest
/// leading run of them that names a target does. A counter made later than its target (a
/// pair the canary opened) starts at 0 all the same, so the target's time is a true start.
fn target_built(labels: &TargetLabels, built: BuiltOf<'_>) -> Option<SystemTime> {
    let pairs = labels.pairs();
    (1..=pairs.len())
        .rev()
        .find_map(|n| built(&TargetLabels::new(pairs[..n].to_vec())))
}

fn to_text_format(open_metrics: &str) -> String {
    let mut out = String::with_capacity(open_metrics.len());
    let mut pending_help: Option<&str> = None;
    for line in open_metrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            pending_help = Some(rest);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), kind),
                "unknown" => (name.to_owned(), "untyped"),
                _ => (name.to_owned(), kind),
            };
            if let Some(help) = pending_help.take() {
                let text = help.split_once(' ').map_or("", |(_, text)| text);
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
        } else if line.starts_with('#') {
            // `# UNIT`, `# EOF`: OpenMetrics only.
        } else {
            out.push_str(strip_exemplar(line));
            out.push('\n');
        }
    }
    out
}

/// A sample line without its ` # {labels} value` exemplar suffix. Label values are quoted
/// and may contain `#`, so the label set is skipped with its quoting rules first.
fn strip_exemplar(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut i = 0;
    let mut in_labels = false;
    let mut in_quotes = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if in_quotes => i += 1,
            b'"' if in_labels => in_quotes = !in_quotes,
            b'{' if !in_quotes => in_labels = true,
            b'}' if !in_quotes => in_labels = false,
            b'#' if !in_labels && i > 0 && bytes[i - 1] == b' ' => {
                return line[..i - 1].trim_end();
            }
            _ => {}
        }
        i += 1;
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
        assert_eq!(Format::negotiate(None), Format::Text);
        // Prometheus 2.x with native histograms on: protobuf first, with no weight
        // (`scrape/scrape.go` `scrapeAcceptHeaderWithProtobuf`).
        let v2 = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(v2)), Format::Protobuf);
        // Prometheus 3.x, its proto-first `scrape_protocols`, each weighed by its place
        // (`scrape/scrape.go` `acceptHeader`, with the escaping of the text formats).
        let v3 = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(v3)), Format::Protobuf);
        // 3.x's default protocols without native histograms: OpenMetrics first.
        let v3_text = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(Format::negotiate(Some(v3_text)), Format::OpenMetrics);
        // The weight decides, not the order; spaces and case do not matter.
        let weighed = "application/openmetrics-text; version=1.0.0; q=0.5, Application/Vnd.Google.Protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; q=0.9";
        assert_eq!(Format::negotiate(Some(weighed)), Format::Protobuf);
        let text_first = "text/plain;version=0.0.4;q=0.9,application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.2";
        assert_eq!(Format::negotiate(Some(text_first)), Format::Text);
        // Protobuf we do not write (another message, text encoding) or refused (q=0).
        for other in [
            "application/vnd.google.protobuf;proto=other.Message;encoding=delimited",
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;q=0,text/plain;q=0.1",
            "application/vnd.google.protobuf;q=bad;proto=io.prometheus.client.MetricFamily",
        ] {
            assert_eq!(Format::negotiate(Some(other)), Format::Text, "{other}");
        }
    }

    #[test]
    fn open_metrics_to_classic_text() {
        let om = concat!(
            "# HELP x_requests Probes.\n",
            "# TYPE x_requests counter\n",
            "x_requests_total{target=\"a # {b}\"} 3\n",
            "# HELP x_ttft_seconds TTFT.\n",
            "# TYPE x_ttft_seconds histogram\n",
            "# UNIT x_ttft_seconds seconds\n",
            "x_ttft_seconds_bucket{le=\"0.1\"} 1 # {request_id=\"r-1\"} 0.05\n",
            "x_ttft_seconds_count 1\n",
            "# EOF\n",
        );
        let want = concat!(
            "# HELP x_requests_total Probes.\n",
            "# TYPE x_requests_total counter\n",
            "x_requests_total{target=\"a # {b}\"} 3\n",
            "# HELP x_ttft_seconds TTFT.\n",
            "# TYPE x_ttft_seconds histogram\n",
            "x_ttft_seconds_bucket{le=\"0.1\"} 1\n",
            "x_ttft_seconds_count 1\n",
        );
        assert_eq!(to_text_format(om), want);
    }
}
