#!/usr/bin/env bash
# stress-ng's whole filesystem class, one stressor at a time with --verify, on one mount
# configuration: the check issue 29 asks for ("pass on the default memfs and passthrough mounts
# as they do on --workers 1, with no copy evicted").
#
#   bash bench/stress-fs.sh memfs|passthrough [SECONDS] [-- MOUNT OPTIONS…]
#   e.g. bash bench/stress-fs.sh memfs 3 -- --workers 1
#
# Prints one line per stressor (pass / FAIL / skipped by stress-ng itself, with the reason) and a
# summary; exits 1 when any stressor failed or the daemon logged an eviction or a BUG. Root.
set -u
kind=${1:?usage: bash bench/stress-fs.sh memfs|passthrough [SECONDS] [-- OPTIONS…]}
secs=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
[ "${1:-}" = "--" ] && shift
here=$(cd "$(dirname "$0")/.." && pwd)
bun="$here/node_modules/.bin/bun"
mnt=$(mktemp -d /tmp/stress-mnt-XXXXXX)
src=$(mktemp -d /tmp/stress-src-XXXXXX)
log=$(mktemp /tmp/stress-log-XXXXXX)
case $kind in
  memfs) fsargs=(--memfs) ;;
  passthrough) fsargs=(--passthrough "$src") ;;
  *) echo "usage: bash bench/stress-fs.sh memfs|passthrough [SECONDS] [-- OPTIONS…]" >&2; exit 2 ;;
esac
"$bun" "$here/bin/fuse-uring.ts" mount "${fsargs[@]}" "$mnt" "$@" 2>"$log" &
daemon=$!
for _ in $(seq 100); do grep -q "mounted" "$log" && break; sleep 0.1; done
grep -q "mounted" "$log" || { cat "$log"; exit 1; }
head -3 "$log"

stressors=$(stress-ng --class 'filesystem?' 2>&1 | sed 's/.*stressors: //')
pass=0 fail=0 skipped=0 failed=""
for s in $stressors; do
  mkdir -p "$mnt/s-$s"
  out=$(cd "$mnt/s-$s" && timeout $((secs * 10 + 60)) stress-ng --"$s" 2 --verify --timeout "${secs}s" --temp-path "$mnt/s-$s" 2>&1)
  rc=$?
  # stress-ng skips what the machine lacks (binderfs, verity, …; exit 0 or 3 = "no resource")
  # and stressors it calls pathological (not run without --pathological): neither is a failure
  # of the filesystem, both are listed with stress-ng's reason.
  why=$(grep -m1 -E "skipping|disabled '" <<<"$out" | sed 's/^stress-ng: [a-z]*: *\[[0-9]*\] //' | cut -c1-110)
  if [ -n "$why" ] && { [ $rc -eq 0 ] || [ $rc -eq 3 ] || grep -q "No stress workers invoked" <<<"$out"; }; then
    skipped=$((skipped + 1)); printf '%-14s skipped: %s\n' "$s" "$why"
  elif [ $rc -eq 0 ]; then
    pass=$((pass + 1)); printf '%-14s pass\n' "$s"
  else
    fail=$((fail + 1)); failed="$failed $s"; printf '%-14s FAIL (exit %d)\n' "$s" "$rc"; tail -8 <<<"$out" | sed 's/^/    /'
  fi
  rm -rf "$mnt/s-$s" 2>/dev/null
done
umount "$mnt" 2>/dev/null || "$bun" "$here/bin/fuse-uring.ts" unmount "$mnt"
wait $daemon; rc=$?
bad=$(grep -cE "evicted|BUG|fail-stop" "$log")
echo "$kind $*: $pass passed, $fail failed, $skipped skipped by stress-ng; daemon exit $rc; evictions/BUG lines: $bad${failed:+; failed:$failed}"
rmdir "$mnt"; rm -rf "$src" "$log"
[ $fail -eq 0 ] && [ "$bad" -eq 0 ] && [ $rc -eq 0 ]
