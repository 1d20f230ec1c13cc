//! Media priced as a server prices them: prefill time per image before the first token, and
//! prompt tokens that grow by the patch count.

use super::*;

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
