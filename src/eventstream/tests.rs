//! Frames written by the AWS SDK for Rust's own encoder (`write_message_to`), read back.

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::Bytes;

use super::*;

fn message(kind: &str, name: &str, payload: &str) -> Vec<u8> {
    let (type_header, name_header) = match kind {
        "exception" => (":exception-type", name),
        _ => (":event-type", name),
    };
    let message = Message::new(Bytes::from(payload.to_owned()))
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String(kind.to_owned().into()),
        ))
        .add_header(Header::new(
            type_header,
            HeaderValue::String(name_header.to_owned().into()),
        ))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ));
    let mut bytes = Vec::new();
    write_message_to(&message, &mut bytes).unwrap();
    bytes
}

fn stream() -> Vec<u8> {
    let mut bytes = message("event", "messageStart", r#"{"role":"assistant"}"#);
    bytes.extend(message(
        "event",
        "contentBlockDelta",
        r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#,
    ));
    bytes.extend(message(
        "exception",
        "throttlingException",
        r#"{"message":"slow down"}"#,
    ));
    bytes
}

#[test]
fn every_split_of_the_sdks_frames_gives_the_same_events() {
    let bytes = stream();
    let mut whole = Vec::new();
    EventStreamDecoder::new(1 << 20)
        .push(&bytes, &mut whole)
        .unwrap();
    assert_eq!(whole.len(), 3);
    assert_eq!(whole[0].kind(), "messageStart");
    assert_eq!(
        whole[1].data,
        r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#
    );
    assert_eq!(whole[2].kind(), "exception/throttlingException");
    for cut in 0..bytes.len() {
        let mut decoder = EventStreamDecoder::new(1 << 20);
        let mut events = Vec::new();
        decoder.push(&bytes[..cut], &mut events).unwrap();
        decoder.push(&bytes[cut..], &mut events).unwrap();
        assert_eq!(events, whole, "split at {cut}");
        assert!(!decoder.has_partial_message());
    }
    let mut decoder = EventStreamDecoder::new(1 << 20);
    let mut events = Vec::new();
    for byte in &bytes {
        decoder
            .push(std::slice::from_ref(byte), &mut events)
            .unwrap();
    }
    assert_eq!(events, whole);
}

#[test]
fn a_flipped_bit_anywhere_is_a_corrupt_frame_never_a_wrong_event() {
    let bytes = message("event", "contentBlockDelta", r#"{"delta":{"text":"Hi"}}"#);
    for at in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[at] ^= 0x01;
        let mut events = Vec::new();
        let result = EventStreamDecoder::new(1 << 20).push(&bad, &mut events);
        // A CRC32 catches every single-bit error: in the prelude (its lengths, which must
        // not leave the probe waiting) at once, anywhere else once the message is whole.
        assert!(events.is_empty(), "byte {at}: {events:?}");
        assert!(
            matches!(result, Err(FrameError::Corrupt(_))),
            "byte {at}: {result:?}"
        );
    }
}

#[test]
fn a_message_over_the_limit_is_refused_from_its_prelude() {
    let bytes = message("event", "contentBlockDelta", &"x".repeat(4096));
    let mut events = Vec::new();
    let result = EventStreamDecoder::new(1024).push(&bytes[..PRELUDE], &mut events);
    assert!(
        matches!(result, Err(FrameError::TooLarge { limit: 1024, .. })),
        "{result:?}"
    );
}

#[test]
fn an_error_message_is_an_error_event_and_a_cut_one_is_partial() {
    let message = Message::new(Bytes::new())
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String("error".into()),
        ))
        .add_header(Header::new(
            ":error-code",
            HeaderValue::String("InternalFailure".into()),
        ))
        .add_header(Header::new(
            ":error-message",
            HeaderValue::String("boom".into()),
        ));
    let mut bytes = Vec::new();
    write_message_to(&message, &mut bytes).unwrap();
    let mut decoder = EventStreamDecoder::new(1 << 20);
    let mut events = Vec::new();
    decoder.push(&bytes, &mut events).unwrap();
    assert_eq!(events[0].kind(), "error");
    assert!(events[0].data.contains("InternalFailure") && events[0].data.contains("boom"));
    decoder
        .push(&bytes[..bytes.len() - 1], &mut events)
        .unwrap();
    assert!(decoder.has_partial_message());
}
