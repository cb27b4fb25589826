//! The allocator of a plugin built for `wasm32-unknown-unknown`: dlmalloc,
//! whose first region is an arena in the module's own zeroed data, so that
//! a fresh instance serves its first allocations from its initial memory.
//! Rust's allocator on that target grows the memory for its first
//! allocation, and every call runs in a fresh instance: a `memory.grow` (and
//! the host's reset of the grown pages) in every call.

use core::alloc::{GlobalAlloc, Layout};
use core::arch::wasm32;
use core::cell::UnsafeCell;
use core::ptr;

use dlmalloc::{Allocator, Dlmalloc};

/// The first region: the size most calls' allocations fit in.
const ARENA: usize = 256 << 10;

/// The wasm page size.
const PAGE: usize = 64 << 10;

#[repr(C, align(16))]
struct Arena(UnsafeCell<[u8; ARENA]>);

/// The heap's state. The target has no threads (no `atomics`): nothing else
/// runs while one allocation does.
struct Heap {
    arena: Arena,
    arena_given: UnsafeCell<bool>,
    dlmalloc: UnsafeCell<Dlmalloc<Pages>>,
}

// SAFETY: wasm32-unknown-unknown without the `atomics` feature has one
// thread; nothing is shared.
unsafe impl Sync for Heap {}

static HEAP: Heap = Heap {
    arena: Arena(UnsafeCell::new([0; ARENA])),
    arena_given: UnsafeCell::new(false),
    dlmalloc: UnsafeCell::new(Dlmalloc::new_with_allocator(Pages)),
};

/// Where dlmalloc gets its regions: the arena once, then new pages.
struct Pages;

// SAFETY: the regions handed out are the arena (once) and pages the memory
// grew by, each owned by dlmalloc alone from then on.
unsafe impl Allocator for Pages {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        // SAFETY: one thread (see `Heap`).
        let given = unsafe { &mut *HEAP.arena_given.get() };
        if !*given && size <= ARENA {
            *given = true;
            return (HEAP.arena.0.get().cast(), ARENA, 0);
        }
        let pages = size.div_ceil(PAGE);
        let previous = wasm32::memory_grow(0, pages);
        if previous == usize::MAX {
            return (ptr::null_mut(), 0, 0);
        }
        ((previous * PAGE) as *mut u8, pages * PAGE, 0)
    }

    fn remap(&self, _: *mut u8, _: usize, _: usize, _: bool) -> *mut u8 {
        ptr::null_mut()
    }

    fn free_part(&self, _: *mut u8, _: usize, _: usize) -> bool {
        false
    }

    fn free(&self, _: *mut u8, _: usize) -> bool {
        false
    }

    fn can_release_part(&self, _: u32) -> bool {
        false
    }

    fn allocates_zeros(&self) -> bool {
        // The arena is zeroed data until dlmalloc first uses it, and new
        // pages are zeroed.
        true
    }

    fn page_size(&self) -> usize {
        PAGE
    }
}

/// The global allocator: [`HEAP`]'s dlmalloc.
struct Global;

#[global_allocator]
static GLOBAL: Global = Global;

fn dlmalloc() -> &'static mut Dlmalloc<Pages> {
    // SAFETY: one thread (see `Heap`), and no allocation calls back into
    // the allocator.
    unsafe { &mut *HEAP.dlmalloc.get() }
}

// SAFETY: dlmalloc's functions keep `GlobalAlloc`'s contract for the layouts
// they are given.
unsafe impl GlobalAlloc for Global {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `GlobalAlloc::alloc`.
        unsafe { dlmalloc().malloc(layout.size(), layout.align()) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `GlobalAlloc::alloc_zeroed`.
        unsafe { dlmalloc().calloc(layout.size(), layout.align()) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator with `layout`.
        unsafe { dlmalloc().free(ptr, layout.size(), layout.align()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`.
        unsafe { dlmalloc().realloc(ptr, layout.size(), layout.align(), new_size) }
    }
}
