//! What the fuzz targets share: the drivers (one file with the property tests in the main
//! crate's tests/, so both run exactly the same checks) and an allocator that makes
//! unbounded allocation a crash on any build: libFuzzer's `-malloc_limit_mb` only sees
//! allocations through a sanitizer's malloc hooks, which the stable-toolchain path of
//! `scripts/fuzz.sh` may build without, and `-rss_limit_mb` only samples once a second.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "../../tests/fuzz_drivers/mod.rs"]
pub mod drivers;

/// Live heap above this is a failure whatever the input (the largest legitimate use is
/// the config target's million-token synthetic prompts).
pub const MAX_LIVE_BYTES: usize = 384 << 20;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator with a ceiling on live bytes (crossing it aborts, which libFuzzer
/// reports as a crash and saves the input) and a high-water mark for [`peak_during`].
pub struct Capped;

fn grow(by: usize) {
    let live = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(live, Ordering::Relaxed);
    if live > MAX_LIVE_BYTES {
        // No allocation from here on: a fixed message, then abort.
        let _ = std::io::stderr().write_all(
            b"\n==inferprobe-fuzz== live heap above MAX_LIVE_BYTES: unbounded allocation\n",
        );
        std::process::abort();
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// counters are only bookkeeping.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            grow(new_size - layout.size());
        }
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if new_size < layout.size() {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        new
    }
}

/// Run `f` on `input` and fail if the heap it added at its peak is more than `per_byte`
/// times the input plus `fixed`: memory must grow with what the server sent, never with
/// what it claims (a count, a length) or by copying one part many times. Needs
/// [`Capped`] as the global allocator.
pub fn bounded_by_input(input: &[u8], per_byte: usize, fixed: usize, f: impl FnOnce(&[u8])) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    f(input);
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let bound = per_byte * input.len() + fixed;
    assert!(
        peak <= bound,
        "a {}-byte input took {peak} bytes of heap at its peak (bound {bound})",
        input.len()
    );
}
