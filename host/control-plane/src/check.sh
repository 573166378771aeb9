#!/usr/bin/env bash
# Checks the control plane binaries in OUT: each Kubernetes binary reports VERSION, etcd a
# version starting with ETCD_VERSION, kwok KWOK_VERSION when one is given. Both build
# scripts end with it, and `ork control-plane install` runs it again whenever it finds the
# build cached, so a check that fails on some machine fails there on every run, not only on
# the first (CI's cache would otherwise hide it).
#
# Each output is read whole, then matched: piped into `grep -q` or `head`, the pipe closes
# early, the binary dies of SIGPIPE (etcd writes a line at a time) and pipefail fails.
#
# usage: check.sh OUT VERSION ETCD_VERSION [KWOK_VERSION]
set -euo pipefail

out=$1
version=$2
etcd_version=$3
kwok_version=${4:-}

fail() { echo "::error $*"; exit 1; }

for binary in kube-apiserver kube-controller-manager kube-scheduler; do
  if [[ ! -x $out/$binary ]]; then
    # The Debian recipe builds no scheduler.
    [[ $binary == kube-scheduler ]] && continue
    fail "$binary is missing from $out"
  fi
  said=$("$out/$binary" --version)
  [[ $said == "Kubernetes $version" ]] || fail "$binary reports \"$said\", expected Kubernetes $version"
done
if [[ -x $out/kubectl ]]; then
  said=$("$out/kubectl" version --client)
  [[ $said == *"Client Version: $version"* ]] || fail "kubectl reports \"$said\", expected $version"
fi
said=$("$out/etcd" --version)
[[ $said == "etcd Version: $etcd_version"* ]] || fail "etcd reports \"${said%%$'\n'*}\", expected $etcd_version"
echo "${said%%$'\n'*}"
if [[ -n $kwok_version ]]; then
  said=$("$out/kwok" --version 2>&1)
  [[ $said == *"$kwok_version"* ]] || fail "kwok reports \"$said\", expected $kwok_version"
fi
