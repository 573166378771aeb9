#!/usr/bin/env bash
# Builds kube-apiserver and kube-controller-manager from Debian bookworm's `kubernetes`
# source package (the full upstream tree, vendor/ included, so it builds offline) and copies
# them, with Debian's etcd, into OUT. Run by `ork control-plane install`, which owns the
# temporary WORK directory, turns the `::step` lines into progress and renames OUT into the
# cache only when this script succeeds.
#
# usage: build.sh OUT WORK DEBIAN_SOURCE_VERSION KUBERNETES_VERSION
set -euo pipefail

out=$1
work=$2
source_version=$3
kube_version=$4
total=6

step() { echo "::step $1 $total $2"; }
fail() { echo "::error $*"; exit 1; }

step 1 "installing Debian build dependencies"
packages=(golang-1.19-go golang-1.19-src golang-github-modern-go-reflect2-dev etcd-server rsync make dpkg-dev ca-certificates)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    fail "missing Debian packages: ${missing[*]}; install them with: sudo apt-get install ${missing[*]}"
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
go_bin=/usr/lib/go-1.19/bin
[[ -x $go_bin/go ]] || fail "Go 1.19 not found at $go_bin after installing golang-1.19-go"
reflect2=/usr/share/gocode/src/github.com/modern-go/reflect2
[[ -f $reflect2/reflect2.go ]] || fail "reflect2 sources not found at $reflect2"

step 2 "fetching the kubernetes $source_version source package"
# A private deb-src list, passed through apt's -o options, so the system's sources stay as they are.
mkdir -p "$work/apt/lists/partial" "$work/src"
cat >"$work/apt/sources.list" <<EOF
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian bookworm-updates main
deb-src http://deb.debian.org/debian-security bookworm-security main
EOF
apt_opts=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache" -o "Debug::NoLocking=1")
mkdir -p "$work/apt/cache/archives/partial"
apt-get "${apt_opts[@]}" update -qq
(cd "$work/src" && apt-get "${apt_opts[@]}" source -qq --only-source "kubernetes=$source_version")
tree=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
[[ -n $tree && -f $tree/Makefile ]] || fail "the kubernetes source tree was not unpacked under $work/src"

step 3 "replacing the vendored reflect2 1.0.1 with Debian's 1.0.2 (needed with Go >= 1.18)"
# Without this the binary starts but dies with SIGSEGV in runtime.mapiterinit on the first
# custom resource write: reflect2 1.0.2 exists for Go 1.18's map iterator change.
rm -rf "$tree/vendor/github.com/modern-go/reflect2"
cp -r "$reflect2" "$tree/vendor/github.com/modern-go/reflect2"
rm -f "$tree/vendor/github.com/modern-go/reflect2/go.mod"

export PATH="$go_bin:$PATH" HOME="$work/home" GOCACHE="$work/gocache" GOFLAGS="" GO111MODULE=""
mkdir -p "$HOME"
# Upstream's make, not a bare `go build`: it generates pkg/generated/openapi and sets up GOPATH.
step 4 "building kube-apiserver (make WHAT=cmd/kube-apiserver; about 6 minutes on 2 cores)"
make -C "$tree" WHAT=cmd/kube-apiserver
step 5 "building kube-controller-manager (make WHAT=cmd/kube-controller-manager; about 3 minutes)"
make -C "$tree" WHAT=cmd/kube-controller-manager

step 6 "checking the binaries and staging them"
mkdir -p "$out"
cp "$tree/_output/bin/kube-apiserver" "$tree/_output/bin/kube-controller-manager" "$out/"
cp /usr/bin/etcd "$out/etcd"
bash "$(dirname "$0")/check.sh" "$out" "$kube_version" 3.4
etcd_said=$("$out/etcd" --version)
{
  echo "kubernetes=$kube_version"
  echo "debian-source=$source_version"
  echo "etcd=${etcd_said%%$'\n'*}"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$out/VERSION"
echo "::done"
