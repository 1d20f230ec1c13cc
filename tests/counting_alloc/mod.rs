//! A counting global allocator for the test binaries that measure heap: live bytes and
//! their peak. Each binary that uses it declares it its own (`#[global_allocator] static
//! ALLOCATOR: Counting = Counting;`), so no other binary's allocations pay for the count.
//! Test-only: the library itself forbids unsafe code.
#![allow(dead_code)] // each binary uses a different subset

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let live = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(live, Relaxed);
}

// SAFETY: every method forwards to `System` unchanged; the counters are bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old_size = layout.size();
        if new_size > old_size {
            grew(new_size - old_size);
        }
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if new.is_null() {
            // Failed: the old block is still live, at its old size.
            if new_size > old_size {
                LIVE.fetch_sub(new_size - old_size, Relaxed);
            }
        } else if new_size < old_size {
            LIVE.fetch_sub(old_size - new_size, Relaxed);
        }
        new
    }
}

/// Heap bytes live now, in the whole process.
pub fn live() -> usize {
    LIVE.load(Relaxed)
}

/// Peak live bytes `f` added above what was live when it started.
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let out = f();
    (out, PEAK.load(Relaxed).saturating_sub(base))
}
