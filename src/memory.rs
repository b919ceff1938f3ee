//! Hands memory that the allocator holds but no longer uses back to the
//! kernel.
//!
//! glibc's malloc keeps what a burst freed (a scrape of a big fleet, many
//! sweeps ending together) in its arenas, in holes between live blocks it
//! cannot release: with a thousand targets RSS was 58.9 MiB over a heap
//! whose peak was 36.7 MB (heaptrack; issue 14, BENCHMARKS.md "A thousand
//! targets for an hour"). Trimming every few seconds releases those pages
//! (a walk of the allocator's free lists, whose cost was not measured
//! apart). Its effect is
//! measured, not tested (a test's RSS moves with every other test): the
//! 5-minute runs at 1000 targets in BENCHMARKS.md before and after it (a3bb4f0
//! and f90e01d; the latter also stopped holding each target's last report).

use std::time::Duration;

/// How often the daemon trims.
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Returns the allocator's unused pages to the kernel; nothing where the
/// allocator is not glibc's.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it takes the allocator's
    // own locks and only releases pages that no allocation uses.
    unsafe {
        libc::malloc_trim(0);
    }
}
