//! A probe's deadlines: the first token's, then the longest silence between events, both
//! capped by the whole request's. Kept apart from the network loop so the rule that picks
//! the next one is read (and tested) on its own.

use tokio::time::Instant;

use crate::endpoint::Timeouts;
use crate::error::ProbeError;
use crate::record::RequestRecord;

/// The deadlines of one probe, from its t0.
pub(super) struct Deadlines {
    pub(super) timeouts: Timeouts,
    ttft: Instant,
    pub(super) total: Instant,
}

impl Deadlines {
    /// Without a stream there is no first token: only the total deadline applies.
    pub(super) fn new(start: Instant, timeouts: Timeouts, streams: bool) -> Self {
        let total = start + timeouts.request;
        Self {
            timeouts,
            ttft: if streams {
                start + timeouts.ttft
            } else {
                total
            },
            total,
        }
    }

    /// The next deadline, and the error if it passes first.
    pub(super) fn next(
        &self,
        record: &RequestRecord,
        last_event: Instant,
    ) -> (Instant, ProbeError) {
        let (soon, error) = if record.has_token() {
            let stall = last_event + self.timeouts.stall;
            (stall, ProbeError::StallTimeout(self.timeouts.stall))
        } else {
            (self.ttft, ProbeError::TtftTimeout(self.timeouts.ttft))
        };
        if soon <= self.total {
            (soon, error)
        } else {
            (
                self.total,
                ProbeError::RequestTimeout(self.timeouts.request),
            )
        }
    }
}
