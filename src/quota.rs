//! What a response's headers say about the caller's quota (docs/metrics.md, "Rate-limit
//! headroom"): hosted APIs and gateways send how many requests and tokens are left and when
//! the window resets, so an SRE sees a quota run down before the first 429. Read from the
//! response head of every workload probe, whatever its status; nothing here is on the
//! per-chunk path.
//!
//! The dialects: OpenAI's (`x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, resets
//! as Go durations such as `6m0s`; Azure OpenAI and LiteLLM send the same names),
//! Anthropic's (`anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
//! remaining,reset}`, resets as RFC 3339 times), the IETF draft's `RateLimit-Limit`,
//! `-Remaining` and `-Reset` (delta seconds; its unit is the server's, `quota` here), and
//! `Retry-After` (seconds or an HTTP date). A header that does not parse is left out, never
//! read as 0: a made-up empty quota would page.

use std::time::{Duration, SystemTime};

use http::HeaderMap;

/// What a quota counts: a bounded label value.
pub const RESOURCES: [&str; 5] = [
    "requests",
    "tokens",
    "input_tokens",
    "output_tokens",
    "quota",
];

/// One resource's window as a response reported it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Window {
    pub remaining: Option<f64>,
    pub limit: Option<f64>,
    /// When the window resets, as Unix seconds.
    pub reset_at: Option<f64>,
}

/// The quota a response reported: per resource of [`RESOURCES`] (same order), and the
/// `Retry-After` it asked for, in seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Quota {
    pub windows: [Option<Window>; 5],
    pub retry_after: Option<f64>,
}

impl Quota {
    /// The quota in `headers`, received at `now`; `None` when they say nothing of it.
    pub fn read(headers: &HeaderMap, now: SystemTime) -> Option<Self> {
        // Most servers send none of these: one pass over the names, no allocation.
        let said = headers.keys().any(|k| {
            let name = k.as_str();
            name.starts_with("x-ratelimit-")
                || name.starts_with("anthropic-ratelimit-")
                || name.starts_with("ratelimit-")
                || name == "retry-after"
        });
        if !said {
            return None;
        }
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        let number = |name: &str| text(name).and_then(count);
        let unix = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs_f64())
        };
        let after = |d: Duration| unix(now.checked_add(d)?);
        let mut quota = Self::default();
        for (i, resource) in RESOURCES.iter().enumerate() {
            let mut window = Window::default();
            match *resource {
                "requests" | "tokens" => {
                    let openai = |field: &str| format!("x-ratelimit-{field}-{resource}");
                    window.remaining = number(&openai("remaining"));
                    window.limit = number(&openai("limit"));
                    window.reset_at = text(&openai("reset")).and_then(go_duration).and_then(after);
                }
                "quota" => {
                    window.remaining = number("ratelimit-remaining");
                    window.limit = number("ratelimit-limit");
                    window.reset_at = text("ratelimit-reset")
                        .and_then(|s| s.parse::<u64>().ok())
                        .and_then(|s| after(Duration::from_secs(s)));
                }
                _ => {}
            }
            let anthropic =
                |field: &str| format!("anthropic-ratelimit-{}-{field}", resource.replace('_', "-"));
            if *resource != "quota" {
                window.remaining = window.remaining.or_else(|| number(&anthropic("remaining")));
                window.limit = window.limit.or_else(|| number(&anthropic("limit")));
                window.reset_at = window.reset_at.or_else(|| {
                    let at = text(&anthropic("reset"))?;
                    unix(humantime::parse_rfc3339_weak(at).ok()?)
                });
            }
            if window != Window::default() {
                quota.windows[i] = Some(window);
            }
        }
        quota.retry_after = text("retry-after").and_then(|s| match s.parse::<u64>() {
            Ok(seconds) => Some(seconds as f64),
            Err(_) => {
                let at = httpdate::parse_http_date(s).ok()?;
                Some(at.duration_since(now).unwrap_or_default().as_secs_f64())
            }
        });
        (quota != Self::default()).then_some(quota)
    }
}

/// A count: a non-negative integer (a gateway's `-1` for "unlimited" is no count).
fn count(text: &str) -> Option<f64> {
    text.parse::<u64>().ok().map(|n| n as f64)
}

/// A Go duration as OpenAI writes resets: `1s`, `6m0s`, `20ms`, `1h2m3.5s`; a bare number
/// is seconds (LiteLLM).
fn go_duration(text: &str) -> Option<Duration> {
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let mut total = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&n| n > 0)?;
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    const NOW: u64 = 1_800_000_000;

    fn at(pairs: &[(&str, &str)]) -> Option<Quota> {
        Quota::read(
            &headers(pairs),
            SystemTime::UNIX_EPOCH + Duration::from_secs(NOW),
        )
    }

    #[test]
    fn openai_headers_as_the_api_reference_shows_them() {
        let q = at(&[
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-limit-tokens", "150000"),
            ("x-ratelimit-remaining-requests", "59"),
            ("x-ratelimit-remaining-tokens", "149984"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ])
        .unwrap();
        let requests = q.windows[0].unwrap();
        assert_eq!(
            (requests.remaining, requests.limit),
            (Some(59.0), Some(60.0))
        );
        assert_eq!(requests.reset_at, Some(NOW as f64 + 1.0));
        let tokens = q.windows[1].unwrap();
        assert_eq!(tokens.reset_at, Some(NOW as f64 + 360.0));
        assert_eq!(q.windows[2..], [None, None, None]);
        assert_eq!(q.retry_after, None);
    }

    #[test]
    fn anthropic_headers_and_a_retry_after() {
        let q = at(&[
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2027-01-15T08:00:30Z"),
            ("anthropic-ratelimit-input-tokens-remaining", "39000"),
            ("retry-after", "30"),
        ])
        .unwrap();
        let requests = q.windows[0].unwrap();
        assert_eq!(requests.remaining, Some(0.0), "an empty quota is a real 0");
        assert_eq!(requests.reset_at, Some(1_800_000_030.0));
        assert_eq!(q.windows[2].unwrap().remaining, Some(39000.0));
        assert_eq!(q.retry_after, Some(30.0));
    }

    #[test]
    fn what_does_not_parse_is_left_out_never_zero() {
        assert_eq!(at(&[]), None);
        assert_eq!(at(&[("content-type", "text/event-stream")]), None);
        for bad in ["-1", "lots", "", "1e9", "NaN"] {
            assert_eq!(
                at(&[("x-ratelimit-remaining-requests", bad)]),
                None,
                "{bad}"
            );
        }
        for bad in [
            "soon",
            "1x",
            "m",
            "1.2.3s",
            "-1s",
            "1e30",
            "9999999999999999999999999h",
        ] {
            assert_eq!(at(&[("x-ratelimit-reset-tokens", bad)]), None, "{bad}");
        }
        assert_eq!(at(&[("retry-after", "tomorrow")]), None);
        let q = at(&[("x-ratelimit-reset-tokens", "1h2m3.5s")]).unwrap();
        assert_eq!(q.windows[1].unwrap().reset_at, Some(NOW as f64 + 3723.5));
        let q = at(&[("x-ratelimit-reset-requests", "20ms")]).unwrap();
        assert_eq!(q.windows[0].unwrap().reset_at, Some(NOW as f64 + 0.02));
        let q = at(&[("retry-after", "Fri, 15 Jan 2027 08:01:00 GMT")]).unwrap();
        assert!(q.retry_after.is_some());
        let q = at(&[("ratelimit-remaining", "7"), ("ratelimit-reset", "12")]).unwrap();
        assert_eq!(q.windows[4].unwrap().remaining, Some(7.0));
    }
}
