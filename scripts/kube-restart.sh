#!/usr/bin/env bash
# A crash of one program of the control plane scripts/kube-up.sh DIR started, and its
# supervisor's restart: SIGKILL the PID DIR/pids lists for NAME (checked to still be that
# program running on DIR), wait until it is gone, start it again with the command line
# kube-up saved in DIR/NAME.cmd (its output appended to DIR/NAME.log), and put the new PID
# in DIR/pids. Prints the new PID. It does not wait for the program to be ready.
#
#   scripts/kube-restart.sh DIR NAME [--down-seconds S]   (S: stay down this long first)
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: kube-restart.sh DIR NAME [--down-seconds S]" >&2; exit 2; }
dir="$(cd "$1" && pwd)" name="$2" down_s=0
[ "${3:-}" != --down-seconds ] || down_s="${4:?--down-seconds needs a number}"
[ -f "$dir/$name.cmd" ] || { echo "kube-restart: no $dir/$name.cmd: kube-up did not start $name" >&2; exit 1; }
pid="$(awk -v n="$name" '$1 == n { p = $2 } END { print p }' "$dir/pids")"
[ -n "$pid" ] || { echo "kube-restart: $name is not in $dir/pids" >&2; exit 1; }
program="$name"; [[ "$program" != hollow-* ]] || program=kubemark
cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
if [[ "$cmdline" == *"/$program "* && "$cmdline" == *"$dir"* ]]; then
  kill -KILL "$pid"
  while [ -e "/proc/$pid" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null; do
    sleep 0.05
  done
fi
sleep "$down_s"
bash -c "exec $(cat "$dir/$name.cmd")" </dev/null >>"$dir/$name.log" 2>&1 &
new=$!
awk -v n="$name" -v p="$new" '$1 == n { $2 = p } { print }' "$dir/pids" >"$dir/pids.new"
mv "$dir/pids.new" "$dir/pids"
echo "kube-restart: $name killed (pid $pid) and started again (pid $new)" >&2
echo "$new"
