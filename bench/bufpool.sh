#!/bin/bash
# Buffer pools and zero-copy (docs/BUFFERS.md), one interleaved run: 1 MiB O_DIRECT sequential
# read and write through the passthrough with zero-copy, with pools (--no-zero-copy), with
# per-entry buffers (--pool-size 0), and libfuse's passthrough_hp -o io_uring --nopassthrough.
# Meant for a Linux 7.3 guest (the kernel must offer FUSE_HAS_IO_URING_BUFPOOL; under TCG only
# the ratios mean anything). Run as root from the checkout:
#   bash bench/bufpool.sh [ROUNDS] [SECONDS]      (LIBFUSE=path of the libfuse anchor folder)
set -u
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}; SECS=${2:-5}
# (the anchor folder must hold lib/libfuse3.so.4 as a symlink or a copy of the library)
LIBFUSE=${LIBFUSE:-/work/shared/anchors/libfuse}
BUN=node_modules/.bin/bun
W=$(mktemp -d /tmp/fuse-uring-bench-bp-XXXX)
SRC=$W/src; MNT=$W/mnt; mkdir -p $SRC $MNT
mount -t tmpfs -o size=600m tmpfs $SRC
head -c 64M /dev/urandom > $SRC/f
echo Y > /sys/module/fuse/parameters/enable_uring

declare -A CMD=(
  [zero-copy]="$BUN bin/fuse-uring.ts mount --passthrough $SRC $MNT --stats-file $W/stats.json"
  [pools]="$BUN bin/fuse-uring.ts mount --passthrough $SRC $MNT --no-zero-copy --stats-file $W/stats.json"
  [per-entry]="$BUN bin/fuse-uring.ts mount --passthrough $SRC $MNT --pool-size 0 --stats-file $W/stats.json"
  [libfuse]="$LIBFUSE/example/passthrough_hp --foreground --nopassthrough -o io_uring $SRC $MNT"
)
ORDER="zero-copy pools per-entry libfuse"

bw() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); t=j["jobs"][0]; print(round((t["read"]["bw_bytes"]+t["write"]["bw_bytes"])/1048576,1))' "$1"; }

for r in $(seq "$ROUNDS"); do
  for c in $ORDER; do
    ${CMD[$c]} > $W/daemon.log 2>&1 &
    pid=$!
    for i in $(seq 600); do mountpoint -q $MNT && break; sleep 0.1; done
    mountpoint -q $MNT || { echo "$c: no mount"; cat $W/daemon.log; exit 1; }
    for rw in read write; do
      timeout $((SECS + 60)) fio --name=b --filename=$MNT/$( [ $rw = read ] && echo f || echo w ) --rw=$rw --bs=1M --direct=1 --ioengine=psync \
        --size=64M --time_based --runtime=$SECS --ramp_time=1 --output-format=json --output=$W/fio.json > /dev/null 2>&1
      echo "round $r $c $rw $(bw $W/fio.json) MiB/s"
    done
    if [ "$c" != libfuse ]; then
      python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("  stats", {k: s.get(k) for k in ["bufferPools","zeroCopy","zeroCopyRequests","nativeRequests","pinnedBytes","errors"]})' $W/stats.json
    fi
    rm -f $MNT/w 2>/dev/null
    kill -TERM $pid; wait $pid 2>/dev/null
    mountpoint -q $MNT && umount -l $MNT
  done
done
umount $SRC; rm -rf $W
