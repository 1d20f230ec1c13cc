//! A raw-TCP hostile server: it reads each HTTP request itself and writes raw bytes, so it
//! can misbehave at the byte level (stall, drip, reset, split UTF-8, gzip, HTTP/1.0, …).
//!
//! The behaviour is the first path segment of the request: target url
//! `http://ADDR/drip-late` → request path `/drip-late/v1/chat/completions` → `drip-late`
//! (see [`faults`] for the list). A segment may carry a `.suffix` (`endless.bytes`) so two
//! targets share a behaviour but are counted apart. Per segment, odd-numbered requests get
//! the fault and even-numbered ones a healthy OpenAI chat stream, so a test can show that
//! the probe after each fault succeeds. The keep-alive behaviours (`close-idle`,
//! `close-always`) do not alternate; [`Refuser`] stands for the refused connection.
//!
//! Everything listens on 127.0.0.1 and every wait is bounded by [`MAX_HOLD`].

pub mod faults;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, timeout, timeout_at};
use tokio_util::sync::CancellationToken;

/// The longest the server waits for anything (a request, a client's close, a drip).
pub const MAX_HOLD: Duration = Duration::from_secs(10);

/// The healthy stream's content chunks: multi-byte on purpose (2-, 3- and 4-byte UTF-8).
pub const TEXT_PIECES: [&str; 4] = ["Hi", " there", " — grüße", " 🌍!"];
/// Matches exactly the text of the healthy stream (for a target's `validate.regex`).
pub const TEXT_REGEX: &str = "^Hi there — grüße 🌍!$";
/// `usage.completion_tokens` of the healthy stream (one per content chunk).
pub const TOKENS: u64 = TEXT_PIECES.len() as u64;

const SSE_HEADERS: &[&str] = &["content-type: text/event-stream", "cache-control: no-cache"];

#[derive(Default)]
struct Stats {
    connections: AtomicU64,
    /// Request heads (lower-cased) per first path segment, in arrival order.
    requests: Mutex<HashMap<String, Vec<String>>>,
    /// Requests answered by closing the connection without a response.
    dropped: AtomicU64,
}

impl Stats {
    /// Record a request; its 1-based number among its segment's requests.
    fn record(&self, request: &Request) -> u64 {
        let mut requests = self.requests.lock().unwrap();
        let list = requests.entry(request.segment.clone()).or_default();
        list.push(request.head.clone());
        list.len() as u64
    }
}

pub struct Hostile {
    pub addr: SocketAddr,
    stats: Arc<Stats>,
    stop: CancellationToken,
}

