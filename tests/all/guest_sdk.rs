//! The Rust guest SDK's own unit tests, built for wasm32-wasip2 as the examples are (with
//! SIMD, from `examples/.cargo/config.toml`) and run in wasmtime: its typed parse has a SIMD
//! path that exists only there, and those tests hold it to serde_json's results.

use std::path::PathBuf;
use std::process::Command;

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::p2::bindings::Command as WasiCommand;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Builds the SDK's unit tests as a WASI command, from `examples/` so its cargo settings hold.
fn build_tests() -> PathBuf {
    let examples = orkestra_test_support::guests::examples_dir();
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "test",
            "--no-run",
            "--locked",
            "--lib",
            "--target",
            "wasm32-wasip2",
            "--features",
            "hook",
            "--manifest-path",
            "../guest-sdk/Cargo.toml",
            "--message-format=json",
        ])
        .env("CARGO_TARGET_DIR", examples.join("target"))
        .current_dir(&examples)
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "building the SDK's tests for wasm32-wasip2:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .expect("cargo names the test executable")
}

/// Whether any function of the component's modules takes a SIMD bitmask: the skim's SIMD
/// path was compiled in.
fn uses_simd(wasm: &[u8]) -> bool {
    wasmparser::Parser::new(0).parse_all(wasm).any(|payload| match payload {
        Ok(wasmparser::Payload::CodeSectionEntry(body)) => body.get_operators_reader().is_ok_and(|reader| {
            reader
                .into_iter()
                .any(|op| matches!(op, Ok(wasmparser::Operator::I8x16Bitmask)))
        }),
        _ => false,
    })
}

#[tokio::test]
async fn the_rust_sdk_unit_tests_pass_inside_wasmtime_with_simd() {
    let tests = build_tests();
    let wasm = std::fs::read(&tests).expect("read the tests");
    assert!(uses_simd(&wasm), "{} was built without SIMD", tests.display());
    let engine = Engine::default();
    let component = Component::new(&engine, &wasm).expect("compile");
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).expect("wasi");
    let stdout = MemoryOutputPipe::new(1 << 20);
    let stderr = MemoryOutputPipe::new(1 << 20);
    let wasi = WasiCtx::builder()
        .args(&["orkestra-guest-tests"])
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .build();
    let mut store = Store::new(
        &engine,
        State {
            wasi,
            table: ResourceTable::new(),
        },
    );
    let command = WasiCommand::instantiate_async(&mut store, &component, &linker)
        .await
        .expect("instantiate");
    let result = command.wasi_cli_run().call_run(&mut store).await;
    let out = String::from_utf8_lossy(&stdout.contents()).into_owned();
    let err = String::from_utf8_lossy(&stderr.contents()).into_owned();
    assert!(
        matches!(result, Ok(Ok(()))),
        "the tests failed in wasmtime ({result:?}):\n{out}\n{err}"
    );
    assert!(out.contains("test result: ok."), "{out}");
    // The typed parse's tests against serde_json ran there, not only the block masks'.
    for name in [
        "skim::tests::generated_documents_read_the_same_in_part_and_whole ... ok",
        "skim::tests::strings_with_escapes_across_block_edges_skip_to_their_real_end ... ok",
        "skim::blocks::tests::a_json_text_is_masked_as_by_a_byte_loop ... ok",
    ] {
        assert!(out.contains(name), "{name} in:\n{out}");
    }
}
