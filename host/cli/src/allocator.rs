//! How the process's allocator is tuned, before any thread starts.

/// One glibc arena for the whole process, unless `MALLOC_ARENA_MAX` says otherwise.
///
/// glibc gives a thread that finds the arena busy an arena of its own (up to eight per
/// core), and memory freed into an arena serves only that arena's next allocations. The
/// runtime's tasks move between worker threads, so a cached object is allocated in one arena
/// and freed in another, and each arena keeps its own free pages: at 1,000 CRs the three
/// arenas held 2 MB more than one does (docs/performance.md, "Which allocator"). Small
/// allocations come from each thread's own cache without taking the arena's lock, which is
/// why one arena shared by a few threads costs little time.
pub fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt sets a tunable of the allocator and takes its lock to do so; it is
        // called before any other thread exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}
