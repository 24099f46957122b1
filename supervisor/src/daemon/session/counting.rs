//! A counting allocator for the library's tests: the bytes each thread has
//! allocated and not freed, so a memory budget is a test like any other
//! (run in parallel with the rest, not alone and ignored as `mallinfo2`'s
//! process-wide counters needed). Counted as glibc's malloc takes them (a
//! chunk: the request plus an 8-byte header, in 16-byte steps, 32 at
//! least), the figures `mallinfo2` gave before; memory freed by another
//! thread than the one that allocated it is miscounted, which a test that
//! builds and measures on its own thread never does.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    /// Net bytes this thread allocated (a const initialiser: reading it
    /// never allocates, which an allocator must not).
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

/// What glibc's malloc takes for a request of `size` bytes.
fn chunk(size: usize) -> isize {
    let taken = (size.saturating_add(8 + 15) & !15).max(32);
    isize::try_from(taken).unwrap_or(isize::MAX)
}

fn count(bytes: isize) {
    // A thread being torn down has no counter left: nothing to count.
    let _ = LIVE.try_with(|live| live.set(live.get().wrapping_add(bytes)));
}

// SAFETY: every call is passed on to the system allocator unchanged; the
// counting only reads the layouts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(chunk(layout.size()));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(chunk(layout.size()));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        count(-chunk(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(chunk(new_size) - chunk(layout.size()));
        }
        p
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Bytes this thread has allocated and not freed (glibc chunk sizes).
pub(super) fn live() -> isize {
    LIVE.with(Cell::get)
}

#[test]
fn what_a_thread_allocates_and_frees_is_counted_as_malloc_chunks() {
    let before = live();
    let a: Box<[u8]> = vec![0u8; 100].into_boxed_slice();
    assert_eq!(live() - before, 112, "100 bytes + 8, in 16-byte steps");
    let b = Box::new(1u8);
    assert_eq!(live() - before, 112 + 32, "32 at least");
    drop(a);
    drop(b);
    assert_eq!(live(), before);
}
