//! The allocator of a contender's process, picked by `ORK_BENCH_ALLOCATOR` (`system`, the
//! default; `mimalloc`; `jemalloc`) when the process makes its first allocation, so one
//! benchmark binary can run ork with the allocator its binary ships with and a plain
//! controller with the one a plain Rust program has.
//!
//! The choice is read with `getenv` (which allocates nothing) and fixed from then on: every
//! block is freed by the allocator that made it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

const UNREAD: u8 = 0;
const SYSTEM: u8 = 1;
const MIMALLOC: u8 = 2;
const JEMALLOC: u8 = 3;

static CHOSEN: AtomicU8 = AtomicU8::new(UNREAD);

/// The variable, as a process's children inherit it.
pub const VARIABLE: &str = "ORK_BENCH_ALLOCATOR";

/// The allocator the `ork` binary ships with: the system's (glibc), kept by measurement
/// (docs/performance.md, "Which allocator"); its give-back after a burst of connections
/// calls glibc's `malloc_trim`.
pub const SHIPPED: &str = "system";

pub struct Chosen;

fn chosen() -> u8 {
    match CHOSEN.load(Ordering::Relaxed) {
        UNREAD => {
            // SAFETY: a NUL-terminated name; the value, if any, is read before any thread
            // of this process can change the environment.
            let value = unsafe { libc::getenv(c"ORK_BENCH_ALLOCATOR".as_ptr()) };
            let pick = if value.is_null() {
                SYSTEM
            } else {
                // SAFETY: getenv returns a NUL-terminated string that lives as long as the
                // environment is unchanged.
                match unsafe { std::ffi::CStr::from_ptr(value) }.to_bytes() {
                    b"mimalloc" => MIMALLOC,
                    b"jemalloc" => JEMALLOC,
                    _ => SYSTEM,
                }
            };
            // The first allocation is made before any other thread starts.
            CHOSEN.store(pick, Ordering::Relaxed);
            pick
        }
        pick => pick,
    }
}

/// The allocator chosen for this process.
fn picked() -> &'static dyn GlobalAlloc {
    match chosen() {
        MIMALLOC => &mimalloc::MiMalloc,
        JEMALLOC => &tikv_jemallocator::Jemalloc,
        _ => &System,
    }
}

// SAFETY: each call goes to one allocator, the same for the process's whole life, so every
// block is resized and freed by the allocator that made it.
unsafe impl GlobalAlloc for Chosen {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { picked().alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from the same allocator's `alloc`.
        unsafe { picked().dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { picked().alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from the same allocator's `alloc`.
        unsafe { picked().realloc(ptr, layout, new_size) }
    }
}
