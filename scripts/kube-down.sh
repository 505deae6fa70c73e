#!/usr/bin/env bash
# Stops the control plane scripts/kube-up.sh DIR started: exactly the PIDs in DIR/pids
# (each checked to still be that program running on DIR, so a reused PID is left alone),
# newest first, each SIGTERM, then SIGKILL after 10 s; removes the hollow nodes' root
# directories. Leaves DIR (logs, data) for a look; remove it yourself.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: kube-down.sh DIR" >&2; exit 2; }
dir="$(cd "$1" && pwd)"
[ -f "$dir/pids" ] || { echo "kube-down: no $dir/pids: nothing to stop" >&2; exit 0; }

ours() { # PID NAME: still our NAME (hollow-X: kubemark), started with arguments under DIR?
  local cmdline program="$2"
  [[ "$program" != hollow-* ]] || program=kubemark
  cmdline="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *"/$program "* && "$cmdline" == *"$dir"* ]]
}

alive() { # a process that has not exited (a zombie nobody reaped yet counts as gone)
  local state
  state="$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null)" || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# Newest first, one at a time (the API server shuts down cleanly only while etcd still runs).
stopped=0
while read -r name pid; do
  [ -n "${pid:-}" ] || continue
  alive "$pid" && ours "$pid" "$name" || continue
  kill -TERM "$pid" || continue
  stopped=$((stopped + 1))
  deadline=$((SECONDS + 10))
  while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  if alive "$pid" && ours "$pid" "$name"; then
    echo "kube-down: $name (pid $pid) still runs 10 s after SIGTERM: SIGKILL" >&2
    kill -KILL "$pid" || true
  fi
done < <(tac "$dir/pids")
rm -f "$dir/pids"
echo "kube-down: stopped $stopped process(es) of $dir" >&2
# The hollow nodes' root directories (kubemark's /tmp/hollow-kubelet.*, as kube-up.sh read
# them from their logs); nothing else is removed.
if [ -f "$dir/hollow-nodes" ]; then
  while read -r name root; do
    [[ "${root:-}" =~ ^/tmp/hollow-kubelet\.[0-9]+$ ]] || continue
    rm -rf "$root" && echo "kube-down: removed hollow node $name's root dir $root" >&2
  done <"$dir/hollow-nodes"
  rm -f "$dir/hollow-nodes"
fi
