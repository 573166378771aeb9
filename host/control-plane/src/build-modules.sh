#!/usr/bin/env bash
# Builds a current Kubernetes control plane from the Go module proxy: kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl of one release, the etcd that release
# requires, and kwok (simulated nodes), into OUT. Run by `ork control-plane install`, which
# owns the temporary WORK directory, turns the `::step` lines into progress and renames OUT
# into the cache only when this script succeeds.
#
# The pinned release builds from the go.mod and go.sum in PINNED (reproducible); another
# release gets a go.mod generated from its own (each k8s.io staging module replaced by its
# v0.X release) and a go.sum resolved now.
#
# usage: build-modules.sh OUT WORK VERSION PINNED_VERSION PINNED GO_CACHE KWOK_VERSION
set -euo pipefail

out=$1
work=$2
version=$3
pinned_version=$4
pinned=$5
go_cache=$6
kwok_version=$7
total=5

step() { echo "::step $1 $total $2"; }
fail() { echo "::error $*"; exit 1; }

step 1 "checking the Go toolchain"
command -v go >/dev/null || fail "go not found on PATH"
go version
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || fail "\"$version\" is not a Kubernetes release such as $pinned_version"
minor=${BASH_REMATCH[1]}
patch=${BASH_REMATCH[2]}
# The module cache outlives the build, so another release downloads only what changed. The
# build cache (over 4 GB) is kept until the build succeeds, for a retry, then removed.
export GOMODCACHE="$go_cache/mod" GOCACHE="$go_cache/build" GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
export GOPATH="$work/gopath" HOME="$work/home"
mkdir -p "$GOMODCACHE" "$GOCACHE" "$HOME"

step 2 "resolving the modules of Kubernetes $version"
kube="$work/kubernetes"
mkdir -p "$kube/etcd"
cp "$pinned/kubernetes/tools.go" "$kube/"
cp "$pinned/kubernetes/etcd/main.go" "$kube/etcd/"
if [[ $version == "$pinned_version" ]]; then
  cp "$pinned/kubernetes/go.mod" "$pinned/kubernetes/go.sum" "$kube/"
else
  gomod=$(go mod download -json "k8s.io/kubernetes@$version" 2>/dev/null | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p') || true
  [[ -f $gomod ]] || fail "k8s.io/kubernetes@$version is not on the Go module proxy"
  {
    echo "module orkestra.local/control-plane/kubernetes"
    echo
    echo "go 1.26.0"
    echo
    echo "require k8s.io/kubernetes $version"
    echo
    echo "replace ("
    sed -n 's|^\t\(k8s.io/[a-z0-9-]*\) => ./staging/.*|\1|p' "$gomod" | while read -r staging; do
      # Only what is published: the sample modules are not always.
      if go mod download "$staging@v0.$minor.$patch" 2>/dev/null; then
        printf '\t%s => %s v0.%s.%s\n' "$staging" "$staging" "$minor" "$patch"
      fi
    done
    echo ")"
  } >"$kube/go.mod"
  (cd "$kube" && go mod tidy) || fail "the modules of Kubernetes $version do not resolve"
fi
kwok="$work/kwok"
mkdir -p "$kwok"
cp "$pinned/kwok/go.mod" "$pinned/kwok/go.sum" "$pinned/kwok/tools.go" "$kwok/"

step 3 "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd (about 15 minutes on 2 cores, once)"
mkdir -p "$out"
# What upstream's build stamps in, so each binary and the API server's /version say the release.
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  stamp+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
(cd "$kube" && go build -trimpath -ldflags "-s -w$stamp" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl ./etcd) || fail "go build of Kubernetes $version failed"

step 4 "building kwok (simulated nodes)"
(cd "$kwok" && go build -trimpath -ldflags "-s -w" -o "$out/" sigs.k8s.io/kwok/cmd/kwok) || fail "go build of kwok failed"
# kwok's own stages, as its module ships them: nodes become Ready; Pods become Running and
# Ready, the Pods of Jobs then Succeeded, and deleted Pods go.
kwok_dir=$(cd "$kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
for stage in node/fast/node-initialize pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
  [[ -f $kwok_dir/kustomize/stage/$stage.yaml ]] || fail "kwok's stage $stage is not in $kwok_dir"
  echo "---"
  cat "$kwok_dir/kustomize/stage/$stage.yaml"
done >"$out/kwok-stages.yaml"

step 5 "checking the binaries"
bash "$(dirname "$0")/check.sh" "$out" "$version" 3. "$kwok_version"
etcd_said=$("$out/etcd" --version)
kwok_said=$("$out/kwok" --version 2>&1)
{
  echo "kubernetes=$version"
  echo "recipe=go-modules"
  echo "etcd=${etcd_said%%$'\n'*}"
  echo "kwok=${kwok_said%%$'\n'*}"
  echo "go=$(go version)"
} >"$out/VERSIONS"
go clean -cache
echo "::done"
