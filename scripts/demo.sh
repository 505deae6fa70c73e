#!/usr/bin/env bash
# The main job on the embedded default: the node agent mounts real volumes for the
# example pods (examples/manifests), shows them, removes the pods, and leaves the SQLite
# log (vole-demo.db) for the post-mortem tools: replay, history, explain, verify. The web
# pod's disk is served by a separate CSI driver process, `vole csi-driver`
# (examples/csi/storage.yaml), which registers itself the kubelet's way. Then a StorageClass
# claim (examples/provisioning) is provisioned through that driver, mounted, grown, deleted.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "== installing dependencies (npm ci)"
  npm ci --no-audit --no-fund
fi
# Always build: a dist/ left by an older checkout would run old code (a build takes seconds).
npm run --silent build > /dev/null
if [ "$(id -u)" != 0 ]; then
  echo "The demo mounts filesystems and attaches loop devices: run it as root." >&2
  exit 1
fi
# The host programs the demo's disks need, each with the Debian package that ships it: the
# web pod's disk is ext4, the provisioned claim's is XFS (it grows while mounted). Missing
# ones are installed before anything starts, so the demo never stops half way for them.
tools="mkfs.ext4:e2fsprogs mkfs.xfs:xfsprogs xfs_growfs:xfsprogs losetup:mount findmnt:util-linux"
missing_packages() {
  local pair
  for pair in $tools; do command -v "${pair%%:*}" >/dev/null 2>&1 || echo "${pair#*:}"; done | sort -u
}
if [ -z "${VOLE_DEMO_NS:-}" ] && [ -n "$(missing_packages)" ]; then
  packages=$(missing_packages | tr '\n' ' ')
  echo "== installing ${packages}(apt-get): the demo formats and grows its disks with them"
  if command -v apt-get >/dev/null; then
    # The package lists as they are first; fetched anew only when they do not have them.
    apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; }
    apt_install $packages 2>/dev/null || { apt-get update -qq && apt_install $packages; } \
      || echo "apt-get could not install ${packages}" >&2
  fi
  for pair in $tools; do
    command -v "${pair%%:*}" >/dev/null 2>&1 && continue
    echo "The demo needs ${pair%%:*} (Debian package ${pair#*:}): install it and run again." >&2
    exit 1
  done
fi
# Mounts stay inside a private mount namespace, so the machine's table is never touched.
if [ -z "${VOLE_DEMO_NS:-}" ]; then
  exec env VOLE_DEMO_NS=1 unshare -m --propagation private "$0" "$@"
