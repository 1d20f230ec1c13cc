//! Memory stays bounded by the event limit whatever a server sends. A counting global
//! allocator records the peak of live heap bytes while the SSE decoder and the backends'
//! parsers read hostile input. Its own test binary with a single test, so no other test's
//! allocations count (the library itself forbids unsafe code; this wrapper is test-only).

mod counting_alloc;
#[allow(dead_code)] // this binary uses only the backends driver
mod fuzz_drivers;

use counting_alloc::{Counting, peak_during};
use inferprobe::sse::{SseDecoder, SseError, SseEvent};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MIB: usize = 1 << 20;
const READ: usize = 64 << 10;

/// Feed `total` bytes, `READ` at a time from `next_read`, draining events after each read
/// as the probe does; stop at the first error.
fn stream(limit: usize, total: usize, mut next_read: impl FnMut(&mut [u8])) -> Option<SseError> {
    let mut decoder = SseDecoder::new(limit);
    let mut events: Vec<SseEvent> = Vec::new();
    let mut buf = vec![0; READ];
    let mut sent = 0;
    while sent < total {
        next_read(&mut buf);
        if let Err(e) = decoder.push(&buf, &mut events) {
            return Some(e);
        }
        events.clear();
        sent += READ;
    }
    None
}

/// One test for the whole binary: scenarios run one after another so peaks do not mix.
#[test]
fn decoding_hostile_streams_holds_a_small_multiple_of_the_event_limit() {
    // 1. 32 MiB of random bytes with no line terminator, 1 MiB limit: the line buffer
    //    grows to the limit and the decoder refuses; it never holds the stream.
    let mut runner = TestRunner::new(Config::with_cases(4));
    runner
        .run(&any::<u64>(), |seed| {
            let mut state = seed | 1;
            let (err, peak) = peak_during(|| {
                stream(MIB, 32 * MIB, |buf| {
                    for b in buf.iter_mut() {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        *b = match state as u8 {
                            b'\n' | b'\r' => b'x',
                            other => other,
                        };
                    }
                })
            });
            prop_assert_eq!(err, Some(SseError::TooLarge { limit: MIB }));
            prop_assert!(peak <= 3 * MIB, "newline-free garbage: peak {peak} bytes");
            Ok(())
        })
        .unwrap();

    // 2. Endless `data:` lines and no blank line: one event that never ends.
    let line = b"data: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab\n";
    let (err, peak) = peak_during(|| {
        stream(MIB, 32 * MIB, |buf| {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = line[i % line.len()];
            }
        })
    });
    assert_eq!(err, Some(SseError::TooLarge { limit: MIB }));
    assert!(peak <= 4 * MIB, "endless event: peak {peak} bytes");

    // 3. A long `id:` then many tiny events, each carrying the last event ID: the ID is
    //    shared, not copied per event (it was: 9000 events × 32 KiB from every read).
    let mut pos = 0usize;
    let (err, peak) = peak_during(|| {
        stream(MIB, 8 * MIB, |buf| {
            for b in buf.iter_mut() {
                *b = match pos {
                    0..4 => b"id: "[pos],
                    4..32772 => b'i',
                    _ => b"\ndata:\n"[(pos - 32772) % 7],
                };
                pos += 1;
            }
        })
    });
    assert_eq!(err, None);
    assert!(peak <= 4 * MIB, "shared event id: peak {peak} bytes");

    // 4. The backends' parsers on events just under the size limit: JSON that expands most
    //    when parsed (an array of zeros), deep nesting, a long string, where each format
    //    reads it. The cost is per event and bounded by the limit: a serde_json `Value`
    //    is 32 bytes per `0,` (20 MB seen for a 1 MB array).
    fuzz_drivers::backends(b"\x00data: {}\n\n"); // build the shared targets first
    let size = 1000 * 1000;
    let zeros = format!("[{}0]", "0,".repeat(size / 2 - 2));
    let nested = "[".repeat(size);
    let string = format!("\"{}\"", "x".repeat(size - 2));
    let wrappers = [
        "{\"choices\":P}",
        "{\"text_output\":P}",
        "{\"type\":\"content_block_delta\",\"delta\":P}",
        "P",
    ];
    for kind in 0..9u8 {
        for payload in [&zeros, &nested, &string] {
            for wrapper in wrappers {
                // The plain target (default 1 MiB event limit), one read.
                let mut input = vec![kind + 18 * 5];
                input.extend(b"data: ");
                input.extend(wrapper.replace('P', payload).as_bytes());
                input.extend(b"\n\n");
                let ((), peak) = peak_during(|| fuzz_drivers::backends(&input));
                assert!(
                    peak <= 32 * MIB,
                    "backend {kind} on a {size}-byte event: peak {peak} bytes"
                );
            }
        }
    }
}
