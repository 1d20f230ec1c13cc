//! A raw TCP server that replays a captured response: the real status line and headers,
//! then the body. Streamed bodies are re-sent one SSE event per HTTP chunk, `gap` apart,
//! so a probe sees real server framing with known timing.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Capture {
    pub status_line: String,
    pub headers: Vec<String>,
    pub body: Vec<u8>,
}

impl Capture {
    /// A made-up streamed response.
    pub fn stream(body: &str) -> Self {
        Self {
            status_line: "HTTP/1.1 200 OK".into(),
            headers: vec!["content-type: text/event-stream".into()],
            body: body.as_bytes().to_vec(),
        }
    }

    pub fn load(dir: &Path, name: &str) -> Self {
        let headers = std::fs::read_to_string(dir.join(format!("{name}.headers"))).unwrap();
        let body = std::fs::read(dir.join(format!("{name}.sse"))).unwrap();
        let mut lines = headers.lines().filter(|l| !l.trim().is_empty());
        let status_line = lines.next().unwrap().trim().to_owned();
        let headers = lines
            .map(|l| l.trim().to_owned())
            .filter(|l| {
                let name = l.split(':').next().unwrap_or("").to_ascii_lowercase();
                // Framing is redone below; the connection closes after each response.
                !matches!(
                    name.as_str(),
                    "transfer-encoding" | "content-length" | "connection" | "keep-alive"
                )
            })
            .collect();
        Self {
            status_line,
            headers,
            body,
        }
    }

    fn is_stream(&self) -> bool {
        self.headers
            .iter()
            .any(|h| h.to_ascii_lowercase().contains("text/event-stream"))
    }
}

/// The requests a replaying server received, whole (head and body).
pub type Requests = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// Serve `capture` to every connection until the test ends.
pub async fn serve(capture: Capture, gap: Duration) -> SocketAddr {
    serve_recording(capture, gap).await.0
}

/// [`serve`], keeping every request it received.
#[allow(dead_code)]
pub async fn serve_recording(capture: Capture, gap: Duration) -> (SocketAddr, Requests) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let capture = std::sync::Arc::new(capture);
    let requests = Requests::default();
    let seen = std::sync::Arc::clone(&requests);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let capture = std::sync::Arc::clone(&capture);
            let seen = std::sync::Arc::clone(&seen);
            tokio::spawn(async move {
                let _ = respond(stream, &capture, gap, &seen).await;
            });
        }
    });
    (addr, requests)
}

async fn read_request(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(buf);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return Ok(buf);
            }
        }
    }
}

async fn respond(
    mut stream: TcpStream,
    capture: &Capture,
    gap: Duration,
    seen: &Requests,
) -> std::io::Result<()> {
    let request = read_request(&mut stream).await?;
    seen.lock()
        .unwrap()
        .push(String::from_utf8_lossy(&request).into_owned());
    let mut head = format!("{}\r\n", capture.status_line);
    for header in &capture.headers {
        head.push_str(header);
        head.push_str("\r\n");
    }
    if !capture.is_stream() {
        head.push_str(&format!(
            "content-length: {}\r\nconnection: close\r\n\r\n",
            capture.body.len()
        ));
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(&capture.body).await?;
        return stream.shutdown().await;
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    let text = String::from_utf8(capture.body.clone()).unwrap();
    for event in text.split_inclusive("\n\n") {
        tokio::time::sleep(gap).await;
        let chunk = format!("{:x}\r\n{event}\r\n", event.len());
        stream.write_all(chunk.as_bytes()).await?;
        stream.flush().await?;
    }
    stream.write_all(b"0\r\n\r\n").await?;
    stream.shutdown().await
}