fi
DB=${VOLE_DEMO_DB:-$PWD/vole-demo.db}
ROOT=${VOLE_DEMO_ROOT:-/tmp/vole-demo-root}
rm -f "$DB" "$DB-wal" "$DB-shm" "$DB-lock"
vole() { node dist/src/cli/main.js "$@"; }
EMPTY=$(mktemp -d)
MANIFESTS=$(mktemp -d)
PROVISION=$(mktemp -d)
AGENT_PID=
cp examples/manifests/*.yaml "$MANIFESTS/"
cp examples/csi/storage.yaml "$MANIFESTS/storage.yaml"
DRIVER_PID=
# What a failed step may leave on the host: mounts under the root (this namespace's, deepest
# first) and loop devices over images under it (the machine's: they outlive the namespace).
release_host() {
  local target device released=0
  while read -r target; do
    umount -l "$target" 2>/dev/null && released=$((released + 1))
  done < <(findmnt --list --noheadings -o TARGET | grep "^$ROOT/" | sort -r)
  while read -r device; do
    losetup -d "$device" 2>/dev/null && released=$((released + 1))
  done < <(losetup --list --noheadings -O NAME,BACK-FILE | awk -v r="$ROOT/" 'index($2, r) == 1 { print $1 }')
  echo "$released"
}
cleanup() {
  local status=$?
  if [ -n "$AGENT_PID" ]; then kill "$AGENT_PID" 2>/dev/null || true; wait "$AGENT_PID" 2>/dev/null || true; fi
  if [ -n "$DRIVER_PID" ]; then kill "$DRIVER_PID" 2>/dev/null || true; wait "$DRIVER_PID" 2>/dev/null || true; fi
  rm -rf "$EMPTY" "$MANIFESTS" "$PROVISION" "$PROVISION.agent.log"
  if [ "$status" != 0 ]; then
    echo "The demo failed (exit $status); it released $(release_host) mount(s) and loop device(s) it had left." >&2
  fi
}
trap cleanup EXIT

echo "== 0. the disk's CSI driver starts as its own process and registers in $ROOT/plugins_registry"
mkdir -p "$ROOT/plugins_registry"
node dist/src/cli/main.js csi-driver --endpoint "unix://$ROOT/csi/disk.sock" --node-id node-1 \
  --state-dir "$ROOT/csi/state" --registration-dir "$ROOT/plugins_registry" &
DRIVER_PID=$!
for _ in $(seq 100); do [ -S "$ROOT/plugins_registry/disk.csi.vole.dev-reg.sock" ] && break; sleep 0.1; done

echo; echo "== 1. the agent brings up the example pods (examples/manifests, the disk through CSI)"
vole run --manifests "$MANIFESTS" --root "$ROOT" --db "$DB" --once --timeout 120

echo; echo "== 2. their volumes, mounted for real"
findmnt --list -o TARGET,SOURCE,FSTYPE,SIZE | grep -E "^TARGET|^$ROOT" || true
WEB_DATA="$ROOT/pods/5f0c1a2e-web/volumes/kubernetes.io~csi/data/mount"
echo "hello from the demo" > "$WEB_DATA/hello.txt"
ls -l "$WEB_DATA/"

echo; echo "== 3. the pods are deleted: unmount, unmount the device, detach (the disk image keeps its data)"
vole run --manifests "$EMPTY" --root "$ROOT" --db "$DB" --once --timeout 120
findmnt --list -o TARGET | grep -q "^$ROOT" && findmnt --list | grep "$ROOT" || echo "(no mounts left under $ROOT; loop devices: $(losetup --list --noheadings | grep -c "$ROOT" || true))"
echo "(the disk image keeps the data: $ROOT/csi/state/images/web-data.img)"

echo; echo "== 4. a StorageClass claim (examples/provisioning): created on first use, mounted, grown, deleted"
cp examples/provisioning/*.yaml "$PROVISION/"
# node itself in the background (not the vole function, whose subshell a kill would orphan it)
node dist/src/cli/main.js run --manifests "$PROVISION" --root "$ROOT" --db "$DB" > "$PROVISION.agent.log" 2>&1 &
AGENT_PID=$!
agent_said() { echo "$1; the agent said:" >&2; cat "$PROVISION.agent.log" >&2; exit 1; }
# waits up to 120 s for a shell condition, saying what it waits for
wait_for() {
  local what=$1 until=$((SECONDS + 120)); shift
  while [ $SECONDS -lt $until ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  agent_said "gave up waiting for $what"
}
scratch_mount() { findmnt --list -n -o TARGET | grep -m1 "^$ROOT/pods/.*/kubernetes.io~csi/scratch/mount$"; }
size_bytes() { stat -f -c '%b %S' "$1" | awk '{ print $1 * $2 }'; }
# vole wait follows the log: it ends as soon as the agent has explained why the pod cannot
# mount (a final error, such as a driver's missing mkfs), with that explanation.
vole wait report --db "$DB" --timeout 120 || agent_said "the claim's volume was not mounted"
MOUNT=$(scratch_mount)
vole get pvs --db "$DB"
echo "mounted at $MOUNT: $(size_bytes "$MOUNT") bytes"
echo "== 4b. the claim asks for 400Mi: ControllerExpandVolume, then NodeExpandVolume while mounted"
BEFORE=$(size_bytes "$MOUNT")
sed -i 's/storage: 300Mi/storage: 400Mi/' "$PROVISION/claim.yaml"
grown() { [ "$(size_bytes "$MOUNT")" -gt "$BEFORE" ]; }
wait_for "the mounted filesystem to grow" grown
echo "grown: $BEFORE -> $(size_bytes "$MOUNT") bytes"
echo "== 4c. pod and claim removed: unmounted, detached, DeleteVolume (reclaim policy Delete)"
rm "$PROVISION/pod.yaml" "$PROVISION/claim.yaml"
no_pvs() { vole get pvs --db "$DB" | grep -qx 'no pvs'; }
wait_for "the provisioned volume to be deleted" no_pvs
kill -TERM "$AGENT_PID"; wait "$AGENT_PID" || true; AGENT_PID=
vole get pvs --db "$DB"
vole history --db "$DB" | grep 'PersistentVolume pvc-'
ls "$ROOT/csi/state/images/" | grep -c '^pvc-' | sed 's/^/disk images of provisioned volumes left: /' || true

echo; echo "== 5. the log, for post-mortems"
vole history --db "$DB" --volume 'kubernetes.io/csi/disk.csi.vole.dev^web-data'
vole verify --db "$DB"
echo
echo "The log is $DB. Try:"
echo "  npm run --silent vole -- replay --db $DB --at +0.5s"
echo "  npm run --silent vole -- explain --db $DB <seq from history>"
