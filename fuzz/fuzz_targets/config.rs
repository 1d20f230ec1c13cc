//! `cargo fuzz run config`: `drivers::config` (tests/fuzz_drivers/mod.rs). A valid config
//! may ask for a million-token prompt, so only the allocator's absolute ceiling applies.
#![no_main]

use inferprobe_fuzz::{Capped, drivers};

#[global_allocator]
static ALLOCATOR: Capped = Capped;

libfuzzer_sys::fuzz_target!(|data: &[u8]| drivers::config(data));
