#!/usr/bin/env bash
# Runs each cargo-fuzz target for a bounded time (default 60 s each). CI does not fuzz;
# run this before a release or after touching the Katalog loader or the template engine.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${1:-60}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
# Seed the Katalog corpus with the examples so the fuzzer starts from valid files.
mkdir -p corpus/katalog_load
cp ../katalogs/*/katalog.yaml ../host/katalog/testdata/katalog/invalid/*.yaml corpus/katalog_load/ 2>/dev/null || true
for target in katalog_load template_parse; do
  echo "==> fuzzing $target for ${seconds}s"
  # Stable toolchain: no sanitizer (they need nightly); libFuzzer's coverage still works.
  cargo fuzz run --sanitizer none "$target" -- -max_total_time="$seconds" -max_len=8192
done
