#!/usr/bin/env bash
# The main job on the embedded default: the node agent mounts real volumes for the
# example pods (examples/manifests), shows them, removes the pods, and leaves the SQLite
# log (vole-demo.db) for the post-mortem tools: replay, history, explain, verify.
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
trap 'rmdir "$EMPTY" 2>/dev/null || true' EXIT

echo "== 1. the agent brings up the example pods (examples/manifests)"
vole run --manifests examples/manifests --root "$ROOT" --db "$DB" --once --timeout 120

echo; echo "== 2. their volumes, mounted for real"
findmnt --list -o TARGET,SOURCE,FSTYPE,SIZE | grep -E "^TARGET|^$ROOT" || true
echo "hello from the demo" > "$ROOT/pods/5f0c1a2e-web/volumes/disk.vole.dev/pv-web-data/hello.txt"
ls -l "$ROOT/pods/5f0c1a2e-web/volumes/disk.vole.dev/pv-web-data/"

echo; echo "== 3. the pods are deleted: unmount, unmount the device, detach (the disk image keeps its data)"
vole run --manifests "$EMPTY" --root "$ROOT" --db "$DB" --once --timeout 120
findmnt --list -o TARGET | grep -q "^$ROOT" && findmnt --list | grep "$ROOT" || echo "(no mounts left under $ROOT; loop devices: $(losetup --list --noheadings | grep -c "$ROOT" || true))"

echo; echo "== 4. the log, for post-mortems"
vole history --db "$DB" --volume disk.vole.dev/web-data
vole verify --db "$DB"
echo
echo "The log is $DB. Try:"
echo "  npm run --silent vole -- replay --db $DB --at +0.5s"
echo "  npm run --silent vole -- explain --db $DB <seq from history>"
