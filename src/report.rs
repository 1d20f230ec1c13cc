//! Log lines for finished probes: one warning per failure (request id, category, cause),
//! one debug line per success. Text that came from the server is scrubbed of the target's
//! API key, in case an endpoint echoes credentials back in an error.

use crate::endpoint::Target;
use crate::error::ProbeError;
use crate::probe::ProbeReport;
use crate::record::Measurement;

/// `result` is the outcome inside `report`, already unpacked by the caller.
pub fn log_probe(
    target: &Target,
    request_id: &str,
    result: &Result<Measurement, ProbeError>,
    report: &ProbeReport,
) {
    let record = &report.record;
    let retried = report.retried;
    // Only when there are any: most targets send text alone.
    let media = (!report.media.is_empty()).then(|| report.media.to_string());
    let trace_id = record.trace.map(|t| t.trace_hex());
    let trace_id = trace_id.as_deref();
    match result {
        Ok(m) if m.buffered => tracing::info!(
            target = %target.id,
            request_id,
            trace_id,
            ttft_ms = m.ttft.map(ms),
            e2el_ms = ms(m.e2el),
            output_tokens = ?m.output_tokens,
            "the stream arrived in one read: something between the server and the probe buffers it, and a user sees nothing until the end"
        ),
        Ok(m) => tracing::debug!(
            target = %target.id,
            request_id,
            trace_id,
            ttft_ms = m.ttft.map(ms),
            tpot_ms = m.tpot.map(ms),
            e2el_ms = ms(m.e2el),
            output_tokens = ?m.output_tokens,
            prompt_tokens = m.prompt_tokens,
            itl_observations = m.itl_observations(),
            tokens_timed_by = m.timed_by.as_str(),
            retried,
            media,
            server_prompt_ms = record.response.server_timings.and_then(|t| t.prompt_ms),
            server_tpot_ms = record.response.server_timings.and_then(|t| t.predicted_per_token_ms),
            "probe ok"
        ),
        Err(e) => {
            let cause = redact(&crate::error::chain(e), target);
            tracing::warn!(
                target = %target.id,
                request_id,
                trace_id,
                category = %e.category(),
                error = %cause,
                retried,
                media,
                "probe failed"
            );
            tracing::debug!(
                target = %target.id,
                request_id,
                events = record.events,
                bytes = record.bytes,
                error = %redact(&format!("{e:?}"), target),
                "probe failure detail"
            );
        }
    }
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `text` with the target's API key, if it appears, replaced.
pub(crate) fn redact(text: &str, target: &Target) -> String {
    match &target.api_key {
        Some(key) if text.contains(key.expose()) => text.replace(key.expose(), "[redacted]"),
        _ => text.to_owned(),
    }
}
