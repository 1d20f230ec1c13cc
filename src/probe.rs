//! One probe: send the request, stream the response, stamp instants into a
//! [`RequestRecord`], and enforce the TTFT / stall / total deadlines.
//!
//! t0 is taken after the prompt is built and the body serialized, just before the request
//! is handed to the HTTP client, so client-side preparation is never part of TTFT. All
//! events decoded from one read share that read's arrival instant: they arrived together.
//! Deadlines: before the first token the TTFT deadline applies, after it the stall deadline
//! (time since the last event that was not a keep-alive); the total deadline applies
//! throughout. When data and a deadline are both ready, data wins: our own scheduling delay
//! is not the server's fault.

use std::sync::Arc;
use std::time::Duration;

use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE};
use prometheus_client::metrics::counter::Counter;
use tokio::time::{Instant, sleep_until, timeout_at};
use tokio_util::sync::CancellationToken;

use crate::backend::{Backend, RequestBody};
use crate::endpoint::{ConnectionMode, Target};
use crate::error::{ProbeError, closed_before_response};
use crate::media::MediaSummary;
use crate::metrics::connection::ConnectionSeries;
use crate::prompt::Prompt;
use crate::quota::Quota;
use crate::record::{Measurement, RequestRecord};
use crate::trace_context::TraceIds;

mod body;
mod deadlines;
mod served_by;
mod stream;
use body::{describe_body, drain, non_stream_error, read_capped};
use deadlines::Deadlines;
pub use served_by::served_by;
pub use stream::StreamReader;

/// `/v1/models` on the target's server: the path before the target's `/v1/` (a gateway's
/// prefix), or the root where its path has none.
fn models_url(url: &reqwest::Url) -> reqwest::Url {
    let mut url = url.clone();
    let path = url.path().to_owned();
    let base = path.find("/v1/").map_or("", |at| &path[..at]);
    url.set_path(&format!("{base}/v1/models"));
    url.set_query(None);
    url
}

/// `model`'s entry in a `/v1/models` answer, else its first (see [`Prober::model_entry`]).
fn model_entry(models: serde_json::Value, model: &str) -> Option<serde_json::Value> {
    let serde_json::Value::Object(mut models) = models else {
        return None;
    };
    let Some(serde_json::Value::Array(mut data)) = models.remove("data") else {
        return None;
    };
    let at = data
        .iter()
        .position(|m| m.get("id").and_then(serde_json::Value::as_str) == Some(model))
        .unwrap_or(0);
    (at < data.len()).then(|| data.swap_remove(at))
}

/// After `[DONE]` the rest of the body is read briefly so the connection can be reused.
const DRAIN_AFTER_DONE: Duration = Duration::from_secs(1);

/// What one probe produced.
#[derive(Debug)]
pub enum Outcome {
    Finished(Result<Measurement, ProbeError>),
    /// Stopped by a hard shutdown: neither a success nor the server's failure.
    Cut,
}

#[derive(Debug)]
pub struct ProbeReport {
    pub record: RequestRecord,
    pub outcome: Outcome,
    /// The request was sent twice (the keep-alive race, see [`Prober::probe`]); only the
    /// second attempt is in `record` and `outcome`.
    pub retried: bool,
    /// The images and videos it carried (for the log line and the status page).
    pub media: MediaSummary,
}

impl ProbeReport {
    /// Judge it as a workload probe of `target` (the stream's, `bench`'s, `/probe`'s): an
    /// answer that was reasoning alone, cut at its budget, is a failure its user felt,
    /// unless the target says otherwise (`reasoning_exhausted = "success"`). The checks'
    /// own prompts (canary, structured, prefix cache, sampler, sessions, adapters) judge
    /// such an answer their own way, often on a budget of a few tokens.
    pub fn judge_workload(mut self, target: &Target) -> Self {
        if let Outcome::Finished(Ok(measured)) = &self.outcome
            && target.reasoning_exhausted_fails
            && let Some(exhausted) = self.record.reasoning_exhausted(measured)
        {
            self.outcome = Outcome::Finished(Err(exhausted));
        }
        self
    }
}

enum Stop {
    Failed(ProbeError),
    /// The server closed a *reused* keep-alive connection before any response (see
    /// [`Prober::probe`]).
    Closed(ProbeError),
    Cut,
}

impl From<ProbeError> for Stop {
    fn from(e: ProbeError) -> Self {
        Self::Failed(e)
    }
}

