//! `cargo fuzz run sse_decoder`: `drivers::sse_decoder` (tests/fuzz_drivers/mod.rs), with
//! the heap bounded by a multiple of the input.
#![no_main]

use inferprobe_fuzz::{Capped, bounded_by_input, drivers};

#[global_allocator]
static ALLOCATOR: Capped = Capped;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // Two decodes and the reference, each holding its events (~64 bytes per 7 input
    // bytes at worst) and a line buffer; nothing is fixed-size beyond a few KiB. A real
    // vLLM stream with 20 logprobs a token (tests/fixtures/sampling/vllm-chat-raw.sse: 4 KB
    // lines, each buffer doubling past its line) read a byte at a time takes 68 bytes per
    // input byte: 80 leaves room and still fails a copy per event or a count believed.
    bounded_by_input(data, 80, 64 << 10, drivers::sse_decoder);
});
