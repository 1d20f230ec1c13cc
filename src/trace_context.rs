//! W3C Trace Context for probes: every probe starts a new trace (a session check's turns
//! and a prefix-cache pair share one, see docs/tracing.md), sends it to the server in
//! `traceparent` (sampled), and carries the trace id everywhere its request id goes (log
//! line, status page, exemplars, bench's detailed results, the exported span), so a slow
//! probe leads to the server's own span of the same request (vLLM continues the trace).

use std::fmt;

/// A probe's trace and its own (client) span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceIds {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// The sampled flag: the server should record it, and inferprobe exports its span.
    pub sampled: bool,
}

impl TraceIds {
    /// New random ids; all-zero ids are invalid in W3C Trace Context, so never drawn.
    pub fn random(sampled: bool) -> Self {
        let mut trace_id = rand::random::<[u8; 16]>();
        let mut span_id = rand::random::<[u8; 8]>();
        trace_id[15] |= u8::from(trace_id == [0; 16]);
        span_id[7] |= u8::from(span_id == [0; 8]);
        Self {
            trace_id,
            span_id,
            sampled,
        }
    }

    /// A span of the same trace, as sampled: a session's turn under the session's span.
    pub fn child(&self) -> Self {
        Self {
            span_id: Self::random(self.sampled).span_id,
            ..*self
        }
    }

    /// `00-<trace id>-<span id>-<flags>`: version 00, flags 01 when sampled.
    pub fn traceparent(&self) -> String {
        let flags = if self.sampled { "01" } else { "00" };
        format!("00-{}-{}-{flags}", hex(&self.trace_id), hex(&self.span_id))
    }

    /// The 32 lowercase hex digits Grafana's exemplar-to-trace link reads as `trace_id`.
    pub fn trace_hex(&self) -> String {
        hex(&self.trace_id)
    }
}

impl fmt::Display for TraceIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.trace_id))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A `tracestate` value as the spec allows it: list members `key=value`, comma-separated,
/// at most 32, printable ASCII without `,` or `=` in values, at most 512 characters.
pub fn check_tracestate(value: &str) -> Result<(), String> {
    if value.len() > 512 {
        return Err("is longer than 512 characters".into());
    }
    let members: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect();
    if members.is_empty() || members.len() > 32 {
        return Err("must hold 1 to 32 `key=value` members".into());
    }
    for member in members {
        let Some((key, val)) = member.split_once('=') else {
            return Err(format!("`{member}` is not `key=value`"));
        };
        let key_ok = !key.is_empty()
            && key.len() <= 256
            && key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-*/@".contains(&b));
        let value_ok = !val.is_empty()
            && val.len() <= 256
            && val
                .bytes()
                .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=');
        if !key_ok || !value_ok {
            return Err(format!("`{member}` is not a valid list member"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_version_00_sampled_with_lowercase_hex() {
        let mut ids = TraceIds {
            trace_id: [0xab; 16],
            span_id: [0x01; 8],
            sampled: true,
        };
        assert_eq!(
            ids.traceparent(),
            "00-abababababababababababababababab-0101010101010101-01"
        );
        ids.sampled = false;
        assert!(ids.traceparent().ends_with("-00"));
        let random = TraceIds::random(true);
        assert_ne!(random.trace_id, [0; 16]);
        assert_ne!(random, TraceIds::random(true));
        assert_eq!(random.trace_hex().len(), 32);
        let child = random.child();
        assert_eq!((child.trace_id, child.sampled), (random.trace_id, true));
        assert_ne!(child.span_id, random.span_id);
    }

    #[test]
    fn tracestate_follows_the_spec() {
        assert!(check_tracestate("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7").is_ok());
        for bad in ["", "novalue", "Upper=x", "a=b=c", "a=", &"k=v,".repeat(40)] {
            assert!(check_tracestate(bad).is_err(), "{bad:?}");
        }
    }
}
