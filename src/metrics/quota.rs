//! The rate-limit headroom a target's responses reported ([`crate::quota`]): per resource,
//! the remaining count, the limit and when the window resets, as last seen; and the last
//! `Retry-After`. A series is made on the first response that says: a server that never
//! sends such headers has none, not a 0 that would read as a spent quota.

use prometheus_client::registry::Registry;

use super::{F64Gauge, LabeledFamily, TargetLabels, labels};
use crate::quota::{Quota, RESOURCES};

type ByResource = (TargetLabels, [(&'static str, &'static str); 1]);

#[derive(Clone, Debug, Default)]
pub(super) struct QuotaFamilies {
    remaining: LabeledFamily<ByResource, F64Gauge>,
    limit: LabeledFamily<ByResource, F64Gauge>,
    reset: LabeledFamily<ByResource, F64Gauge>,
    retry_after: LabeledFamily<TargetLabels, F64Gauge>,
}

impl QuotaFamilies {
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "ratelimit_remaining",
            "What the target's last response said is left of its rate limit, by resource (requests, tokens, input_tokens, output_tokens; quota: the IETF RateLimit-Remaining header, in the server's unit): OpenAI's x-ratelimit-remaining-*, Anthropic's anthropic-ratelimit-*-remaining. Made on the first response that says",
            self.remaining.clone(),
        );
        r.register(
            "ratelimit_limit",
            "The rate limit the target's last response reported, by resource (x-ratelimit-limit-*, anthropic-ratelimit-*-limit, RateLimit-Limit)",
            self.limit.clone(),
        );
        r.register(
            "ratelimit_reset_timestamp_seconds",
            "When the rate-limit window the target's last response reported resets, by resource, as Unix seconds (x-ratelimit-reset-* durations added to the response's time, anthropic-ratelimit-*-reset times, RateLimit-Reset)",
            self.reset.clone(),
        );
        r.register(
            "retry_after_seconds",
            "The Retry-After the target's last response that sent one asked for (a 429, 529 or 503), in seconds",
            self.retry_after.clone(),
        );
    }

    pub(super) fn remove(&self, target: &TargetLabels) {
        for family in [&self.remaining, &self.limit, &self.reset] {
            family.retain(|(t, _)| t != target);
        }
        self.retry_after.remove(target);
    }

    /// Set what `quota` reported for `target`.
    pub(super) fn set(&self, target: &TargetLabels, quota: &Quota) {
        for (resource, window) in RESOURCES.iter().zip(&quota.windows) {
            let Some(window) = window else { continue };
            let key = || (target.clone(), [(labels::RESOURCE, *resource)]);
            let values = [
                (&self.remaining, window.remaining),
                (&self.limit, window.limit),
                (&self.reset, window.reset_at),
            ];
            for (family, value) in values {
                if let Some(value) = value {
                    family.get_or_insert(key(), F64Gauge::default).set(value);
                }
            }
        }
        if let Some(seconds) = quota.retry_after {
            self.retry_after
                .get_or_insert(target.clone(), F64Gauge::default)
                .set(seconds);
        }
    }
}
