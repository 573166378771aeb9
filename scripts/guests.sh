#!/usr/bin/env bash
# Builds the example guest components from source (what the Katalogs under katalogs/ and
# the integration tests load):
#   examples/target/wasm32-wasip2/release/<crate>.wasm   Rust (wasm32-wasip2 + wit-bindgen)
#   examples/target/python/<name>.wasm                   Python (componentize-py)
#   examples/target/js/<name>.wasm                       TypeScript/JavaScript (componentize-qjs)
#   examples/target/go/<name>.wasm                       Go (GOOS=wasip1, then `ork component new`)
# With --check, also checks formatting and lints of the guest SDK and the Rust examples, runs
# the Rust SDK's unit tests, checks that the JS SDK's generated WIT types match wit/, and runs
# the JS SDK's unit tests.
# ORK, when set, is the `ork` binary to use (CI passes the one its test build made);
# otherwise `cargo run` builds one.
# With --install, only installs the guest toolchains (the wasm32-wasip2 target, by rustup or
# from the machine's ../shared/toolchains copy when rustup cannot download it,
# componentize-py from PyPI, and the JS examples' componentize-qjs, TypeScript and jco type
# generator from npm, as examples/package-lock.json pins them), which the tests need too,
# and exits.
set -euo pipefail
cd "$(dirname "$0")/../examples"

if [[ "${1:-}" == "--install" ]]; then
  if ! rustup target add wasm32-wasip2; then
    # The machines keep the target's standard library beside the project for when rustup's
    # server cannot be reached. It fits rustc 1.95.0 only.
    fallback=../../shared/toolchains/rust-std-wasm32-wasip2-1.95.0.tar.xz
    if [[ ! -f $fallback || $(rustc --version) != "rustc 1.95.0 "* ]]; then
      echo "rustup could not add wasm32-wasip2, and $fallback (for rustc 1.95.0) is not there to use" >&2
      exit 1
    fi
    echo "rustup could not add wasm32-wasip2: unpacking $fallback"
    tar -xJf "$fallback" -C "$(rustc --print sysroot)/lib/rustlib/"
  fi
  if ! command -v componentize-py >/dev/null; then
    python3 -m pip install -q componentize-py==0.25.1 ||
      python3 -m pip install -q --break-system-packages componentize-py==0.25.1
  fi
  # The JS examples are one npm workspace, installed at its root.
  npm ci --silent --no-audit --no-fund
  exit 0
fi
check=false
[[ "${1:-}" == "--check" ]] && check=true

rust=(rust-hook rust-constructor hostile unknown-import echo-hook)
if $check; then
  cargo fmt --all --check
  cargo fmt --check --manifest-path ../guest-sdk/Cargo.toml
  for feature in hook constructor; do
    CARGO_TARGET_DIR=target cargo clippy --locked --quiet --manifest-path ../guest-sdk/Cargo.toml \
      --target wasm32-wasip2 --features "$feature" -- -D warnings
  done
  # The SDK's unit tests natively (its portable code paths; tests/all/guest_sdk.rs runs them
  # in wasmtime with SIMD).
  CARGO_TARGET_DIR=target cargo clippy --locked --quiet --manifest-path ../guest-sdk/Cargo.toml \
    --all-targets --features hook -- -D warnings
  CARGO_TARGET_DIR=target cargo test --locked --quiet --manifest-path ../guest-sdk/Cargo.toml --lib --features hook
fi
# One package per cargo call: the SDK's world features are exclusive.
for package in "${rust[@]}"; do
  echo "guest: $package (Rust)"
  if $check; then
    cargo clippy --locked --quiet --release --target wasm32-wasip2 -p "$package" -- -D warnings
  fi
  cargo build --locked --quiet --release --target wasm32-wasip2 -p "$package"
done
mkdir -p target/python
for app in */app.py; do
  package=$(dirname "$app")
  echo "guest: $package (Python)"
  (cd "$package" && componentize-py -d ../../wit -w hook componentize app -p . -p ../../guest-sdk/python -o "../target/python/${package//-/_}.wasm" >/dev/null)
done
mkdir -p target/js
[[ -d node_modules ]] || npm ci --silent --no-audit --no-fund
if $check; then
  node ../scripts/js-types.mjs --check
  (cd ../guest-sdk/js && node --import ./test/register.mjs --test --test-reporter=dot test/sdk.test.mjs)
fi
for manifest in */package.json; do
  package=$(dirname "$manifest")
  echo "guest: $package (TypeScript)"
  (cd "$package" && npm run --silent build >/dev/null)
done
mkdir -p target/go
if [[ -n "${ORK:-}" ]]; then
  ork=("$ORK")
else
  ork=(cargo run --quiet --locked --manifest-path ../Cargo.toml -p orkestra-cli --)
fi
for module in */go.mod; do
  package=$(dirname "$module")
  echo "guest: $package (Go)"
  if $check; then
    test -z "$(gofmt -l "$package" ../guest-sdk/go)" || { gofmt -l "$package" ../guest-sdk/go; exit 1; }
    (cd "$package" && GOOS=wasip1 GOARCH=wasm go vet ./... github.com/orkestra-rs/orkestra-rs/guest-sdk/go)
  fi
  (cd "$package" && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o "../target/go/${package//-/_}.module.wasm" .)
  "${ork[@]}" component new "target/go/${package//-/_}.module.wasm" -o "target/go/${package//-/_}.wasm"
done
ls -l target/wasm32-wasip2/release/*.wasm target/python/*.wasm target/js/*.wasm target/go/*.wasm