/// Everything a target's probes share.
#[derive(Debug)]
pub struct Prober {
    pub target: Arc<Target>,
    pub(crate) backend: Arc<dyn Backend>,
    client: crate::client::Client,
    /// Which of the client's connections carried a response (and so may be reused).
    reused: crate::client::Reused,
    streams: bool,
    /// Signs or authorizes each request with a cloud's credentials, when the target uses them.
    authorizer: Option<crate::auth::Authorizer>,
}

impl Prober {
    /// `connections` counts the connections the target's client opens.
    pub fn new(
        target: Arc<Target>,
        connections: Counter,
    ) -> Result<Self, crate::client::BuildError> {
        Self::observed(target, ConnectionSeries::counting(connections))
    }

    /// A prober whose client records its connections in `series` (setup phases, the wait
    /// for headers, certificate expiry).
    pub fn observed(
        target: Arc<Target>,
        series: ConnectionSeries,
    ) -> Result<Self, crate::client::BuildError> {
        Ok(Self {
            backend: target.backend.backend(),
            client: crate::client::build(&target, series)?,
            reused: crate::client::Reused::default(),
            streams: target.backend.streams(),
            authorizer: target
                .credentials
                .as_ref()
                .map(crate::auth::Authorizer::new),
            target,
        })
    }

    /// The earliest notAfter of the chain its target last presented (Unix seconds).
    pub fn server_expiry(&self) -> Option<i64> {
        self.client.server_expiry()
    }

    /// The prober is started: its connection series are its own from now on.
    pub fn started(&self) {
        self.client.started();
    }

    /// Run one probe to completion, failure, or `abort`; its trace (if it sends one) sampled.
    pub async fn probe(
        &self,
        request_id: &str,
        prompt: &Prompt,
        abort: &CancellationToken,
    ) -> ProbeReport {
        self.probe_sampled(request_id, prompt, abort, true).await
    }

    /// [`Self::probe`], with the trace's sampled flag chosen by the caller (the trace
    /// exporter's sampling ratio).
    pub async fn probe_sampled(
        &self,
        request_id: &str,
        prompt: &Prompt,
        abort: &CancellationToken,
        sampled: bool,
    ) -> ProbeReport {
        let trace = self.target.trace_context.then(|| TraceIds::random(sampled));
        self.probe_with(request_id, prompt, abort, trace).await
    }

    /// [`Self::probe`] in a trace the caller began: a session's turns share its trace, each
    /// under a span of its own, and the caller exports the spans. Without trace context
    /// (`trace_context = false`) nothing is sent, and the report carries no trace.
    pub async fn probe_traced(
        &self,
        request_id: &str,
        prompt: &Prompt,
        abort: &CancellationToken,
        trace: TraceIds,
    ) -> ProbeReport {
        let trace = self.target.trace_context.then_some(trace);
        self.probe_with(request_id, prompt, abort, trace).await
    }

    async fn probe_with(
        &self,
        request_id: &str,
        prompt: &Prompt,
        abort: &CancellationToken,
        trace: Option<TraceIds>,
    ) -> ProbeReport {
        // A reused keep-alive connection the server closed just as the request went out
        // (keep-alive timeouts; llama.cpp closes after every stream) is the pool's artefact,
        // not the endpoint's: retry once, timed from the retry's own t0, and count it. A
        // connection the probe opened itself and the server dropped unanswered is the
        // endpoint failing, and so is anything in `connection = "fresh"` mode: never retried.
        if let Err(e) = &prompt.media {
            return ProbeReport {
                record: RequestRecord::new(Instant::now()),
                outcome: Outcome::Finished(Err(ProbeError::Other(format!(
                    "cannot build the request's images or videos: {e}"
                )))),
                retried: false,
                media: MediaSummary::default(),
            };
        }
        let mut retried = false;
        // One trace per probe: a retry is the same probe, sent again.
        loop {
            let mut request = self.build_request(request_id, prompt, trace.as_ref());
            // Credentials are fetched or refreshed here, before t0: never a measured wait.
            if let (Some(authorizer), Ok(request)) = (&self.authorizer, &mut request) {
                let outcome = tokio::select! {
                    biased;
                    () = abort.cancelled() => Some(Outcome::Cut),
                    r = timeout_at(Instant::now() + crate::auth::FETCH_TIMEOUT, authorizer.authorize(request)) => match r {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(Outcome::Finished(Err(e))),
                        Err(_) => Some(Outcome::Finished(Err(authorizer.timed_out()))),
                    },
                };
                if let Some(outcome) = outcome {
                    return ProbeReport {
                        record: RequestRecord::new(Instant::now()),
                        outcome,
                        retried,
                        media: MediaSummary::of(prompt.media()),
                    };
                }
            }
            let mut record = RequestRecord::new(Instant::now());
            record.trace = trace;
            let asked = prompt.greedy.is_some_and(|g| g.top_logprobs > 0)
                || prompt.sampled.is_some_and(|s| s.top_logprobs > 0);
            if asked && self.backend.reports_logprobs() {
                record.response.logprobs = Some(Default::default());
            }
            let result = match request {
                Ok(request) => self.exchange(request, &mut record, abort).await,
                Err(e) => Err(Stop::Failed(ProbeError::from_transport(e, false))),
            };
            let (record, outcome) = match result {
                Ok(()) => self.judge(prompt, record).await,
                Err(Stop::Closed(e)) if !retried => {
                    tracing::debug!(target = %self.target.id, request_id, error = %e,
                        "the server closed a reused connection before responding; retrying once");
                    retried = true;
                    continue;
                }
                Err(Stop::Failed(e) | Stop::Closed(e)) => (record, Outcome::Finished(Err(e))),
                Err(Stop::Cut) => (record, Outcome::Cut),
            };
            return ProbeReport {
                record,
                outcome,
                retried,
                media: MediaSummary::of(prompt.media()),
            };
        }
    }

