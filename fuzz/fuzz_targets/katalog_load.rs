//! Any bytes as a Katalog file: loading must return Ok or a located error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = orkestra_katalog::load_sources(&[("fuzz/katalog.yaml".into(), text.to_string())]);
    }
});
