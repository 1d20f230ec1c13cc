//! `cargo fuzz run backends`: `drivers::backends` (tests/fuzz_drivers/mod.rs), with the
//! heap bounded by a multiple of the input.
#![no_main]

use inferprobe_fuzz::{Capped, bounded_by_input, drivers};

#[global_allocator]
static ALLOCATOR: Capped = Capped;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // Parsed JSON takes up to ~32 bytes per input byte (a `Value` per `0,`); the first
    // input also builds the shared targets (tokenizer included).
    bounded_by_input(data, 64, 16 << 20, drivers::backends);
});
