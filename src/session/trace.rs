//! A session's trace (docs/tracing.md): one sampling decision per session, every turn in
//! the session's trace under its span `session <model>`, each turn a client span with its
//! kind and verdict, a control request a turn span too. Apart from the turns, which only
//! call it.

use opentelemetry::KeyValue;

use super::Turn;
use crate::endpoint::Target;
use crate::otlp::CheckTrace;
use crate::probe::ProbeReport;
use crate::trace_context::TraceIds;

pub(super) struct SessionTrace {
    trace: CheckTrace,
    turns: i64,
    /// The last turn judged, and its verdict: what ended a failed session.
    last: Option<(Turn, &'static str)>,
}

impl SessionTrace {
    pub(super) fn new(ctx: &crate::scheduler::Context, target: &Target) -> Self {
        let name = format!("session {}", target.model);
        let result = "inferprobe.session.result";
        Self {
            trace: CheckTrace::new(ctx.spans.clone(), ctx.sample(), target, name, result),
            turns: 0,
            last: None,
        }
    }

    /// The session's script id, on its span.
    pub(super) fn begin(&mut self, id: &str) {
        self.trace
            .set(KeyValue::new("inferprobe.session.id", id.to_owned()));
        self.trace
            .set(KeyValue::new("gen_ai.conversation.id", id.to_owned()));
    }

    /// The ids the next request sends.
    pub(super) fn next(&self) -> TraceIds {
        self.trace.next()
    }

    /// A turn sent (finished or cut): its span.
    pub(super) fn turn(
        &mut self,
        target: &Target,
        request_id: &str,
        report: &ProbeReport,
        turn: Turn,
    ) -> Option<usize> {
        self.turns += 1;
        let kind = KeyValue::new("inferprobe.session.turn", turn.as_str());
        self.trace.sent(target, request_id, report, vec![kind])
    }

    /// The control request sent after a refused history.
    pub(super) fn control(&mut self, target: &Target, request_id: &str, report: &ProbeReport) {
        let control = KeyValue::new("inferprobe.session.control", true);
        self.trace.sent(target, request_id, report, vec![control]);
    }

    /// A turn's verdict, on its span.
    pub(super) fn judged(&mut self, span: Option<usize>, turn: Turn, result: &'static str) {
        self.last = Some((turn, result));
        let result = KeyValue::new("inferprobe.session.result", result);
        self.trace.annotate(span, vec![result]);
    }

    /// The session ran to its end (`complete`) or a turn ended it.
    pub(super) fn finish(mut self, complete: bool) {
        let error = match (complete, self.last) {
            (true, _) => None,
            (false, Some((turn, result))) => Some(format!("the {} turn: {result}", turn.as_str())),
            (false, None) => Some("ended before its first turn".to_owned()),
        };
        let result = if complete { "complete" } else { "failed" };
        self.trace.finish(result, error);
    }
}

impl Drop for SessionTrace {
    /// Finished or cut short, the session's span says how many turns it sent.
    fn drop(&mut self) {
        self.trace
            .set(KeyValue::new("inferprobe.session.turns", self.turns));
    }
}
