use super::*;
use serde_json::json;

fn chat(content: Value) -> Result<Prompt, String> {
    messages(
        Some(&mut json!([{"role": "user", "content": content}])),
        false,
    )
}

fn base64(mime: &str, data: &str) -> Payload {
    Payload::Base64 {
        mime: mime.into(),
        data: data.into(),
    }
}

#[test]
fn chat_parts_are_text_images_and_videos_in_order() {
    let prompt = chat(json!([
        {"type": "text", "text": "what is this"},
        {"type": "image_url", "image_url": {"url": "data:image/PNG;base64,AAAA"}},
        {"type": "video_url", "video_url": {"url": "https://example.test/v.mp4"}},
        {"type": "image_url", "image_url": "http://127.0.0.1:9/a.jpg"},
        {"type": "text", "text": "and that"},
    ]))
    .unwrap();
    assert_eq!(prompt.words, 5);
    let kinds: Vec<_> = prompt.media.iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        [MediaKind::Image, MediaKind::Video, MediaKind::Image]
    );
    assert_eq!(prompt.media[0].payload, base64("image/png", "AAAA"));
    assert_eq!(
        prompt.media[1].payload,
        Payload::Url("https://example.test/v.mp4".into())
    );
    assert!(!prompt.media[0].strict_type);
    // A plain string is text, as before.
    assert_eq!(chat(json!("a b c")).unwrap().words, 3);
}

#[test]
fn chat_part_errors() {
    let error = |part: Value| chat(json!([part])).unwrap_err();
    assert_eq!(
        error(json!({"type": "audio_url", "audio_url": {"url": "x"}})),
        "Unsupported content part type: audio_url"
    );
    assert!(error(json!({"text": "no type"})).contains("no `type`"));
    assert_eq!(
        error(json!({"type": "image_url", "image_url": {"url": "ftp://h/a.png"}})),
        "Failed to load image: the URL must be either a HTTP(S) or a data URL"
    );
    assert_eq!(
        error(json!({"type": "video_url", "video_url": {"url": "data:video/mp4,AAAA"}})),
        "Failed to load video: only base64 data URLs are supported"
    );
    assert!(error(json!({"type": "image_url", "image_url": {}})).contains("needs a string"));
    assert!(
        error(json!({"type": "image_url", "image_url": {"url": "data:é"}})).contains("no comma")
    );
    // Slicing a multi-byte prefix must not panic.
    assert!(error(json!({"type": "image_url", "image_url": "dé"})).contains("must be"));
}

#[test]
fn anthropic_blocks() {
    let mut body = json!([{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"}},
        {"type": "image", "source": {"type": "url", "url": "https://h/x.png"}},
        {"type": "text", "text": "describe both"},
    ]}]);
    let prompt = messages(Some(&mut body), true).unwrap();
    assert_eq!(prompt.words, 2);
    assert_eq!(prompt.media[0].payload, base64("image/jpeg", "/9j/"));
    assert!(prompt.media[0].strict_type);
    assert_eq!(
        prompt.media[1].payload,
        Payload::Url("https://h/x.png".into())
    );
    let error = |block: Value| {
        messages(
            Some(&mut json!([{"role": "user", "content": [block]}])),
            true,
        )
        .unwrap_err()
    };
    assert_eq!(
        error(json!({"type": "document", "source": {}})),
        "Unsupported content part type: document"
    );
    assert_eq!(
        error(json!({"type": "image", "source": {"type": "file", "file_id": "f"}})),
        "Failed to load image: unsupported source type file"
    );
    assert!(
        error(json!({"type": "image", "source": {"type": "base64", "data": "AA"}}))
            .contains("media_type")
    );
    assert!(
        error(
            json!({"type": "image", "source": {"type": "url", "url": "data:image/png;base64,AA"}})
        )
        .contains("HTTP(S)")
    );
    assert!(error(json!({"type": "image"})).contains("`source`"));
}

#[test]
fn responses_input() {
    let mut input = json!([{"role": "user", "content": [
        {"type": "input_text", "text": "one two"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBO"},
    ]}, {"role": "assistant", "content": "three"}]);
    let prompt = super::responses_input(Some(&mut input)).unwrap();
    assert_eq!(prompt.words, 3);
    assert_eq!(prompt.media[0].payload, base64("image/png", "iVBO"));
    assert_eq!(
        super::responses_input(Some(&mut json!("a b")))
            .unwrap()
            .words,
        2
    );
    assert!(super::responses_input(None).is_err());
    let error = |part: Value| {
        super::responses_input(Some(&mut json!([{"role": "user", "content": [part]}]))).unwrap_err()
    };
    assert_eq!(
        error(json!({"type": "input_file", "file_id": "f"})),
        "Unsupported content part type: input_file"
    );
    assert!(error(json!({"type": "input_image", "file_id": "f"})).contains("file_id"));
}
