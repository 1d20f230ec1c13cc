//! Malformed parts are refused with the dialect's own 400, and a video needs a container
//! signature.

use super::*;

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
