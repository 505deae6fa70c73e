#!/usr/bin/env bash
# The partition suite's longer, seeded run (test/cluster/partition.host.test.ts), by hand:
#   scripts/partition.sh --seed N --runs K     K schedules drawn from seeds N..N+K-1
#   scripts/partition.sh --only NAME           one schedule of the fixed CI set
# As root: it makes network namespaces and mounts loop disks inside a private mount
# namespace (unshare -m), like every host test. The same seed draws the same schedule.
set -euo pipefail
cd "$(dirname "$0")/.."
seed='' runs=1 only=''
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) seed="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    *) echo "usage: scripts/partition.sh [--seed N --runs K | --only NAME]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "scripts/partition.sh needs root (network namespaces, mounts)" >&2; exit 2; }
for bin in etcd etcdctl nft; do
  command -v "$bin" >/dev/null || { echo "$bin is missing: run scripts/test.sh once, or apt-get install etcd-server etcd-client nftables" >&2; exit 2; }
done
export VOLE_OUTER_MOUNT_NS="$(readlink /proc/self/ns/mnt)"
[ -n "$seed" ] && export VOLE_PARTITION_SEED="$seed" VOLE_PARTITION_RUNS="$runs"
[ -n "$only" ] && export VOLE_PARTITION_ONLY="$only"
exec unshare -m --propagation private node --import tsx --test --test-timeout=$((runs * 200000 + 300000)) \
  test/cluster/partition.host.test.ts
