//! The probe's per-event path, measured on real transcripts: SSE decoding alone, and
//! decode → parse (OpenAI chunk) → record, the work done for every event a server sends.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use inferprobe::backend::{BackendKind, StreamEvent};
use inferprobe::record::{RequestRecord, ResponseInfo};
use inferprobe::sse::SseDecoder;
use tokio::time::Instant;

fn transcript(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}.sse", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(path).unwrap()
}

/// A long stream: the transcript's token events repeated `times`, then its tail.
fn long_stream(name: &str, times: usize) -> (Vec<u8>, usize) {
    let text = String::from_utf8(transcript(name)).unwrap();
    let events: Vec<&str> = text.split_inclusive("\n\n").collect();
    let (body, tail) = events.split_at(events.len() - 2);
    let mut out = String::new();
    for _ in 0..times {
        out.extend(body.iter().copied());
    }
    out.extend(tail.iter().copied());
    let count = out.matches("\n\n").count();
    (out.into_bytes(), count)
}

fn decode_all(bytes: &[u8], read: usize) -> usize {
    let mut decoder = SseDecoder::default();
    let mut events = Vec::new();
    let mut n = 0;
    for chunk in bytes.chunks(read) {
        decoder.push(chunk, &mut events).unwrap();
        n += events.len();
        events.clear();
    }
    n
}

fn sse_decoder(c: &mut Criterion) {
    let (bytes, events) = long_stream("vllm/chat-continuous-usage", 100);
    let mut group = c.benchmark_group("sse_decoder");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    // Reads of one event each (a streaming server's usual write), and of 16 KiB.
    for read in [300, 16 * 1024] {
        group.bench_function(format!("{events}_events_{read}B_reads"), |b| {
            b.iter(|| black_box(decode_all(black_box(&bytes), read)))
        });
    }
    group.finish();
}

fn per_event(c: &mut Criterion) {
    let mut group = c.benchmark_group("per_event_path");
    for (name, kind) in [
        ("vllm/chat-continuous-usage", BackendKind::OpenAiChat),
        ("llama-server/completions-usage", BackendKind::OpenAi),
    ] {
        let (bytes, events) = long_stream(name, 100);
        group.throughput(Throughput::Elements(events as u64));
        let backend = kind.backend();
        group.bench_function(name.replace('/', "_"), |b| {
            b.iter(|| {
                let mut decoder = SseDecoder::default();
                let mut parser = backend.stream_parser();
                let mut batch = Vec::new();
                let t0 = Instant::now();
                let mut record = RequestRecord::new(t0);
                let mut info = ResponseInfo::default();
                let mut at = t0;
                for chunk in bytes.chunks(300) {
                    decoder.push(chunk, &mut batch).unwrap();
                    at += Duration::from_micros(50);
                    for event in batch.drain(..) {
                        match parser.on_event(&event, &mut info).unwrap() {
                            StreamEvent::Chunk(chunk) => record.on_chunk(at, chunk),
                            StreamEvent::KeepAlive => {}
                            StreamEvent::Done(chunk) => {
                                record.on_chunk(at, chunk);
                                record.done = true;
                                record.end = Some(at);
                            }
                        }
                    }
                }
                black_box(record.measure(None).unwrap())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sse_decoder, per_event);
criterion_main!(benches);
