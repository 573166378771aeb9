//! Gives back the pages of `ork`'s own code and constants that start-up mapped (the Katalog's
//! load and compile, the command line, the Live API's router), once it is over.
//!
//! Start-up runs megabytes of code that a running host never calls again, and a page of
//! code, once mapped, stays in the process's resident set for good. Dropping the mappings
//! of the binary's clean pages (`MADV_DONTNEED`) leaves them in the page cache; what runs
//! next maps its pages again, by minor faults, in the 64 KB windows the kernel maps around
//! a fault. This is what the kernel does itself under memory pressure, so no code path
//! depends on it, and it costs no read from disk while the file is cached.
//!
//! Only the binary's read-only mappings without a private copy of any page are dropped:
//! a page the loader relocated (`.data.rel.ro`) holds values the file does not, so its
//! mapping is left alone.

/// Drops the mappings of the binary's clean read-only pages; returns the bytes they held
/// resident. Does nothing where `/proc` or `madvise` is not there.
pub fn release() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
            return 0;
        };
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
            return 0;
        };
        clean_mappings(&smaps, &exe.to_string_lossy())
            .into_iter()
            .filter(drop_pages)
            .map(|m| m.resident)
            .sum()
    }
    #[cfg(not(target_os = "linux"))]
    0
}

/// One mapping of the binary `clean_mappings` chose.
#[derive(Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    /// Bytes resident before they are dropped.
    resident: u64,
}

/// The mappings of `exe` in `smaps` that are not writable and hold no private page.
fn clean_mappings(smaps: &str, exe: &str) -> Vec<Mapping> {
    // The path is last in a mapping's header and may hold spaces; a replaced binary's ends
    // in " (deleted)".
    let of_exe = format!(" {exe}");
    let mut chosen = Vec::new();
    // The mapping the fields below belong to, and whether it may be dropped so far.
    let mut current: Option<(Mapping, bool)> = None;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-').and_then(|(s, e)| {
            let hex = |h| usize::from_str_radix(h, 16).ok();
            hex(s).zip(hex(e))
        }) {
            // A mapping's header: range, permissions, offset, device, inode, path.
            chosen.extend(current.take().filter(|(_, clean)| *clean).map(|(m, _)| m));
            let perms = fields.next().unwrap_or("");
            let readonly_private = perms.starts_with('r') && perms.get(1..2) == Some("-") && perms.ends_with('p');
            let clean = readonly_private && line.trim_end().ends_with(&of_exe);
            current = Some((
                Mapping {
                    start,
                    end,
                    resident: 0,
                },
                clean,
            ));
            continue;
        }
        let kib = || fields.clone().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        match (first, current.as_mut()) {
            ("Rss:", Some((mapping, _))) => mapping.resident = kib() * 1024,
            // A private copy (a relocated page): the file does not hold what it holds.
            ("Anonymous:", Some((_, clean))) if kib() > 0 => *clean = false,
            _ => {}
        }
    }
    chosen.extend(current.filter(|(_, clean)| *clean).map(|(m, _)| m));
    chosen
}

#[cfg(target_os = "linux")]
fn drop_pages(mapping: &Mapping) -> bool {
    // SAFETY: the range is one whole mapping of the binary's file, read-only and holding no
    // private page, so every page reads back from the file as it was; no reference into it
    // can see a change. Code running in it on another thread faults its page in again.
    unsafe {
        libc::madvise(
            mapping.start as *mut libc::c_void,
            mapping.end - mapping.start,
            libc::MADV_DONTNEED,
        ) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55a000000000-55a000200000 r--p 00000000 08:01 42 /usr/bin/ork
Size:               2048 kB
Rss:                1500 kB
Anonymous:             0 kB
55a000200000-55a000a00000 r-xp 00200000 08:01 42 /usr/bin/ork
Size:               8192 kB
Rss:                6000 kB
Anonymous:             0 kB
55a000a00000-55a000b00000 r--p 00a00000 08:01 42 /usr/bin/ork
Size:               1024 kB
Rss:                 800 kB
Anonymous:           780 kB
55a000b00000-55a000b10000 rw-p 00b00000 08:01 42 /usr/bin/ork
Rss:                  64 kB
Anonymous:            10 kB
7f0000000000-7f0000100000 r-xp 00000000 08:01 7 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 900 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
Rss:                1024 kB
Anonymous:          1024 kB
";

    #[test]
    fn only_the_binarys_clean_read_only_mappings_are_chosen() {
        let chosen = clean_mappings(SMAPS, "/usr/bin/ork");
        assert_eq!(
            chosen,
            [
                Mapping {
                    start: 0x55a0_0000_0000,
                    end: 0x55a0_0020_0000,
                    resident: 1500 * 1024
                },
                Mapping {
                    start: 0x55a0_0020_0000,
                    end: 0x55a0_00a0_0000,
                    resident: 6000 * 1024
                },
            ],
            "the relocated, the writable, another file's and anonymous mappings are left"
        );
        assert!(clean_mappings(SMAPS, "/usr/bin/other").is_empty());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn released_pages_leave_the_resident_set_and_run_again() {
        let file_kib = || orkestra_test_support::bench::proc_status("self", "RssFile:");
        let before = file_kib();
        let released = release();
        let after = file_kib();
        assert!(
            released > 1 << 20,
            "a test binary has megabytes of its code resident: {released}"
        );
        // Less than was released: the harness and this test map some of it again at once.
        assert!(after < before, "RssFile {before} KiB -> {after} KiB");
        // The code and constants given back run and read as before.
        assert_eq!(clean_mappings(SMAPS, "/usr/bin/ork").len(), 2);
    }
}
