#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what it needs, type-checks, runs
# every tier (unit, scenario, host as root in a private mount namespace, browser).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ] \
   || [ ! -f node_modules/better-sqlite3/build/Release/better_sqlite3.node ]; then
  echo "== installing dependencies (npm ci)"
  npm ci --no-audit --no-fund
fi
# Host tests grow XFS filesystems online (ext4 cannot grow online without CAP_SYS_RESOURCE).
if [ "$(id -u)" = 0 ] && ! command -v mkfs.xfs >/dev/null 2>&1; then
  echo "== installing xfsprogs (apt-get)"
  (apt-get update -qq && apt-get install -y -qq xfsprogs) || echo "xfsprogs unavailable: the XFS growth test will skip"
fi
# The inspector's browser tests (test/inspect/*.browser.test.ts) drive Debian's Chromium;
# without it they skip, saying so.
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "== installing chromium (for the browser tests)"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } \
    || echo "chromium could not be installed: the browser tests will skip"
fi
# The metrics tests lint the exposition with promtool and scrape an agent with a real
# Prometheus server (Debian's prometheus package ships both); without it they skip.
if ! command -v prometheus >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "== installing prometheus (for the metrics tests)"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q prometheus; } \
    || echo "prometheus could not be installed: the metrics tests that need it will skip"
fi
# Cluster tests (test/cluster/*.cluster.test.ts, *.host.test.ts there) start a real 3-member
# etcd (Debian etcd-server 3.4) and check it with etcdctl; without them they skip.
if { ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; } && [ "$(id -u)" = 0 ] \
   && command -v apt-get >/dev/null; then
  echo "== installing etcd-server and etcd-client (for the cluster tests)"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server etcd-client; } \
    || echo "etcd could not be installed: the cluster tests will skip"
fi
# The partition tests (test/cluster/partition.host.test.ts, netns.host.test.ts) cut links
# between network namespaces with nftables; without nft they skip.
if ! command -v nft >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "== installing nftables (for the partition tests)"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nftables; } \
    || echo "nftables could not be installed: the partition tests will skip"
fi
# The real Kubernetes and CSI programs (test/peers/, docs/peers.md), built once from the Go
# module proxy into a cache outside the tree; a warm run takes a second.
echo "== peers (scripts/peers.sh)"
peers_start=$SECONDS
bash scripts/peers.sh >/dev/null
echo "   peers ready in $((SECONDS - peers_start)) s"
echo "== type check"
npx --no-install tsc --noEmit -p .
echo "== tests"
node scripts/run-tests.mjs
