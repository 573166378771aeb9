#!/usr/bin/env bash
# Everything the tests need on a fresh Debian machine of this kind, in one step (the
# README's test command runs it first; so does CI):
#   1. the Debian packages: openssl and ca-certificates (the control plane's keys),
#      chromium and chromium-driver (the Control Center's browser test), docker-registry
#      (the OCI tests push to a real registry on loopback), util-linux and mount (the swap
#      test); without Go, what the Debian-source control plane build needs;
#   2. the guest toolchains (scripts/guests.sh --install);
#   3. one build of the tests and `ork` (`cargo test --no-run`: the control plane install
#      below uses that `ork`, where `cargo run` would build everything again without the
#      tests' features);
#   4. the control plane (`ork control-plane install`: built once per machine into
#      ~/.cache/orkestra, checked again on every run when cached);
#   5. helm, for the chart's tests (scripts/helm.sh: built once per machine from the Go
#      module proxy into the same cache).
# Installing packages needs root (or sudo); each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

step() { echo "==> [$(date -u +%H:%M:%S)] setup: $*"; }

step "Debian packages"
# make: jemalloc's build (the benchmarks measure ork on each allocator, and tests build them).
packages=(openssl ca-certificates chromium chromium-driver docker-registry util-linux mount make)
if ! command -v go >/dev/null; then
  packages+=(etcd-server golang-1.19-go golang-1.19-src golang-github-modern-go-reflect2-dev rsync make dpkg-dev)
  command -v kubectl >/dev/null || packages+=(kubernetes-client)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || {
      echo "setup: missing Debian packages and not root (no sudo either): apt-get install ${missing[*]}" >&2
      exit 1
    }
    sudo=(sudo --preserve-env=DEBIAN_FRONTEND)
  fi
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

step "guest toolchains (wasm32-wasip2, componentize-py, componentize-qjs)"
scripts/guests.sh --install

step "build the tests and ork"
cargo test --workspace --locked --no-run

step "control plane"
target/debug/ork control-plane install

step "helm (the chart's tests)"
scripts/helm.sh >/dev/null
