#!/usr/bin/env bash
# Writes host/cli/symbol-order.txt: the functions a running `ork` executes, which the linker
# places side by side at the start of its code (host/cli/build.rs). The kernel maps code in
# 64 KB windows around each page a call touches; with the executed functions scattered over
# the binary's 26 MB of code, most windows held one or two of them, and a host doing little
# kept 16 MB of code resident. Laid out together they fill about 4 MB.
#
# The list comes from `ork dev` on example Katalogs (declarative children, a Wasm hook, the
# Live API asked for its probes and metrics), run under valgrind's callgrind, which records
# every function that runs, however rarely. Run it again after a toolchain or dependency
# update: symbol names carry hashes of both, and a name the binary no longer has is skipped
# by the linker, so a stale list costs resident memory, never correctness.
#
# Needs valgrind (Debian's package), the control plane and the example guests
# (scripts/setup.sh). About 15 minutes, most of it the release build.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "symbol-order: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
cargo build --release --locked -p orkestra-cli
ork=target/release/ork
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One Katalog under callgrind: up, its sample CRs reconciled, the Live API asked, then stopped
# (SIGINT: the graceful shutdown runs, and callgrind writes its record at exit).
profile() {
  local katalog=$1 port=$2
  echo "symbol-order: ork dev -f katalogs/$katalog/katalog.yaml under callgrind" >&2
  valgrind --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no \
    --callgrind-out-file="$out/$katalog.%p" \
    "$ork" dev -f "katalogs/$katalog/katalog.yaml" --apply-cr --http-addr "127.0.0.1:$port" \
    >"$out/$katalog.log" 2>&1 &
  local pid=$!
  local waited=0
  until curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
    sleep 5
    waited=$((waited + 5))
    if ((waited > 600)) || ! kill -0 "$pid" 2>/dev/null; then
      echo "symbol-order: ork dev did not become ready; its log:" >&2
      tail -n 30 "$out/$katalog.log" >&2
      exit 1
    fi
  done
  # Reconciles, resyncs and the Live API's read paths, for a minute.
  for _ in $(seq 6); do
    for path in healthz readyz metrics katalog; do
      curl -fsS "http://127.0.0.1:$port/$path" >/dev/null 2>&1 || true
    done
    sleep 10
  done
  kill -INT "$pid"
  wait "$pid" || true
}

profile website 18931
profile site-hook 18932

# Every function that ran (callgrind names callers `fn=` and callees `cfn=`; `'N` marks a
# recursion depth), kept where the binary defines it (not the C library's). What the
# declarative Katalog ran comes first, then what only the Wasm one added (the engine, its
# compiler), so a host without components touches only the first part. Each part is sorted,
# so that a regenerated list diffs by the functions that changed.
nm --defined-only "$ork" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | sort -u >"$out/defined"
ran() { cat "$out/$1".[0-9]* | sed -n -E "s/^c?fn=//p" | sed -E "s/'[0-9]+$//" | sort -u | comm -12 - "$out/defined"; }
ran website >"$out/first"
ran site-hook | comm -23 - "$out/first" >"$out/then"
cat "$out/first" "$out/then" >host/cli/symbol-order.txt
echo "symbol-order: $(wc -l <"$out/first") + $(wc -l <"$out/then") functions in host/cli/symbol-order.txt" >&2
