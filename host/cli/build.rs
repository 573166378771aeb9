//! How `ork` is linked on Linux with glibc, for its resident memory (docs/performance.md):
//!
//! - With packed relative relocations (`DT_RELR`): its table of relative relocations, read at
//!   every start and kept resident, goes from 1.5 MB to 18 KB. Running it needs glibc 2.36 or
//!   later (Debian 12, the image's base); a GNU ld older than 2.38 warns about the option and
//!   links without it.
//! - In a release build linked by LLD (Rust's default linker on x86-64 Linux since 1.90), with
//!   the functions a running host executes placed side by side (`symbol-order.txt`, written
//!   by `scripts/symbol-order.sh`): the kernel maps code in 64 KB windows around each page a
//!   call touches, and scattered over the binary, the few megabytes that run kept 16 MB of
//!   code resident. Another linker, set in RUSTFLAGS, gets no such option.

use std::path::Path;
use std::process::Command;

fn main() {
    let var = |key: &str| std::env::var(key).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    // Absolute: the linker runs in the workspace's directory, not this package's.
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join("symbol-order.txt");
    println!("cargo::rerun-if-changed=symbol-order.txt");
    println!("cargo::rerun-if-changed=build.rs");
    let chosen_linker = ["fuse-ld", "linker", "link-self-contained"]
        .iter()
        .any(|flag| var("CARGO_ENCODED_RUSTFLAGS").contains(flag));
    if var("TARGET") == "x86_64-unknown-linux-gnu"
        && var("PROFILE") == "release"
        && !chosen_linker
        && links_with_lld(&var("RUSTC"))
        && order.exists()
    {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        // A name the binary no longer has (a stale list) is skipped without a warning each.
        println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether `rustc` links x86-64 Linux binaries with its own LLD by default (1.90 and later).
fn links_with_lld(rustc: &str) -> bool {
    let Ok(output) = Command::new(rustc).arg("--version").output() else {
        return false;
    };
    let version = String::from_utf8_lossy(&output.stdout);
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let minor = version
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse::<u32>().ok());
    version.starts_with("rustc 1.") && minor.is_some_and(|m| m >= 90)
}
