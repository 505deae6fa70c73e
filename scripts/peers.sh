#!/usr/bin/env bash
# Builds the real Kubernetes and CSI programs the tests talk to ("peers") from the Go module
# proxy, at the versions pinned by the small modules under test/peers/*/ (go.mod + go.sum +
# tools.go), into a cache outside the work tree keyed by a hash of those files. Builds what
# is missing, one program at a time; a later run with nothing to build takes a second.
#
#   scripts/peers.sh [NAME...]   build all programs, or only the named ones
#   scripts/peers.sh --list      print the program names, one a line
#
# Progress goes to stderr; the LAST stdout line is the directory holding the binaries.
# Env: VOLE_PEERS_CACHE (default /var/cache/vole-peers, or ~/.cache/vole-peers when that is
# not writable). GOMODCACHE and GOCACHE stay at Go's defaults so every clone shares them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
peers="$root/test/peers"

# name | module dir under test/peers | main package | -ldflags (version stamps)
programs() {
  local k8s='k8s.io/component-base/version' cg='k8s.io/client-go/pkg/version'
  local kv='-X K.gitVersion=v1.37.2 -X K.gitMajor=1 -X K.gitMinor=37 -X K.gitTreeState=clean'
  local kube="${kv//K/$k8s} ${kv//K/$cg}" csi=github.com/kubernetes-csi
  cat <<EOF
csi-sanity|csi-sanity|$csi/csi-test/v5/cmd/csi-sanity|-X main.VERSION=v5.6.0
etcd|etcd|go.etcd.io/etcd/server/v3|
kube-apiserver|kube|k8s.io/kubernetes/cmd/kube-apiserver|$kube
kubectl|kube|k8s.io/kubernetes/cmd/kubectl|$kube
kube-controller-manager|kube|k8s.io/kubernetes/cmd/kube-controller-manager|$kube
csi-attacher|csi-sidecars|$csi/external-attacher/v4/cmd/csi-attacher|-X main.version=v4.13.0
csi-resizer|csi-sidecars|$csi/external-resizer/v2/cmd/csi-resizer|-X main.version=v2.3.0
csi-provisioner|csi-provisioner|$csi/external-provisioner/v6/cmd/csi-provisioner|-X main.version=v6.4.0
kube-scheduler|kube|k8s.io/kubernetes/cmd/kube-scheduler|$kube
kubemark|kube|k8s.io/kubernetes/cmd/kubemark|$kube
EOF
}

log() { printf 'peers: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [ "${1:-}" = "--list" ]; then programs | cut -d'|' -f1; exit 0; fi

go_bin="$(command -v go || true)"
[ -n "$go_bin" ] || go_bin=/usr/local/go/bin/go
[ -x "$go_bin" ] || die "no Go toolchain (go not in PATH, nor /usr/local/go/bin/go)"

cache="${VOLE_PEERS_CACHE:-}"
if [ -z "$cache" ]; then
  cache=/var/cache/vole-peers
  mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ] || cache="${HOME}/.cache/vole-peers"
fi
hash="$( { programs; for f in $(cd "$peers" && ls -1 */go.mod */go.sum | sort); do
  echo "== $f"; cat "$peers/$f"; done; } | sha256sum | cut -c1-16)"
bin="$cache/$hash/bin"
mkdir -p "$bin"

wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then mapfile -t wanted < <(programs | cut -d'|' -f1); fi
for name in "${wanted[@]}"; do
  programs | cut -d'|' -f1 | grep -qx -- "$name" \
    || die "unknown program '$name' (known: $(programs | cut -d'|' -f1 | tr '\n' ' '))"
done

missing=()
for name in "${wanted[@]}"; do [ -x "$bin/$name" ] || missing+=("$name"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$bin"; exit 0; fi

# One builder at a time per cache (parallel test processes may all ask at once).
exec 9>"$cache/.lock"
if ! flock -n 9; then
  log "another scripts/peers.sh is building; waiting for it"
  flock 9
fi

for name in "${wanted[@]}"; do
  [ -x "$bin/$name" ] && continue
  IFS='|' read -r _ dir pkg ldflags < <(programs | grep "^$name|")
  log "building $name ($pkg) ..."
  start=$SECONDS
  if ! (cd "$peers/$dir" && GOFLAGS="-trimpath -buildvcs=false -mod=readonly" \
        "$go_bin" build -p 2 -ldflags "$ldflags" -o "$bin/.$name.tmp" "$pkg" >&2); then
    rm -f "$bin/.$name.tmp"
    die "building $name failed (module test/peers/$dir, package $pkg)"
  fi
  mv "$bin/.$name.tmp" "$bin/$name"
  log "built $name in $((SECONDS - start)) s"
done
echo "$bin"
