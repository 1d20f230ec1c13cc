//! The simulator's multimodal side, over HTTP: image and video parts in the chat, Anthropic
//! and Responses dialects are decoded (inline) or fetched (URLs), listed at `/sim/media`,
//! refused with the dialect's 400 when malformed, and priced in prefill time and tokens.

#[path = "sim_media/prefill.rs"]
mod prefill;
#[path = "sim_media/refusals.rs"]
mod refusals;

use std::io::Cursor;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use image::ImageFormat;
use inferprobe::sim::{self, Prefill, SimConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

struct Sim {
    url: String,
    stop: CancellationToken,
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start(config: SimConfig) -> Sim {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(sim::serve(listener, config, stop.clone()));
    Sim { url, stop }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// An image whose pixels depend on `seed`, so two images never share a hash.
fn encode(width: u32, height: u32, format: ImageFormat, seed: u8) -> Vec<u8> {
    let pixels = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([x as u8 ^ seed, y as u8, seed.wrapping_mul(31)])
    });
    let mut out = Cursor::new(Vec::new());
    pixels.write_to(&mut out, format).unwrap();
    out.into_inner()
}

fn data_url(mime: &str, bytes: &[u8]) -> String {
    format!("data:{mime};base64,{}", STANDARD.encode(bytes))
}

fn fnv1a(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

fn chat(content: Value) -> Value {
    json!({"model": "m", "stream": true, "max_tokens": 3,
           "stream_options": {"include_usage": true},
           "messages": [{"role": "user", "content": content}]})
}

fn anthropic(content: Value) -> Value {
    json!({"model": "c", "stream": true, "max_tokens": 3,
           "messages": [{"role": "user", "content": content}]})
}

fn responses(content: Value) -> Value {
    json!({"model": "r", "stream": true, "max_output_tokens": 3,
           "input": [{"role": "user", "content": content}]})
}

/// Status and body of a POST.
async fn post(sim: &Sim, path: &str, body: &Value, request_id: &str) -> (u16, String) {
    let response = client()
        .post(format!("{}{path}", sim.url))
        .header("x-request-id", request_id)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// The JSON payloads of a stream's `data:` lines.
fn payloads(stream: &str) -> Vec<Value> {
    stream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

async fn ledger(sim: &Sim) -> Vec<Value> {
    let response = client()
        .get(format!("{}/sim/media", sim.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// A one-route-per-path HTTP server on 127.0.0.1: `/img.png` serves `png`, `/moved` a
/// redirect to it, anything else a 404.
async fn image_server(png: Vec<u8>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let png = png.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&request);
                let path = head.split_whitespace().nth(1).unwrap_or("");
                let (status, extra, body) = match path {
                    "/img.png" => ("200 OK", "Content-Type: image/png\r\n", png),
                    "/moved" => ("302 Found", "Location: /img.png\r\n", Vec::new()),
                    _ => ("404 Not Found", "", Vec::new()),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(&body).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn chat_images_stream_and_are_listed() {
    let sim = start(SimConfig::default()).await;
    let (a, b) = (
        encode(64, 48, ImageFormat::Png, 1),
        encode(30, 90, ImageFormat::Png, 2),
    );
    let body = chat(json!([
        {"type": "text", "text": "compare these two"},
        {"type": "image_url", "image_url": {"url": data_url("image/png", &a)}},
        {"type": "image_url", "image_url": {"url": data_url("image/png", &b), "detail": "high"}},
    ]));
    let (status, stream) = post(&sim, "/v1/chat/completions", &body, "chat-1").await;
    assert_eq!(status, 200, "{stream}");
    assert!(stream.ends_with("data: [DONE]\n\n"), "{stream}");
    let media = ledger(&sim).await;
    assert_eq!(
        media,
        [
            json!({"request_id": "chat-1", "kind": "image", "source": "data", "format": "png",
                   "width": 64, "height": 48, "bytes": a.len(), "hash": fnv1a(&a)}),
            json!({"request_id": "chat-1", "kind": "image", "source": "data", "format": "png",
                   "width": 30, "height": 90, "bytes": b.len(), "hash": fnv1a(&b)}),
        ]
    );
    assert_ne!(media[0]["hash"], media[1]["hash"]);
}

#[tokio::test]
async fn anthropic_and_responses_images_are_accepted() {
    let sim = start(SimConfig::default()).await;
    let jpeg = encode(56, 28, ImageFormat::Jpeg, 3);
    let body = anthropic(json!([
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": STANDARD.encode(&jpeg)}},
        {"type": "text", "text": "what is this"},
    ]));
    let (status, stream) = post(&sim, "/v1/messages", &body, "anthropic-1").await;
    assert_eq!(status, 200, "{stream}");
    let start = &payloads(&stream)[0];
    assert_eq!(start["type"], "message_start");
    // 3 words and 2×1 patches.
    assert_eq!(start["message"]["usage"]["input_tokens"], 3 + 2);

    let png = encode(29, 29, ImageFormat::Png, 4);
    let body = responses(json!([
        {"type": "input_text", "text": "describe"},
        {"type": "input_image", "image_url": data_url("image/png", &png)},
    ]));
    let (status, stream) = post(&sim, "/v1/responses", &body, "responses-1").await;
    assert_eq!(status, 200, "{stream}");
    let last = payloads(&stream).pop().unwrap();
    assert_eq!(last["response"]["usage"]["input_tokens"], 1 + 2 * 2);

    let media = ledger(&sim).await;
    let summary: Vec<_> = media
        .iter()
        .map(|m| {
            (
                m["request_id"].as_str().unwrap(),
                m["format"].as_str().unwrap(),
                m["width"].as_u64().unwrap(),
                m["height"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("anthropic-1", "jpeg", 56, 28),
            ("responses-1", "png", 29, 29)
        ]
    );
    assert_eq!(media[0]["hash"], fnv1a(&jpeg));
}

#[tokio::test]
async fn url_images_are_fetched_and_decoded() {
    let sim = start(SimConfig::default()).await;
    let png = encode(100, 30, ImageFormat::Png, 5);
    let server = image_server(png.clone()).await;
    let url = format!("http://{server}/img.png");

    let body = chat(json!([{"type": "image_url", "image_url": {"url": url}}]));
    let (status, stream) = post(&sim, "/v1/chat/completions", &body, "url-1").await;
    assert_eq!(status, 200, "{stream}");
    let body = anthropic(json!([{"type": "image", "source": {"type": "url", "url": url}}]));
    let (status, stream) = post(&sim, "/v1/messages", &body, "url-2").await;
    assert_eq!(status, 200, "{stream}");
    let body = responses(json!([{"type": "input_image", "image_url": url}]));
    let (status, stream) = post(&sim, "/v1/responses", &body, "url-3").await;
    assert_eq!(status, 200, "{stream}");

    let media = ledger(&sim).await;
    assert_eq!(media.len(), 3);
    for (item, id) in media.iter().zip(["url-1", "url-2", "url-3"]) {
        assert_eq!(
            *item,
            json!({"request_id": id, "kind": "image", "source": "url", "format": "png",
                   "width": 100, "height": 30, "bytes": png.len(), "hash": fnv1a(&png)})
        );
    }

    // Unreachable, missing, or redirected (which the simulator does not follow): 400s.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_url = format!("http://{}/img.png", closed.local_addr().unwrap());
    drop(closed);
    for (url, expected) in [
        (closed_url, "cannot fetch"),
        (format!("http://{server}/nothing.png"), "returned HTTP 404"),
        (format!("http://{server}/moved"), "returned HTTP 302"),
    ] {
        let body = chat(json!([{"type": "image_url", "image_url": {"url": url}}]));
        let (status, text) = post(&sim, "/v1/chat/completions", &body, "bad-url").await;
        assert_eq!(status, 400, "{url}: {text}");
        let message = serde_json::from_str::<Value>(&text).unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.starts_with("Failed to load image: "), "{message}");
        assert!(message.contains(expected), "{message}");
    }
    assert_eq!(ledger(&sim).await.len(), 3, "refused requests list nothing");
}
