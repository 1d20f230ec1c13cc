//! `--rate-limit N`: a hosted API's request quota, N requests a window (a minute unless
//! `--rate-limit-window` says), as OpenAI and Anthropic report it on every response
//! (`x-ratelimit-*-requests`; `anthropic-ratelimit-requests-*` in Anthropic's format) and
//! enforce it: a request past it gets a 429 with `Retry-After`. What a probe reads to show
//! a quota running down before the first 429 (docs/metrics.md, "Rate-limit headroom").

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, header};
use tokio::time::Instant;

use super::Body;
use super::request::Dialect;

#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct RateLimitFlags {
    /// Requests a window (HTTP 429 past it), reported on every response as hosted APIs do.
    #[arg(long, value_name = "REQUESTS", value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit: Option<u32>,
    /// The rate limit's window.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub rate_limit_window: Duration,
}

impl Default for RateLimitFlags {
    fn default() -> Self {
        Self {
            rate_limit: None,
            rate_limit_window: Duration::from_secs(60),
        }
    }
}

/// The quota's state: when the window started and the requests it admitted.
pub struct Limiter {
    limit: u32,
    window: Duration,
    state: Mutex<(Instant, u32)>,
}

impl Limiter {
    pub fn new(flags: &RateLimitFlags) -> Option<Self> {
        Some(Self {
            limit: flags.rate_limit?,
            window: flags.rate_limit_window.max(Duration::from_millis(1)),
            state: Mutex::new((Instant::now(), 0)),
        })
    }

    /// Admit one request: the headers its response carries, or the 429 it gets.
    pub fn admit(&self, dialect: Dialect) -> Result<HeaderMap, Box<Response<Body>>> {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if now.duration_since(state.0) >= self.window {
            *state = (now, 0);
        }
        let left = self.window.saturating_sub(now.duration_since(state.0));
        let admitted = state.1 < self.limit;
        if admitted {
            state.1 += 1;
        }
        let headers = self.headers(dialect, self.limit - state.1, left);
        if admitted {
            return Ok(headers);
        }
        let mut refused =
            super::respond::error(StatusCode::TOO_MANY_REQUESTS, "simulated quota exhausted");
        refused.headers_mut().extend(headers);
        let seconds = left.as_secs() + u64::from(left.subsec_nanos() > 0);
        refused
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        Err(Box::new(refused))
    }

    fn headers(&self, dialect: Dialect, remaining: u32, left: Duration) -> HeaderMap {
        let mut map = HeaderMap::new();
        let mut put = |name: &'static str, value: String| {
            if let Ok(value) = HeaderValue::from_str(&value) {
                map.insert(HeaderName::from_static(name), value);
            }
        };
        if dialect == Dialect::Anthropic {
            let reset = humantime::format_rfc3339_seconds(SystemTime::now() + left);
            put("anthropic-ratelimit-requests-limit", self.limit.to_string());
            put(
                "anthropic-ratelimit-requests-remaining",
                remaining.to_string(),
            );
            put("anthropic-ratelimit-requests-reset", reset.to_string());
        } else {
            put("x-ratelimit-limit-requests", self.limit.to_string());
            put("x-ratelimit-remaining-requests", remaining.to_string());
            put(
                "x-ratelimit-reset-requests",
                format!("{:.3}s", left.as_secs_f64()),
            );
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quota_runs_down_then_refuses_until_the_window_turns() {
        let flags = RateLimitFlags {
            rate_limit: Some(2),
            rate_limit_window: Duration::from_secs(60),
        };
        let limiter = Limiter::new(&flags).unwrap();
        let first = limiter.admit(Dialect::Chat).unwrap();
        assert_eq!(first["x-ratelimit-remaining-requests"], "1");
        assert_eq!(first["x-ratelimit-limit-requests"], "2");
        let second = limiter.admit(Dialect::Anthropic).unwrap();
        assert_eq!(second["anthropic-ratelimit-requests-remaining"], "0");
        let refused = limiter.admit(Dialect::Chat).unwrap_err();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()["x-ratelimit-remaining-requests"], "0");
        assert_eq!(refused.headers()[header::RETRY_AFTER], "60");
        assert!(Limiter::new(&RateLimitFlags::default()).is_none());
    }
}
