#!/usr/bin/env bash
# A paths() script with a CPU-heavy READ handler (bench/fs/burn-paths.ts, 50 µs per READ):
# `threads: "stateless"` (a thread per CPU over one shared node table) against one thread,
# fio 4 KiB O_DIRECT randread, QD1 × 2 jobs (one per CPU), ROUNDS interleaved rounds.
# Run it alone: flock -x /tmp/fuse-uring-global.lock bash bench/burn-paths.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-5}
BUN=node_modules/.bin/bun
tmp=$(mktemp -d /tmp/fuse-uring-burn-paths.XXXXXX)
trap 'for m in "$tmp"/m-*; do mountpoint -q "$m" && $BUN bin/fuse-uring.ts unmount "$m" >/dev/null 2>&1; done; rm -rf "$tmp"' EXIT
iops() { # mountpoint
  fio --name=burn --filename="$1/f.0" --rw=randread --bs=4k --direct=1 --ioengine=psync --iodepth=1 --numjobs=2 \
    --cpus_allowed=0-1 --cpus_allowed_policy=split --size=64M --readonly --time_based --runtime="$SECS" \
    --group_reporting --output-format=json | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))'
}
for mode in single stateless; do
  mkdir -p "$tmp/m-$mode"
  $BUN bin/fuse-uring.ts mount bench/fs/burn-paths.ts "$tmp/m-$mode" --stats-file "$tmp/$mode.stats.json" -- --threads "$mode" --size 67108864 >"$tmp/$mode.log" 2>&1 &
done
for mode in single stateless; do
  for _ in $(seq 100); do grep -q mounted "$tmp/$mode.log" && break; sleep 0.1; done
  echo "$mode: $(grep mounted "$tmp/$mode.log")"
done
declare -A sum=([single]=0 [stateless]=0)
for r in $(seq "$ROUNDS"); do
  for mode in single stateless; do
    n=$(iops "$tmp/m-$mode")
    sum[$mode]=$((sum[$mode] + n))
    echo "round $r $mode: $n IOPS"
  done
done
python3 - "$tmp" <<PY
import json, sys
for m in ("single", "stateless"):
    s = json.load(open(f"{sys.argv[1]}/{m}.stats.json"))
    print(m, "threads:", [(t["thread"], t["requests"]) for t in s["threads"]])
PY
echo "mean single: $((sum[single] / ROUNDS)) IOPS, stateless: $((sum[stateless] / ROUNDS)) IOPS, ratio: $(python3 -c "print(round(${sum[stateless]} / ${sum[single]}, 2))")"
