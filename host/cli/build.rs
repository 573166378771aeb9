//! Links `ork` with packed relative relocations (`DT_RELR`) on Linux with glibc. Its table of
//! relative relocations, read at every start and kept resident, goes from 1.5 MB to 18 KB,
//! and the runtime's resident memory drops by about 3 MB (docs/performance.md). Running it
//! needs glibc 2.36 or later (Debian 12, the image's base); a GNU ld older than 2.38 warns
//! about the option and links without it.

fn main() {
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    if target("CARGO_CFG_TARGET_OS") == "linux" && target("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
