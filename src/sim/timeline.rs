//! `--timeline-file`: per streamed response, when the request arrived and when each token
//! chunk was handed to the connection, as JSON lines of wall-clock nanoseconds. It is the
//! ground truth the fidelity benchmark compares the probe's measurements with.

use std::io::BufWriter;
use std::sync::{Arc, Mutex};

use serde_json::json;

/// The file every response appends its line to.
pub type Sink = Arc<Mutex<BufWriter<std::fs::File>>>;

pub fn open(path: &std::path::Path) -> Result<Sink, String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Arc::new(Mutex::new(BufWriter::new(file))))
}

/// One response's ground truth, written as a JSON line when the response ends (or is
/// dropped because the client went away).
pub struct Timeline {
    pub out: Sink,
    pub request_id: String,
    /// The W3C trace context the request carried, if any.
    pub traceparent: Option<String>,
    pub arrival_ns: u128,
    pub token_sends_ns: Vec<u128>,
}

pub fn wall_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

impl Drop for Timeline {
    fn drop(&mut self) {
        use std::io::Write;
        let line = json!({
            "request_id": self.request_id,
            "traceparent": self.traceparent,
            "arrival_ns": self.arrival_ns.to_string(),
            "token_sends_ns": self.token_sends_ns.iter().map(u128::to_string).collect::<Vec<_>>(),
        });
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
}
