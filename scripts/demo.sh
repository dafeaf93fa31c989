#!/usr/bin/env bash
# The demo command (README): set-up, then mount the in-memory filesystem in the foreground.
# Ctrl-C unmounts. MNT defaults to /tmp/fuse-uring-demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
MNT=${1:-/tmp/fuse-uring-demo}
mkdir -p "$MNT"
if [ "$(id -u)" = 0 ] && [ -w /sys/module/fuse/parameters/enable_uring ]; then
  echo Y > /sys/module/fuse/parameters/enable_uring
fi
echo "mounting memfs at $MNT — try: ls -la $MNT; echo hi > $MNT/hello.txt (Ctrl-C to unmount)" >&2
exec node_modules/.bin/bun bin/fuse-uring.ts mount --memfs "$MNT" --stats-file "${TMPDIR:-/tmp}/fuse-uring-demo.stats.json"
