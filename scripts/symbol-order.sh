#!/usr/bin/env bash
# Writes host/cli/symbol-order.txt: the functions a running `ork` executes, which the linker
# places side by side at the start of its code (host/cli/build.rs). The kernel maps code in
# 64 KB windows around each page a call touches; with the executed functions scattered over
# the binary's code, most windows held one or two of them, and a host doing little kept
# 16 MB of code resident.
#
# The list comes from `ork run` (as it runs in a cluster; `ork dev`'s own set-up stays out of
# it) on example Katalogs against a local control plane, each under valgrind's callgrind,
# which records every function that runs, however rarely: its sample CRs created, reconciled,
# changed and deleted, and the Live API asked for its probes, metrics and Katalog. Functions
# the declarative Katalogs ran come first: those that ran once its start was over, then
# those only its start ran (whose pages `ork run` gives back, host/cli/src/startup_pages.rs,
# so the code that runs on must not share their windows); in each, those that ran for more
# of the Katalogs before those that ran for fewer, so a Katalog's code lies in as few
# windows as can be. What only the Wasm Katalog added (the engine, its compiler) comes
# last. Run it again after a toolchain or dependency update: symbol names carry hashes of
# both, and a name the binary no longer has is skipped by the linker, so a stale list costs
# resident memory, never correctness.
#
# Needs valgrind (Debian's package), the control plane and the wasm32-wasip2 target
# (scripts/setup.sh). About 30 minutes after the release build.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."

# The Katalogs without components, and the one with a Wasm hook.
DECLARATIVE=(website tiers config-copy secret-spread)
WASM=site-hook

