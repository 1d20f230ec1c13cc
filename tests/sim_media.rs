//! The simulator's multimodal side, over HTTP: image and video parts in the chat, Anthropic
//! and Responses dialects are decoded (inline) or fetched (URLs), listed at `/sim/media`,
//! refused with the dialect's 400 when malformed, and priced in prefill time and tokens.

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

#[tokio::test]
async fn malformed_parts_are_400s_in_the_dialects_error_shape() {
    let sim = start(SimConfig::default()).await;
    let png = encode(8, 8, ImageFormat::Png, 6);
    let image_url = |url: String| json!({"type": "image_url", "image_url": {"url": url}});
    let chat_cases = [
        (
            image_url("data:image/png;base64,not*base64".into()),
            "Failed to load image: invalid base64 data",
        ),
        (
            image_url("ftp://127.0.0.1/a.png".into()),
            "Failed to load image: the URL must be either a HTTP(S) or a data URL",
        ),
        (
            image_url(data_url("image/gif", &png)),
            "Failed to load image: unsupported media type \"image/gif\"",
        ),
        (
            image_url(data_url("image/png", b"these bytes are no image")),
            "Failed to load image: cannot identify image file",
        ),
        (
            image_url(data_url("image/png", &png[..png.len() - 20])),
            "Failed to load image: ",
        ),
        (
            json!({"type": "video_url", "video_url": {"url": data_url("video/mp4", b"not a container")}}),
            "Failed to load video: not an MP4, QuickTime or WebM container",
        ),
        (
            json!({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}),
            "Unsupported content part type: input_audio",
        ),
    ];
    for (part, expected) in chat_cases {
        let body = chat(json!([{"type": "text", "text": "hi"}, part]));
        let (status, text) = post(&sim, "/v1/chat/completions", &body, "bad").await;
        assert_eq!(status, 400, "{part}: {text}");
        let error: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(error["error"]["type"], "BadRequestError", "{text}");
        assert_eq!(error["error"]["code"], 400);
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(expected), "{message}");
    }

    let anthropic_cases = [
        (
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "%%%"}}),
            "Failed to load image: invalid base64 data",
        ),
        (
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": STANDARD.encode(&png)}}),
            "Failed to load image: the data is png, not the declared media type image/jpeg",
        ),
        (
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/webp", "data": STANDARD.encode(&png)}}),
            "Failed to load image: unsupported media type \"image/webp\"",
        ),
        (
            json!({"type": "document", "source": {"type": "text", "data": "x"}}),
            "Unsupported content part type: document",
        ),
    ];
    for (block, expected) in anthropic_cases {
        let (status, text) = post(&sim, "/v1/messages", &anthropic(json!([block])), "bad").await;
        assert_eq!(status, 400, "{text}");
        let error: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(error["type"], "error", "{text}");
        assert_eq!(error["error"]["type"], "invalid_request_error");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(expected), "{message}");
    }

    let responses_cases = [
        (
            json!({"type": "input_image", "image_url": "data:image/png;base64,@@"}),
            "Failed to load image: invalid base64 data",
        ),
        (
            json!({"type": "input_image", "image_url": "file:///etc/passwd"}),
            "Failed to load image: the URL must be",
        ),
        (
            json!({"type": "input_file", "file_id": "file-1"}),
            "Unsupported content part type: input_file",
        ),
    ];
    for (part, expected) in responses_cases {
        let (status, text) = post(&sim, "/v1/responses", &responses(json!([part])), "bad").await;
        assert_eq!(status, 400, "{text}");
        let error: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(error["error"]["type"], "invalid_request_error", "{text}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(expected), "{message}");
    }
    assert!(
        ledger(&sim).await.is_empty(),
        "refused requests list nothing"
    );
}

#[tokio::test]
async fn videos_need_a_container_signature() {
    let sim = start(SimConfig::default()).await;
    let mp4 = b"\0\0\0\x18ftypisom\0\0\x02\0isomiso2mp41".to_vec();
    let webm = [0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81, 0x01].to_vec();
    let body = chat(json!([
        {"type": "video_url", "video_url": {"url": data_url("video/mp4", &mp4)}},
        {"type": "video_url", "video_url": {"url": data_url("video/webm", &webm)}},
    ]));
    let (status, stream) = post(&sim, "/v1/chat/completions", &body, "video-1").await;
    assert_eq!(status, 200, "{stream}");
    let media = ledger(&sim).await;
    assert_eq!(
        media[0],
        json!({"request_id": "video-1", "kind": "video", "source": "data", "format": "mp4",
               "width": null, "height": null, "bytes": mp4.len(), "hash": fnv1a(&mp4)})
    );
    assert_eq!(media[1]["format"], "webm");
}

