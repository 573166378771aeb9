#!/usr/bin/env bash
# Helm, for the chart's tests (deploy/helm): built once per machine from the Go module proxy
# into the cache (like the control plane), then found there. Prints the binary's path.
set -euo pipefail
VERSION=v4.3.2
dir="${ORK_CACHE_DIR:-$HOME/.cache/orkestra}/tools/helm-$VERSION"
if [[ -x "$dir/helm" ]] && "$dir/helm" version --short >/dev/null 2>&1; then
  echo "$dir/helm"
  exit 0
fi
command -v go >/dev/null || {
  echo "helm.sh: building helm $VERSION needs Go (the Go module proxy serves its source)" >&2
  exit 1
}
echo "helm.sh: building helm $VERSION from the Go module proxy into $dir (once per machine, a few minutes)" >&2
rm -rf "$dir.part"
mkdir -p "$dir.part"
# Modules go where the control plane build keeps its own (shared, downloaded once); the build
# cache (over a gigabyte) is thrown away with the build, as that build does with its own.
cache="${ORK_CACHE_DIR:-$HOME/.cache/orkestra}"
gocache=$(mktemp -d)
trap 'rm -rf "$gocache"' EXIT
GOMODCACHE="$cache/go/mod" GOCACHE="$gocache" GOBIN="$dir.part" GOFLAGS=-mod=mod CGO_ENABLED=0 \
  go install "helm.sh/helm/v4/cmd/helm@$VERSION" >&2
rm -rf "$dir"
mv "$dir.part" "$dir"
echo "$dir/helm"