command -v valgrind >/dev/null || { echo "symbol-order: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
cargo build --release --locked -p orkestra-cli
ork=${CARGO_TARGET_DIR:-$PWD/target}/release/ork
# The Wasm Katalog's hook, where its Katalog looks for it (as scripts/guests.sh builds it).
(cd examples && CARGO_TARGET_DIR=target cargo build --locked --quiet --release --target wasm32-wasip2 -p rust-hook)
kubectl=$("$ork" control-plane install | awk '$1 == "kubectl" { print $2 }')
out=$(mktemp -d)

"$ork" control-plane up --dir "$out/plane" >"$out/plane.log" 2>&1 &
plane=$!
trap 'kill -INT "$plane" 2>/dev/null; wait "$plane" 2>/dev/null; rm -rf "$out"' EXIT
until grep -q "control plane ready" "$out/plane.log"; do
  kill -0 "$plane" 2>/dev/null || { cat "$out/plane.log" >&2; exit 1; }
  sleep 1
done
export KUBECONFIG=$out/plane/kubeconfig

# Every Live API path a user's tools read.
ask() {
  for path in healthz readyz metrics katalog; do
    curl -fsS "http://127.0.0.1:$1/$path" >/dev/null 2>&1 || true
  done
}

# Thirty copies of each custom resource `$1` holds, as it is in the cluster (spec only),
# labelled as copies: enough CRs that the paths a busy runtime takes (sorts, waits for a lock,
# wakes of many tasks) run as they do at scale.
copies() {
  "$kubectl" get -f "$1" -o json | python3 -c '
import json, sys
listed = json.load(sys.stdin)
out = []
for obj in listed.get("items", [listed]):
    if "." not in obj["apiVersion"].split("/")[0]:
        continue  # a built-in kind: the sample'"'"'s set-up, not a CR
    for i in range(30):
        meta = {"name": "%s-%d" % (obj["metadata"]["name"], i), "labels": {"symbol-order/copy": "true"}}
        if "namespace" in obj["metadata"]:
            meta["namespace"] = obj["metadata"]["namespace"]
        out.append({"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta, "spec": obj.get("spec", {})})
if out:
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": out}))
    print("---")'
}

# One Katalog under callgrind, from start to a graceful stop (SIGINT: callgrind writes its
# record at exit). Its CRDs and sample CRs are there before it starts (the initial list, CRs
# never reconciled); copies come while it runs (watch events), then changes and deletions.
# The record is cut where `ork run` gives its start-up's pages back: `$katalog.PID.1` holds
# its start, the rest what ran after (ready or not: what runs from there maps its pages
# again, so it belongs beside the reconciles' code).
profile() {
  local katalog=$1 port=$2 dir=katalogs/$1
  "$ork" generate crd -f "$dir/katalog.yaml" | "$kubectl" apply --server-side -f - >/dev/null
  "$kubectl" wait --for condition=established crd --all --timeout 60s >/dev/null
  local samples
  read -r -a samples < <(sed -n -E 's/^ *crFiles: \[(.*)\]/\1/p' "$dir/katalog.yaml" | tr ',' ' ')
  for sample in "${samples[@]}"; do "$kubectl" apply -f "$dir/$sample" >/dev/null; done
  echo "symbol-order: ork run -f $dir/katalog.yaml under callgrind" >&2
  # A compile cache of its own, so that a component is compiled under the profile.
  ORK_CACHE_DIR=$out/cache valgrind --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no \
    --callgrind-out-file="$out/$katalog.%p" --dump-before='*13startup_pages7release*' \
    "$ork" run -f "$dir/katalog.yaml" --http-addr "127.0.0.1:$port" >"$out/$katalog.log" 2>&1 &
  local pid=$! waited=0
  until curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
    sleep 5
    waited=$((waited + 5))
    if ((waited > 600)) || ! kill -0 "$pid" 2>/dev/null; then
      echo "symbol-order: ork run did not become ready; its log:" >&2
      tail -n 30 "$out/$katalog.log" >&2
      kill "$pid" 2>/dev/null
      exit 1
    fi
  done
  sleep 20
  for sample in "${samples[@]}"; do copies "$dir/$sample"; done >"$out/$katalog.copies"
  "$kubectl" create -f "$out/$katalog.copies" >/dev/null
  sleep 60
  ask "$port"
  # Changed: the CRs' metadata.
  for sample in "${samples[@]}"; do
    "$kubectl" annotate --overwrite -f "$dir/$sample" symbol-order/pass=changed >/dev/null
  done
  sleep 20
  # Deleted: finalizers, children collected.
  "$kubectl" delete --wait=false -f "$out/$katalog.copies" >/dev/null
  for ((i = ${#samples[@]} - 1; i >= 0; i--)); do
    "$kubectl" delete --wait=false -f "$dir/${samples[i]}" >/dev/null
  done
  sleep 30
  ask "$port"
  kill -INT "$pid"
  wait "$pid" || true
}

port=18931
for katalog in "${DECLARATIVE[@]}" "$WASM"; do
  profile "$katalog" "$port"
  port=$((port + 1))
done

# Every function that ran (callgrind names callers `fn=` and callees `cfn=`; `'N` marks a
# recursion depth), kept where the binary defines it (not the C library's).
nm --defined-only "$ork" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | sort -u >"$out/defined"
names() { cat "$@" | sed -n -E "s/^c?fn=//p" | sed -E "s/'[0-9]+$//" | sort -u | comm -12 - "$out/defined"; }
ran() { names "$out/$1".[0-9]*; }
ran_on() { names $(ls "$out/$1".[0-9]* | grep -v '\.1$'); }
# Each function with the Katalogs that ran it, as a mark per Katalog ("110100": the first,
# second and fourth), and whether a declarative Katalog ran it after its start ("on") or
# only at its start. The declarative Katalogs' functions come first, those that ran on before those
# only a start ran; in each, those more Katalogs ran before those fewer ran, and functions
# the same Katalogs ran side by side, so that each Katalog's code lies in as few windows as
# can be; within that by name, so that a regenerated list diffs by the functions that
# changed. Then the Wasm Katalog's own.
katalogs=("${DECLARATIVE[@]}" "$WASM")
for k in "${DECLARATIVE[@]}"; do ran_on "$k"; done | sort -u >"$out/on"
for i in "${!katalogs[@]}"; do ran "${katalogs[i]}" | sed "s/\$/ $i/"; done |
  awk -v n="${#katalogs[@]}" -v wasm="$((${#katalogs[@]} - 1))" -v on="$out/on" '
    BEGIN { while ((getline f < on) > 0) later[f] = 1 }
    { if (!($1 in marks)) marks[$1] = sprintf("%0" n "d", 0)
      marks[$1] = substr(marks[$1], 1, $2) "1" substr(marks[$1], $2 + 2); count[$1]++ }
    END { for (f in marks) print (substr(marks[f], 1, wasm) ~ /1/ ? "first" : "then"), (f in later ? "on" : "start"), count[f], marks[f], f }' |
  sort -k1,1 -k2,2 -k3,3nr -k4,4r -k5,5 >"$out/ranked"
awk '$1 == "first" { print $5 }' "$out/ranked" >"$out/first"
# The TLS library's native code (ring's C and assembly): valgrind's CPU lacks some of the
# features it picks its variants by (ADX, VAES), so the profile sees other variants than a
# host runs; all of them go between the two parts.
grep '^ring_core_' "$out/defined" | comm -23 - <(awk '{ print $5 }' "$out/ranked" | sort) >"$out/native"
awk '$1 == "then" { print $5 }' "$out/ranked" >"$out/then"
cat "$out/first" "$out/native" "$out/then" >host/cli/symbol-order.txt
echo "symbol-order: $(grep -c '^first on' "$out/ranked") + $(grep -c '^first start' "$out/ranked") + $(wc -l <"$out/native") + $(wc -l <"$out/then") functions (ran on, start only, native, Wasm only) in host/cli/symbol-order.txt" >&2