/// Time from sending a chat request to its first content token (the role chunk, sent on
/// arrival, does not count).
async fn time_to_first_token(sim: &Sim, body: &Value) -> Duration {
    let start = Instant::now();
    let mut response = client()
        .post(format!("{}/v1/chat/completions", sim.url))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(std::str::from_utf8(&chunk).unwrap());
        let complete = &text[..text.rfind("\n\n").map_or(0, |i| i + 2)];
        let token = payloads(complete).iter().any(|p| {
            p["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|c| !c.is_empty())
        });
        if token {
            return start.elapsed();
        }
    }
    panic!("no token in {text}");
}

#[tokio::test]
async fn prefill_per_image_delays_the_first_token() {
    let ttft = Duration::from_millis(50);
    let plain = start(SimConfig {
        ttft,
        ..SimConfig::default()
    })
    .await;
    let priced = start(SimConfig {
        ttft,
        prefill: Box::new(Prefill {
            per_image: Duration::from_millis(300),
            ..Prefill::default()
        }),
        ..SimConfig::default()
    })
    .await;
    let png = encode(32, 32, ImageFormat::Png, 7);
    let body = chat(json!([
        {"type": "text", "text": "hi"},
        {"type": "image_url", "image_url": {"url": data_url("image/png", &png)}},
    ]));
    let without = time_to_first_token(&plain, &body).await;
    let with = time_to_first_token(&priced, &body).await;
    // The simulator schedules the token from the request's arrival, so the lower bound
    // holds however busy the machine is; the upper bound only catches a runaway.
    assert!(with >= ttft + Duration::from_millis(300), "{with:?}");
    assert!(with > without, "{with:?} vs {without:?}");
    assert!(with < Duration::from_secs(10), "{with:?}");

    // Per megapixel: 500×400 is 0.2 MP, at 1 s per MP 200 ms.
    let by_area = start(SimConfig {
        ttft,
        prefill: Box::new(Prefill {
            per_megapixel: Duration::from_secs(1),
            ..Prefill::default()
        }),
        ..SimConfig::default()
    })
    .await;
    let large = encode(500, 400, ImageFormat::Jpeg, 8);
    let body =
        chat(json!([{"type": "image_url", "image_url": {"url": data_url("image/jpeg", &large)}}]));
    let with = time_to_first_token(&by_area, &body).await;
    assert!(with >= ttft + Duration::from_millis(200), "{with:?}");
    assert!(with < Duration::from_secs(10), "{with:?}");
}

#[tokio::test]
async fn prompt_tokens_grow_by_the_patch_count() {
    let sim = start(SimConfig::default()).await;
    let text = json!({"type": "text", "text": "one two three"});
    let (status, stream) = post(&sim, "/v1/chat/completions", &chat(json!([text])), "t").await;
    assert_eq!(status, 200);
    let usage = |stream: &str| payloads(stream).pop().unwrap()["usage"]["prompt_tokens"].clone();
    assert_eq!(usage(&stream), 3);

    // 100×57 is 4×3 patches of 28 pixels; 28×28 is one.
    let (a, b) = (
        encode(100, 57, ImageFormat::Png, 9),
        encode(28, 28, ImageFormat::Jpeg, 10),
    );
    let content = json!([
        text,
        {"type": "image_url", "image_url": {"url": data_url("image/png", &a)}},
        {"type": "image_url", "image_url": {"url": data_url("image/jpeg", &b)}},
    ]);
    let (status, stream) = post(&sim, "/v1/chat/completions", &chat(content.clone()), "t").await;
    assert_eq!(status, 200);
    assert_eq!(usage(&stream), 3 + 12 + 1);

    let mut whole = chat(content);
    whole["stream"] = json!(false);
    let (status, body) = post(&sim, "/v1/chat/completions", &whole, "t").await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["usage"]["prompt_tokens"], 3 + 12 + 1);
}