    /// GET `url` with the target's headers and key, and read its JSON (at most 1 MiB, within
    /// the target's total timeout): [`Prober::model_entry`] reads `/v1/models` this way.
    /// The error says what went wrong, for the log.
    pub async fn get_json(&self, url: reqwest::Url) -> Result<serde_json::Value, String> {
        const MAX_BODY: usize = 1 << 20;
        let mut builder = self
            .client
            .http
            .get(url)
            .headers(self.target.headers.clone())
            .header(ACCEPT, "application/json");
        if let Some(key) = &self.target.api_key {
            for (name, value) in self.backend.authorize(key) {
                builder = builder.header(name, value);
            }
        }
        let deadline = Instant::now() + self.target.timeouts.request;
        let mut response = timeout_at(deadline, builder.send())
            .await
            .map_err(|_| "timed out".to_owned())?
            .map_err(|e| ProbeError::from_transport(e, false).to_string())?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status().as_u16()));
        }
        let mut body = Vec::new();
        loop {
            match timeout_at(deadline, response.chunk()).await {
                Ok(Ok(Some(bytes))) if body.len() + bytes.len() <= MAX_BODY => {
                    body.extend_from_slice(&bytes);
                }
                Ok(Ok(Some(_))) => return Err("a body over 1 MiB".into()),
                Ok(Ok(None)) => break,
                Ok(Err(e)) => return Err(ProbeError::from_transport(e, true).to_string()),
                Err(_) => return Err("timed out".into()),
            }
        }
        serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))
    }

    /// The target model's entry in `/v1/models` beside the target's own path (vLLM,
    /// SGLang, llama.cpp list one per model), or the first entry when none has its id (a
    /// server that serves one model under another name). `Ok(None)`: the list was read but
    /// names no model (no `data`, or an empty one); `Err`: it was not read (for the log).
    /// The server's whole `GET /v1/models` answer (the adapter check reads its adapters),
    /// or with `llama_cpp` llama-server's `GET /lora-adapters`.
    pub async fn models(&self, llama_cpp: bool) -> Result<serde_json::Value, String> {
        let mut url = models_url(&self.target.url);
        if llama_cpp {
            let path = url.path().trim_end_matches("/v1/models").to_owned();
            url.set_path(&format!("{path}/lora-adapters"));
        }
        self.get_json(url).await
    }

    pub async fn model_entry(&self) -> Result<Option<serde_json::Value>, String> {
        let models = self.get_json(models_url(&self.target.url)).await?;
        Ok(model_entry(models, &self.target.model))
    }

    /// Everything before t0: the body is built and serialized here, off the clock.
    fn build_request(
        &self,
        request_id: &str,
        prompt: &Prompt,
        trace: Option<&TraceIds>,
    ) -> Result<reqwest::Request, reqwest::Error> {
        let mut spec = self.backend.request(&self.target, prompt);
        if let (Some(greedy), RequestBody::Json(serde_json::Value::Object(body))) =
            (&prompt.greedy, &mut spec.body)
        {
            self.backend.greedy(body, greedy);
        }
        if let (Some(sampled), RequestBody::Json(serde_json::Value::Object(body))) =
            (&prompt.sampled, &mut spec.body)
        {
            crate::backend::sampled::apply(self.target.backend, body, sampled);
        }
        if let (Some(structure), RequestBody::Json(serde_json::Value::Object(body))) =
            (&prompt.structure, &mut spec.body)
        {
            // `inferprobe check` refused what this format cannot spell.
            let _ = self.backend.structure(body, structure);
        }
        if let (Some(extra), RequestBody::Json(serde_json::Value::Object(body))) =
            (&prompt.extra, &mut spec.body)
        {
            body.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let parallel = prompt.conversation.as_ref().and_then(|c| c.parallel_calls);
        if let (Some(allowed), RequestBody::Json(serde_json::Value::Object(body))) =
            (parallel, &mut spec.body)
        {
            self.backend.parallel_calls(body, allowed);
        }
        let mut builder = self
            .client
            .http
            .post(self.target.url.clone())
            .headers(self.target.headers.clone())
            .header("x-request-id", request_id);
        if let Some(trace) = trace {
            builder = builder.header("traceparent", trace.traceparent());
            if let Some(state) = &self.target.tracestate {
                builder = builder.header("tracestate", state.as_str());
            }
        }
        for (name, value) in spec.headers {
            builder = builder.header(name, value);
        }
        if let Some(conversation) = &prompt.conversation {
            for (name, value) in &conversation.headers {
                builder = builder.header(name, value);
            }
        }
        if let Some(key) = &self.target.api_key {
            for (name, value) in self.backend.authorize(key) {
                builder = builder.header(name, value);
            }
        }
        builder = match spec.body {
            RequestBody::Json(body) => {
                let accept = if self.streams {
                    self.backend.framing().content_type()
                } else {
                    "application/json"
                };
                let builder = builder
                    .header(CONTENT_TYPE, "application/json")
                    .header(ACCEPT, accept);
                match prompt.media() {
                    [] => builder.body(body.to_string()),
                    // Megabytes of base64: sent from the media's own buffers, not copied.
                    media => {
                        let body = crate::media::body::splice(&body, media);
                        builder
                            .header(CONTENT_LENGTH, body.content_length())
                            .body(reqwest::Body::wrap(body))
                    }
                }
            }
            RequestBody::Multipart(form) => builder.multipart(form),
        };
        builder.build()
    }

    /// The measurement of a completed exchange, then the configured response checks. With a
    /// tokenizer (counting output a server did not count, or each event's tokens) this runs
    /// on the blocking pool: encoding text on a runtime worker would delay the chunks other
    /// probes are timing.
    async fn judge(&self, prompt: &Prompt, record: RequestRecord) -> (RequestRecord, Outcome) {
        if !self.target.prompts.tokenizes() {
            let result = judge(&self.target, prompt, &record);
            return (record, Outcome::Finished(result));
        }
        let (target, prompt) = (Arc::clone(&self.target), prompt.clone());
        let start = record.start;
        let judged = tokio::task::spawn_blocking(move || {
            let result = judge(&target, &prompt, &record);
            (record, result)
        });
        match judged.await {
            Ok((record, result)) => (record, Outcome::Finished(result)),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down under us: nothing was measured.
            Err(_) => (RequestRecord::new(start), Outcome::Cut),
        }
    }

    async fn exchange(
        &self,
        request: reqwest::Request,
        record: &mut RequestRecord,
        abort: &CancellationToken,
    ) -> Result<(), Stop> {
        let deadlines = Deadlines::new(record.start, self.target.timeouts, self.streams);
        let (deadline, expired) = deadlines.next(record, record.start);
        let mut response = tokio::select! {
            biased;
            () = abort.cancelled() => return Err(Stop::Cut),
            r = self.client.http.execute(request) => match r {
                Ok(response) => response,
                Err(e) => {
                    let race = self.target.connection == ConnectionMode::Reuse
                        && closed_before_response(&e)
                        && self.reused.failed_on_reused(&e);
                    let error = ProbeError::from_transport(e, false);
                    return Err(if race { Stop::Closed(error) } else { Stop::Failed(error) });
                }
            },
            () = sleep_until(deadline) => return Err(expired.into()),
        };
        let response_at = Instant::now();
        record.response_at = Some(response_at);
        record.connection = Some(self.client.response(&response, record.start, response_at));
        record.response.quota = Quota::read(response.headers(), std::time::SystemTime::now());
        if let Some(session) = &self.target.session {
            record.response.served_by = served_by(response.headers(), &session.served_by);
            record.response.echo = session
                .affinity_headers
                .iter()
                .filter_map(|name| Some((name.clone(), response.headers().get(name)?.clone())))
                .collect();
        }
        // Only a pooled connection is ever reused: a fresh one per probe need not be remembered.
        if self.target.connection == ConnectionMode::Reuse {
            self.reused.carried(&response);
        }

        let status = response.status();
        if status.is_redirection() {
            // The client follows no redirect (see client.rs); say so in the log line rather
            // than leaving a bare "HTTP 307".
            let location = response.headers().get(http::header::LOCATION);
            return Err(ProbeError::redirect(status, location, response.url()).into());
        }
        if !status.is_success() {
            let headers = response.headers().clone();
            let body = describe_body(&read_capped(response, deadlines.total).await);
            if let Some(error) = self.backend.status_error(&headers, &body) {
                return Err(error.into());
            }
            return Err(ProbeError::Status { status, body }.into());
        }
        if !self.streams {
            return self.read_whole(response, record, &deadlines, abort).await;
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let expected = self.backend.framing().content_type();
        if !content_type.trim_start().starts_with(expected) {
            let body = read_capped(response, deadlines.total).await;
            return Err(non_stream_error(expected, &content_type, &body).into());
        }

        let mut stream = StreamReader::new(self.backend.as_ref(), self.target.limits);
        let mut last_event = response_at;
        // One cancellation waiter and one timer for the whole stream, not one of each per
        // chunk (each is a lock and a list or wheel insertion). The timer is lazy: an event
        // pushes the stall deadline back without touching it; when it fires early, it is
        // re-armed at the deadline as it stands. Only a deadline that moves *earlier* (the
        // first token swaps the TTFT deadline for the stall one) re-arms it at once.
        let cancelled = abort.cancelled();
        tokio::pin!(cancelled);
        let mut armed = deadlines.next(record, last_event).0;
        let timer = sleep_until(armed);
        tokio::pin!(timer);
        loop {
            let chunk = tokio::select! {
                biased;
                () = &mut cancelled => return Err(Stop::Cut),
                c = response.chunk() => c.map_err(|e| ProbeError::from_transport(e, true))?,
                () = &mut timer => {
                    let (deadline, expired) = deadlines.next(record, last_event);
                    if deadline <= Instant::now() {
                        return Err(expired.into());
                    }
                    armed = deadline;
                    timer.as_mut().reset(armed);
                    continue;
                }
            };
            let now = Instant::now();
            let Some(bytes) = chunk else {
                stream.end(now, record)?;
                return Ok(());
            };
            let progress_before = record.progress;
            let done = stream.read(now, &bytes, record)?;
            // Keep-alives show the connection lives, not the generation: no stall reset.
            if record.progress > progress_before {
                last_event = now;
                let deadline = deadlines.next(record, last_event).0;
                if deadline < armed {
                    armed = deadline;
                    timer.as_mut().reset(armed);
                }
            }
            if done {
                // Measurement is final; read the tail only to keep the connection.
                let _ = timeout_at(now + DRAIN_AFTER_DONE, drain(&mut response)).await;
                return Ok(());
            }
        }
    }

    /// A non-streamed response: the whole body (bounded), then the backend's reading of it.
    async fn read_whole(
        &self,
        mut response: reqwest::Response,
        record: &mut RequestRecord,
        deadlines: &Deadlines,
        abort: &CancellationToken,
    ) -> Result<(), Stop> {
        let max = self.target.limits.max_response_bytes;
        let mut body = Vec::new();
        loop {
            let chunk = tokio::select! {
                biased;
                () = abort.cancelled() => return Err(Stop::Cut),
                c = response.chunk() => c.map_err(|e| ProbeError::from_transport(e, true))?,
                () = sleep_until(deadlines.total) => {
                    return Err(ProbeError::RequestTimeout(deadlines.timeouts.request).into());
                }
            };
            let Some(bytes) = chunk else { break };
            if body.len() as u64 + bytes.len() as u64 > max {
                return Err(ProbeError::TooLarge(format!("response exceeded {max} bytes")).into());
            }
            body.extend_from_slice(&bytes);
        }
        record.end = Some(Instant::now());
        record.bytes = body.len() as u64;
        let whole = self
            .backend
            .parse_body(&body, &self.target, &mut record.response)?;
        record.whole = Some(whole);
        Ok(())
    }
}

fn judge(
    target: &Target,
    prompt: &Prompt,
    record: &RequestRecord,
) -> Result<Measurement, ProbeError> {
    let measurement = record.measure(target.prompts.tokenizer.as_deref())?;
    // A canary's greedy answer is judged by the canary alone: the target's `validate`
    // rules are written for its workload (`output_tokens` with `ignore_eos`), and a short
    // right answer (" Paris." then EOS) would fail them and count as the target's error.
    if prompt.greedy.is_none() {
        target
            .validation
            .check(prompt, &record.response, &measurement)?;
    }
    Ok(measurement)
}

#[cfg(test)]
mod tests;
