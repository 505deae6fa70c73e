#!/usr/bin/env bash
# The main job on the embedded default: the node agent mounts real volumes for the
# example pods (examples/manifests), shows them, removes the pods, and leaves the SQLite
# log (vole-demo.db) for the post-mortem tools: replay, history, explain, verify. The web
# pod's disk is served by a separate CSI driver process, `vole csi-driver`
# (examples/csi/storage.yaml), which registers itself the kubelet's way.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ] \
   || [ ! -f dist/src/cli/main.js ]; then
  echo "== installing dependencies (npm ci)"
  npm ci --no-audit --no-fund
fi
if [ "$(id -u)" != 0 ]; then
  echo "The demo mounts filesystems and attaches loop devices: run it as root." >&2
  exit 1
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
cp examples/manifests/*.yaml "$MANIFESTS/"
cp examples/csi/storage.yaml "$MANIFESTS/storage.yaml"
DRIVER_PID=
cleanup() {
  if [ -n "$DRIVER_PID" ]; then kill "$DRIVER_PID" 2>/dev/null || true; wait "$DRIVER_PID" 2>/dev/null || true; fi
  rm -rf "$EMPTY" "$MANIFESTS"
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

echo; echo "== 4. the log, for post-mortems"
vole history --db "$DB" --volume 'kubernetes.io/csi/disk.csi.vole.dev^web-data'
vole verify --db "$DB"
echo
echo "The log is $DB. Try:"
echo "  npm run --silent vole -- replay --db $DB --at +0.5s"
echo "  npm run --silent vole -- explain --db $DB <seq from history>"