impl Hostile {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(Stats::default());
        let stop = CancellationToken::new();
        let (token, shared) = (stop.clone(), Arc::clone(&stats));
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = token.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((stream, _)) = accepted else { continue };
                shared.connections.fetch_add(1, Ordering::SeqCst);
                let stats = Arc::clone(&shared);
                let token = token.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        () = token.cancelled() => {}
                        () = connection(stream, stats) => {}
                    }
                });
            }
        });
        Self { addr, stats, stop }
    }

    /// The base URL of a target that gets `behaviour`.
    pub fn url(&self, behaviour: &str) -> String {
        format!("http://{}/{behaviour}", self.addr)
    }

    /// Requests received (fully read) for a path segment.
    pub fn requests(&self, segment: &str) -> u64 {
        self.heads(segment).len() as u64
    }

    /// The lower-cased request heads received for a path segment.
    pub fn heads(&self, segment: &str) -> Vec<String> {
        let requests = self.stats.requests.lock().unwrap();
        requests.get(segment).cloned().unwrap_or_default()
    }

    /// Connections accepted, whatever they carried.
    pub fn connections(&self) -> u64 {
        self.stats.connections.load(Ordering::SeqCst)
    }

    /// Requests answered by closing the connection without a response.
    pub fn dropped(&self) -> u64 {
        self.stats.dropped.load(Ordering::SeqCst)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A port with nothing listening (`connect` refused) until [`Refuser::serve_one`] listens
/// on it just long enough to answer one request with the healthy stream.
pub struct Refuser {
    pub port: u16,
    served: AtomicU64,
}

impl Refuser {
    pub async fn new() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        Self {
            port,
            served: AtomicU64::new(0),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn served(&self) -> u64 {
        self.served.load(Ordering::SeqCst)
    }

    /// Listen, answer the next request healthily, and stop listening again.
    pub async fn serve_one(&self) {
        // The port was just ours; a rebind can only fail in a short race (bounded retries).
        let mut listener = None;
        for _ in 0..50 {
            match TcpListener::bind(("127.0.0.1", self.port)).await {
                Ok(l) => {
                    listener = Some(l);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        let listener = listener.expect("rebinding the refused port");
        let (mut stream, _) = timeout(MAX_HOLD, listener.accept())
            .await
            .expect("a probe within MAX_HOLD")
            .unwrap();
        drop(listener); // refuse again from now on
        let _ = stream.set_nodelay(true);
        read_request(&mut stream).await.expect("a request");
        healthy(&mut stream, false).await.unwrap();
        let _ = stream.shutdown().await;
        self.served.fetch_add(1, Ordering::SeqCst);
    }
}

/// One parsed request: its first path segment and its lower-cased head.
struct Request {
    segment: String,
    head: String,
}

/// What to do with the connection after a response.
enum Next {
    KeepAlive,
    /// Send FIN.
    Close,
    /// Drop as is (an abortive close when SO_LINGER 0 was set).
    Drop,
}

async fn connection(mut stream: TcpStream, stats: Arc<Stats>) {
    let _ = stream.set_nodelay(true);
    let mut on_connection = 0;
    while let Some(request) = read_request(&mut stream).await {
        let n = stats.record(&request);
        let next = faults::respond(&mut stream, &request, n, on_connection, &stats).await;
        on_connection += 1;
        match next {
            Ok(Next::KeepAlive) => continue,
            Ok(Next::Close) => {
                let _ = stream.shutdown().await;
                return;
            }
            Ok(Next::Drop) | Err(_) => return,
        }
    }
}

/// Read one request head and its Content-Length body; `None` on EOF, error or timeout.
async fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let deadline = Instant::now() + MAX_HOLD;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let lower = head.to_ascii_lowercase();
            let length: usize = header(&lower, "content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                let path = head.split(' ').nth(1).unwrap_or("/");
                let segment = path.trim_start_matches('/').split('/').next().unwrap_or("");
                return Some(Request {
                    segment: segment.to_owned(),
                    head: lower,
                });
            }
        }
        if buf.len() > 8 << 20 {
            return None;
        }
        let n = timeout_at(deadline, stream.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The value of header `name` in a lower-cased head.
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        (n.trim() == name).then_some(v.trim())
    })
}

/// How a body is delimited.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    Chunked,
    /// No length, no chunking: the body ends when the connection closes.
    Close,
}

/// Status line and headers; framing headers are added here.
async fn head(
    stream: &mut TcpStream,
    status: &str,
    headers: &[&str],
    framing: Framing,
    keep_alive: bool,
) -> io::Result<()> {
    let mut text = format!("{status}\r\n");
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    if framing == Framing::Chunked {
        text.push_str("transfer-encoding: chunked\r\n");
    }
    if !keep_alive {
        text.push_str("connection: close\r\n");
    }
    text.push_str("\r\n");
    stream.write_all(text.as_bytes()).await?;
    stream.flush().await
}

/// A complete response with a Content-Length body, then close.
async fn fixed(
    stream: &mut TcpStream,
    status: &str,
    headers: &[&str],
    body: &str,
) -> io::Result<()> {
    let length = format!("content-length: {}", body.len());
    let mut all = headers.to_vec();
    all.push(&length);
    head(stream, status, &all, Framing::Close, false).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await
}

/// Write one piece of body (its own HTTP chunk when chunked) and flush it.
async fn send(stream: &mut TcpStream, framing: Framing, bytes: &[u8]) -> io::Result<()> {
    match framing {
        Framing::Chunked => {
            let mut out = format!("{:x}\r\n", bytes.len()).into_bytes();
            out.extend_from_slice(bytes);
            out.extend_from_slice(b"\r\n");
            stream.write_all(&out).await?;
        }
        Framing::Close => stream.write_all(bytes).await?,
    }
    stream.flush().await
}

/// The end of a chunked body (nothing for a close-delimited one: the caller closes).
async fn end(stream: &mut TcpStream, framing: Framing) -> io::Result<()> {
    if framing == Framing::Chunked {
        stream.write_all(b"0\r\n\r\n").await?;
    }
    stream.flush().await
}

pub fn sse(data: &Value) -> String {
    format!("data: {data}\n\n")
}

/// One chat completion chunk with `delta` and an optional finish reason.
pub fn chat_chunk(delta: Value, finish: Option<&str>) -> String {
    sse(&json!({
        "id": "chatcmpl-hostile",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }))
}

pub fn role_chunk() -> String {
    chat_chunk(json!({"role": "assistant", "content": ""}), None)
}

pub fn content_chunk(text: &str) -> String {
    chat_chunk(json!({ "content": text }), None)
}

/// A valid OpenAI chat stream: role chunk, content chunks, finish, usage, `[DONE]`.
pub fn healthy_events() -> Vec<String> {
    let mut events = vec![role_chunk()];
    events.extend(TEXT_PIECES.iter().map(|p| content_chunk(p)));
    events.push(chat_chunk(json!({}), Some("stop")));
    events.push(sse(&json!({
        "id": "chatcmpl-hostile",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 16, "completion_tokens": TOKENS, "total_tokens": 16 + TOKENS},
    })));
    events.push("data: [DONE]\n\n".to_owned());
    events
}

/// The healthy stream, one event per chunk.
async fn healthy(stream: &mut TcpStream, keep_alive: bool) -> io::Result<()> {
    head(
        stream,
        "HTTP/1.1 200 OK",
        SSE_HEADERS,
        Framing::Chunked,
        keep_alive,
    )
    .await?;
    for event in healthy_events() {
        send(stream, Framing::Chunked, event.as_bytes()).await?;
    }
    end(stream, Framing::Chunked).await
}

/// Keep the connection open, silent, until the client closes it (or [`MAX_HOLD`]).
async fn hold(stream: &mut TcpStream) {
    let mut sink = [0u8; 1024];
    let _ = timeout(MAX_HOLD, async {
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                return;
            }
        }
    })
    .await;
}
