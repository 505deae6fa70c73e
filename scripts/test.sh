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
echo "== type check"
npx --no-install tsc --noEmit -p .
echo "== tests"
node scripts/run-tests.mjs
