use base64::engine::general_purpose::STANDARD;

use super::*;

fn encode(width: u32, height: u32, format: ImageFormat) -> Vec<u8> {
    let pixels = image::RgbImage::from_fn(width, height, |x, y| image::Rgb([x as u8, y as u8, 7]));
    let mut out = Cursor::new(Vec::new());
    pixels.write_to(&mut out, format).unwrap();
    out.into_inner()
}

/// A PNG whose header claims `width`×`height` (with a valid CRC), pixels not to match.
fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        !bytes.iter().fold(!0u32, |crc, &b| {
            (0..8).fold(crc ^ u32::from(b), |c, _| {
                (c >> 1) ^ (0xedb8_8320 & 0u32.wrapping_sub(c & 1))
            })
        })
    }
    let mut png = encode(4, 4, ImageFormat::Png);
    // Signature (8), IHDR length (4), "IHDR" (4), then width and height; CRC after 13 bytes.
    png[16..20].copy_from_slice(&width.to_be_bytes());
    png[20..24].copy_from_slice(&height.to_be_bytes());
    let crc = crc32(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    png
}

fn inline(kind: MediaKind, mime: &str, bytes: &[u8], strict_type: bool) -> MediaRef {
    MediaRef {
        kind,
        payload: Payload::Base64 {
            mime: mime.into(),
            data: STANDARD.encode(bytes),
        },
        strict_type,
    }
}

#[test]
fn images_decode_with_their_format_and_size() {
    assert_eq!(
        decode_image(&encode(30, 57, ImageFormat::Png)),
        Ok(("png", 30, 57))
    );
    assert_eq!(
        decode_image(&encode(64, 8, ImageFormat::Jpeg)),
        Ok(("jpeg", 64, 8))
    );
    assert_eq!(
        decode_image(b"GIF89a\x01\0\x01\0"),
        Err("Gif images are not supported (PNG and JPEG are)".into())
    );
    assert_eq!(
        decode_image(b"hello"),
        Err("cannot identify image file".into())
    );
    // A truncated file has a header but no pixels.
    let png = encode(40, 40, ImageFormat::Png);
    assert!(decode_image(&png[..png.len() / 2]).is_err());
    let jpeg = encode(40, 40, ImageFormat::Jpeg);
    assert!(decode_image(&jpeg[..20]).is_err());
}

#[test]
fn huge_images_are_refused_from_the_header() {
    // 40 bytes of PNG claiming 9000×10 or 7000×7000: refused before any pixel is allocated.
    let wide = decode_image(&png_claiming(9000, 10)).unwrap_err();
    assert!(wide.contains("9000x10, over the limit"), "{wide}");
    let big = decode_image(&png_claiming(7000, 7000)).unwrap_err();
    assert!(big.contains("40 megapixels"), "{big}");
    // A plausible size with missing pixels fails in the decoder instead.
    assert!(decode_image(&png_claiming(100, 100)).is_err());
}

#[test]
fn video_containers_by_signature() {
    assert_eq!(container(b"\0\0\0\x18ftypisom\0\0"), Ok("mp4"));
    assert_eq!(container(b"\0\0\0\x14ftypqt  \0\0"), Ok("mov"));
    assert_eq!(container(&[0x1a, 0x45, 0xdf, 0xa3, 0x9f]), Ok("webm"));
    assert!(container(b"RIFF....AVI ").is_err());
    assert!(container(b"ftyp").is_err());
}

#[test]
fn tokens_are_28_pixel_patches() {
    let image = Loaded {
        kind: MediaKind::Image,
        source: "data",
        format: "png",
        size: Some((56, 57)),
        bytes: 1,
        hash: 0,
    };
    assert_eq!((image.tokens(), image.pixels()), (2 * 3, 56 * 57));
    let video = Loaded {
        kind: MediaKind::Video,
        size: None,
        ..image
    };
    assert_eq!((video.tokens(), video.pixels()), (0, 0));
}

#[test]
fn fnv1a_reference_values() {
    assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
}

