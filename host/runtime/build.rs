//! The benchmarks that run the runtime as a contender link as `ork` does (`host/cli/build.rs`):
//! with packed relative relocations on Linux with glibc, so their memory is the shipped
//! binary's.

fn main() {
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    if target("CARGO_CFG_TARGET_OS") == "linux" && target("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo::rustc-link-arg-benches=-Wl,-z,pack-relative-relocs");
    }
}
