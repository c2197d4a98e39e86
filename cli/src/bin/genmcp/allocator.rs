//! The binary's allocator (docs/benchmark.md, "Allocators"): jemalloc by
//! default (cargo feature `jemalloc`), tuned so that memory freed after a
//! burst goes back to the system within about a second of the server falling
//! idle; mimalloc (feature `mimalloc`) or the system allocator (no allocator
//! feature: `--no-default-features`) otherwise. The library never sets one.

/// How long jemalloc keeps freed ("dirty") pages before returning them to the
/// system, in milliseconds. jemalloc's own default is 10 s, and it purges
/// only when the thread that freed them allocates again, so an idle server
/// kept a burst's pages. With a background thread purging on this timer, an
/// idle stream's memory after a burst comes back to its idle figure (the
/// memory mode of `genmcp bench`), and the page faults of refilling them
/// are paid at most once per second of a busy stream.
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
pub(crate) const DIRTY_DECAY_MS: isize = 1_000;

/// Applies [`DIRTY_DECAY_MS`] to every arena (the existing ones and those
/// created later), returns pages that were advised away at once (no "muzzy"
/// stage) and starts jemalloc's background purging threads. An operator's
/// own `_RJEM_MALLOC_CONF` (jemalloc's configuration variable in this
/// build) is left alone. Failures are ignored: they leave jemalloc's
/// defaults, which are correct, only slower to give memory back.
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
pub(crate) fn tune() {
    use tikv_jemalloc_ctl::{Access as _, AsName as _};
    if std::env::var_os("_RJEM_MALLOC_CONF").is_some() {
        return;
    }
    let set = |key: &str, value: isize| {
        let _ = key.name().write(value);
    };
    set("arenas.dirty_decay_ms\0", DIRTY_DECAY_MS);
    set("arenas.muzzy_decay_ms\0", 0);
    // Arenas already made (this early, usually only arena 0); writing one
    // not made yet fails harmlessly, and it takes the defaults above.
    let made = tikv_jemalloc_ctl::arenas::narenas::read().unwrap_or(0);
    for i in 0..made {
        set(&format!("arena.{i}.dirty_decay_ms\0"), DIRTY_DECAY_MS);
        set(&format!("arena.{i}.muzzy_decay_ms\0"), 0);
    }
    // One purging thread is enough for a server that is idle when it purges.
    let _ = tikv_jemalloc_ctl::max_background_threads::write(1);
    let _ = tikv_jemalloc_ctl::background_thread::write(true);
}

/// Nothing to tune for mimalloc or the system allocator.
#[cfg(not(all(feature = "jemalloc", not(feature = "mimalloc"))))]
pub(crate) fn tune() {}

#[cfg(all(test, feature = "jemalloc", not(feature = "mimalloc")))]
mod tests {
    use tikv_jemalloc_ctl::{Access as _, AsName as _};

    #[test]
    fn jemalloc_returns_freed_pages_within_a_second_from_a_background_thread() {
        // The test binary links jemalloc as its allocator too (main.rs).
        super::tune();
        let decay = |key: &str| -> isize { key.name().read().unwrap_or(-2) };
        assert_eq!(decay("arenas.dirty_decay_ms\0"), super::DIRTY_DECAY_MS);
        assert_eq!(decay("arenas.muzzy_decay_ms\0"), 0);
        assert_eq!(decay("arena.0.dirty_decay_ms\0"), super::DIRTY_DECAY_MS);
        assert_eq!(decay("arena.0.muzzy_decay_ms\0"), 0);
        assert_eq!(
            tikv_jemalloc_ctl::background_thread::read().ok(),
            Some(true)
        );

        // What that is for: a burst's memory, freed, leaves the resident
        // set while the process does nothing more (jemalloc's defaults keep
        // it: 10 s of decay, and purging only when this thread allocates).
        let resident = genmcp_cli::bench::resident_kib;
        let before = resident();
        let burst: Vec<Vec<u8>> = (0..64 * 1024).map(|i| vec![i as u8 | 1; 1024]).collect();
        let peak = resident();
        assert!(
            peak > before + 48 * 1024,
            "the burst is resident: {before} -> {peak} KiB"
        );
        drop(burst);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut after = resident();
        while after > before + 8 * 1024 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(100));
            after = resident();
        }
        assert!(
            after <= before + 8 * 1024,
            "64 MiB freed, still resident after 5 s idle: {before} -> {peak} -> {after} KiB"
        );
    }
}