#[tokio::test]
async fn inline_items_load_or_fail_as_a_vision_server_would() {
    let loader = Loader::new().unwrap();
    let png = encode(30, 20, ImageFormat::Png);
    let loaded = loader
        .load(inline(MediaKind::Image, "image/png", &png, true))
        .await
        .unwrap();
    assert_eq!(
        loaded,
        Loaded {
            kind: MediaKind::Image,
            source: "data",
            format: "png",
            size: Some((30, 20)),
            bytes: png.len(),
            hash: fnv1a(&png),
        }
    );
    // vLLM sniffs the bytes; Anthropic holds them to the declared type.
    assert!(
        loader
            .load(inline(MediaKind::Image, "image/jpeg", &png, false))
            .await
            .is_ok()
    );
    let error = |media| async { loader.load(media).await.unwrap_err() };
    assert_eq!(
        error(inline(MediaKind::Image, "image/jpeg", &png, true)).await,
        "Failed to load image: the data is png, not the declared media type image/jpeg"
    );
    assert!(
        error(inline(MediaKind::Image, "image/gif", &png, false))
            .await
            .starts_with("Failed to load image: unsupported media type \"image/gif\"")
    );
    assert_eq!(
        error(inline(MediaKind::Image, "image/png", b"", false)).await,
        "Failed to load image: no data"
    );
    assert_eq!(
        error(inline(
            MediaKind::Image,
            "image/png",
            b"not an image",
            false
        ))
        .await,
        "Failed to load image: cannot identify image file"
    );
    let bad_base64 = MediaRef {
        kind: MediaKind::Image,
        payload: Payload::Base64 {
            mime: "image/png".into(),
            data: "iVBOR!!".into(),
        },
        strict_type: false,
    };
    assert!(
        error(bad_base64)
            .await
            .starts_with("Failed to load image: invalid base64 data:")
    );
    let mp4 = b"\0\0\0\x18ftypisom\0\0\x02\0";
    let video = loader
        .load(inline(MediaKind::Video, "video/mp4", mp4, false))
        .await
        .unwrap();
    assert_eq!((video.format, video.size), ("mp4", None));
    assert!(
        error(inline(
            MediaKind::Video,
            "video/mp4",
            b"garbage!garbage!",
            false
        ))
        .await
        .starts_with("Failed to load video: not an MP4")
    );
    assert!(
        error(inline(MediaKind::Video, "video/avi", mp4, false))
            .await
            .contains("unsupported media type")
    );
}

#[test]
fn unpadded_base64_is_accepted() {
    assert_eq!(BASE64.decode("YWI").unwrap(), b"ab");
    assert_eq!(BASE64.decode("YWI=").unwrap(), b"ab");
    assert!(
        BASE64.decode("YW-_").is_err(),
        "the URL-safe alphabet is not"
    );
}

#[test]
fn the_ledger_keeps_the_last_items_in_order() {
    let ledger = Ledger::default();
    let item = |n: usize| Loaded {
        kind: MediaKind::Image,
        source: "url",
        format: "jpeg",
        size: Some((n as u32, 1)),
        bytes: n,
        hash: 0xab,
    };
    ledger.record(Some("r-1"), &[item(1), item(2)]);
    let items = ledger.json();
    assert_eq!(
        items[0],
        json!({"request_id": "r-1", "kind": "image", "source": "url", "format": "jpeg",
               "width": 1, "height": 1, "bytes": 1, "hash": "00000000000000ab"})
    );
    let many: Vec<_> = (3..LEDGER_LEN + 10).map(item).collect();
    ledger.record(None, &many);
    let items = ledger.json();
    let items = items.as_array().unwrap();
    assert_eq!(items.len(), LEDGER_LEN);
    // Items 1 to LEDGER_LEN + 9 went in: the first nine were dropped.
    assert_eq!(items[0]["bytes"], 10);
    assert_eq!(items[LEDGER_LEN - 1]["bytes"], LEDGER_LEN + 9);
    assert_eq!(items[0]["request_id"], Value::Null);
}
