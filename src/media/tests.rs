use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;

use super::*;

fn decode(part: &MediaPart) -> image::DynamicImage {
    let (_, data) = part.base64().expect("inline");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    image::load_from_memory(&bytes).unwrap()
}

fn generated(format: Format, pattern: Pattern, cache: bool, count: u32) -> MediaSource {
    MediaSource::new(
        MediaKind::Image,
        count,
        Origin::Generated {
            width: 96,
            height: 64,
            format,
            pattern,
            cache: cache.then(OnceLock::new),
        },
        Arc::new(Mutex::new(())),
    )
}

#[test]
fn generated_images_decode_at_their_size_and_differ_per_probe() {
    for format in [Format::Png, Format::Jpeg] {
        for pattern in [Pattern::Noise, Pattern::Smooth] {
            let source = generated(format, pattern, false, 2);
            let a = source.build(source.draw(), 1).unwrap();
            let b = source.build(source.draw(), 2).unwrap();
            assert_eq!(a.len(), 2);
            for part in a.iter().chain(&b) {
                let image = decode(part);
                assert_eq!((image.width(), image.height()), (96, 64));
                assert_eq!((part.width, part.height), (96, 64));
                assert!(
                    part.url
                        .starts_with(&format!("data:{};base64,", format.mime()))
                );
            }
            assert_ne!(a[0].url, a[1].url, "two images of one probe differ");
            assert_ne!(a[0].url, b[0].url, "two probes' images differ");
        }
    }
}

#[test]
fn cache_sends_one_image_for_every_probe() {
    let source = generated(Format::Jpeg, Pattern::Noise, true, 1);
    let a = source.build(source.draw(), 1).unwrap();
    let b = source.build(source.draw(), 2).unwrap();
    assert_eq!(a, b);
    assert!(Arc::ptr_eq(&a[0].url, &b[0].url), "shared, not rebuilt");
}

#[test]
fn noise_is_the_worst_case_for_compression() {
    let encoded = |pattern| {
        let built = generated(Format::Png, pattern, false, 1)
            .build(0, 7)
            .unwrap();
        let (_, data) = built[0].base64().expect("inline");
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap()
            .len()
    };
    let raw = 96 * 64 * 3;
    let (noise, smooth) = (encoded(Pattern::Noise), encoded(Pattern::Smooth));
    // Noise cannot compress: the upload is at least the pixels themselves.
    assert!(noise >= raw, "noise PNG {noise} bytes < {raw} raw");
    assert!(
        smooth < raw * 3 / 4,
        "smooth PNG {smooth} bytes of {raw} raw"
    );
}

#[test]
fn files_and_urls_are_used_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut entries = Vec::new();
    for (i, size) in [(0, 10), (1, 20), (2, 30)] {
        let path = dir.path().join(format!("{i}.png"));
        image::RgbImage::new(size, size).save(&path).unwrap();
        entries.push(check_image_file(&path).unwrap());
    }
    let source = MediaSource::new(
        MediaKind::Image,
        2,
        Origin::Files(entries),
        Arc::new(Mutex::new(())),
    );
    let sizes = |parts: Vec<MediaPart>| parts.iter().map(|p| decode(p).width()).collect::<Vec<_>>();
    assert_eq!(sizes(source.build(source.draw(), 0).unwrap()), [10, 20]);
    assert_eq!(sizes(source.build(source.draw(), 0).unwrap()), [30, 10]);

    let urls = MediaSource::new(
        MediaKind::Video,
        1,
        Origin::Urls(vec!["http://a/1.mp4".into(), "http://a/2.mp4".into()]),
        Arc::new(Mutex::new(())),
    );
    let url = |parts: Vec<MediaPart>| parts[0].url.to_string();
    assert_eq!(url(urls.build(urls.draw(), 0).unwrap()), "http://a/1.mp4");
    assert_eq!(url(urls.build(urls.draw(), 0).unwrap()), "http://a/2.mp4");
    assert_eq!(url(urls.build(urls.draw(), 0).unwrap()), "http://a/1.mp4");
}

#[test]
fn bad_files_are_caught_when_checked_and_when_gone() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.png");
    std::fs::write(&text, "not an image").unwrap();
    assert!(
        check_image_file(&text)
            .unwrap_err()
            .contains("is not an image")
    );
    let truncated = dir.path().join("cut.png");
    let mut png = Vec::new();
    image::RgbImage::new(64, 64)
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    std::fs::write(&truncated, &png[..png.len() / 2]).unwrap();
    assert!(
        check_image_file(&truncated)
            .unwrap_err()
            .contains("does not decode")
    );
    let video = dir.path().join("clip.mp4");
    std::fs::write(&video, b"\0\0\0\x18ftypmp42rest").unwrap();
    assert_eq!(check_video_file(&video).unwrap().mime, "video/mp4");
    assert!(
        check_video_file(&text)
            .unwrap_err()
            .contains("not an MP4 or WebM")
    );
    assert!(images_in(dir.path()).is_ok());
    assert!(images_in(Path::new("/nonexistent")).is_err());

    // Checked at load, deleted before the probe: the build says so.
    let good = dir.path().join("good.png");
    image::RgbImage::new(8, 8).save(&good).unwrap();
    let entry = check_image_file(&good).unwrap();
    std::fs::remove_file(&good).unwrap();
    let source = MediaSource::new(
        MediaKind::Image,
        1,
        Origin::Files(vec![entry]),
        Arc::new(Mutex::new(())),
    );
    assert!(source.build(0, 0).is_err());
}

#[test]
fn a_summary_counts_images_videos_and_pixels() {
    let parts = generated(Format::Jpeg, Pattern::Smooth, false, 2)
        .build(0, 1)
        .unwrap();
    let summary = MediaSummary::of(&parts);
    assert_eq!(
        (summary.images, summary.videos, summary.pixels),
        (2, 0, 2 * 96 * 64)
    );
    assert_eq!(summary.to_string(), "2 image(s), 0.01 MP");
}

#[test]
fn spliced_bodies_are_the_json_a_serializer_would_write() {
    use body::{Slice, placeholder, splice};
    let source = generated(Format::Png, Pattern::Noise, false, 2);
    let mut media = source.build(source.draw(), 5).unwrap();
    media.push(MediaPart::remote(
        MediaKind::Image,
        "http://images.test/a \"quoted\" \\ name.png",
    ));
    let text = "a prompt with a stray \u{1}media:9:u\u{1} mark";
    let with_placeholders = serde_json::json!({
        "text": text,
        "parts": [placeholder(0, Slice::Url), placeholder(1, Slice::Base64), placeholder(2, Slice::Url)],
    });
    let expected = serde_json::json!({
        "text": text,
        "parts": [&*media[0].url, media[1].base64().unwrap().1, &*media[2].url],
    });
    let body = splice(&with_placeholders, &media);
    let bytes = body.to_vec();
    assert_eq!(body.content_length(), bytes.len() as u64);
    let sent: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(sent, expected);
    // Nothing but the JSON around them was added.
    let media_len: usize = media[0].url.len() + media[1].base64().unwrap().1.len();
    assert!(bytes.len() < media_len + 300, "{} bytes", bytes.len());
}
