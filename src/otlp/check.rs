//! A check of several requests as one trace: a session's turns, a prefix-cache pair. The
//! check's span (kind internal) is the root; each request is a client span under it (the
//! one [`probe_span`] builds), whose id the request's `traceparent` carries, so the
//! server's span of the request is its child.
//!
//! The spans are kept until the check ends, then offered together, root first, all or
//! none: a root dropped from a full queue, or never sent because the daemon stopped mid
//! check, would leave children (inferprobe's, and the server's under them) without it. A
//! check dropped before it finished (shutdown between turns, a probe cut) still exports
//! the root over what it sent, its result `cut`: those requests' server spans arrive
//! anyway. A check that sent nothing sampled exports nothing.

use std::borrow::Cow;

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

use super::{Spans, probe_span};
use crate::endpoint::Target;
use crate::error::ProbeError;
use crate::probe::{Outcome, ProbeReport};
use crate::trace_context::TraceIds;

/// One check's trace, exported when it is dropped.
#[derive(Debug)]
pub struct CheckTrace {
    spans: Option<Spans>,
    /// The trace, and the root's own span id.
    root: TraceIds,
    name: String,
    attributes: Vec<KeyValue>,
    /// The attribute that says how the check ended; `cut` until [`Self::finish`].
    result_key: &'static str,
    result: Cow<'static, str>,
    status: Status,
    children: Vec<SpanData>,
}

impl CheckTrace {
    /// `sampled` is the check's one sampling decision ([`crate::scheduler::Context::sample`]):
    /// every request of it sends the same flag. Without `spans` nothing is exported.
    pub fn new(
        spans: Option<Spans>,
        sampled: bool,
        target: &Target,
        name: String,
        result_key: &'static str,
    ) -> Self {
        let mut attributes = vec![
            KeyValue::new("gen_ai.request.model", target.model.clone()),
            KeyValue::new("inferprobe.target", target.name.clone()),
        ];
        for (label, value) in &target.labels {
            attributes.push(KeyValue::new(
                format!("inferprobe.label.{label}"),
                value.clone(),
            ));
        }
        Self {
            spans,
            root: TraceIds::random(sampled),
            name,
            attributes,
            result_key,
            result: Cow::Borrowed("cut"),
            status: Status::Unset,
            children: Vec::new(),
        }
    }

    /// An attribute of the root span.
    pub fn set(&mut self, attribute: KeyValue) {
        self.attributes.push(attribute);
    }

    /// The ids the next request sends: the check's trace, a span of its own.
    pub fn next(&self) -> TraceIds {
        self.root.child()
    }

    /// A request sent: its span, as a child of the root, with `attributes`. A request cut
    /// by shutdown has one too (status error `cut by shutdown`): the server received its
    /// `traceparent`. Returns the span's index for [`Self::annotate`].
    pub fn sent(
        &mut self,
        target: &Target,
        request_id: &str,
        report: &ProbeReport,
        attributes: Vec<KeyValue>,
    ) -> Option<usize> {
        // Without an exporter no span is built, only to be dropped.
        self.spans.as_ref()?;
        let cut = Err(ProbeError::Other("cut by shutdown".into()));
        let result = match &report.outcome {
            Outcome::Finished(result) => result,
            Outcome::Cut => &cut,
        };
        let mut span = probe_span(target, request_id, report, result, false)?;
        if matches!(report.outcome, Outcome::Cut) {
            for kv in &mut span.attributes {
                if kv.key.as_str() == "error.type" {
                    kv.value = "cut".into();
                }
            }
        }
        span.parent_span_id = SpanId::from_bytes(self.root.span_id);
        span.attributes.extend(attributes);
        self.children.push(span);
        Some(self.children.len() - 1)
    }

    /// More attributes of a request's span, once the check has judged it.
    pub fn annotate(&mut self, child: Option<usize>, attributes: Vec<KeyValue>) {
        if let Some(span) = child.and_then(|i| self.children.get_mut(i)) {
            span.attributes.extend(attributes);
        }
    }

    /// How the check ended; `error`: the root's status message.
    pub fn finish(&mut self, result: impl Into<Cow<'static, str>>, error: Option<String>) {
        self.result = result.into();
        if let Some(message) = error {
            self.status = Status::error(message);
        }
    }

    /// The root over its children, from the first one's start to the last one's end.
    fn root_span(&mut self) -> Option<SpanData> {
        let start = self.children.iter().map(|s| s.start_time).min()?;
        let end = self.children.iter().map(|s| s.end_time).max()?;
        let mut attributes = std::mem::take(&mut self.attributes);
        attributes.push(KeyValue::new(self.result_key, self.result.clone()));
        Some(SpanData {
            span_context: SpanContext::new(
                TraceId::from_bytes(self.root.trace_id),
                SpanId::from_bytes(self.root.span_id),
                TraceFlags::SAMPLED,
                false,
                TraceState::NONE,
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Owned(std::mem::take(&mut self.name)),
            start_time: start,
            end_time: end,
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: std::mem::replace(&mut self.status, Status::Unset),
            instrumentation_scope: InstrumentationScope::builder("inferprobe")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        })
    }
}

impl Drop for CheckTrace {
    fn drop(&mut self) {
        let Some(spans) = self.spans.take() else {
            return;
        };
        if !self.root.sampled {
            return;
        }
        let Some(root) = self.root_span() else {
            return;
        };
        let mut all = Vec::with_capacity(self.children.len() + 1);
        all.push(root);
        all.append(&mut self.children);
        spans.offer_all(all);
    }
}
