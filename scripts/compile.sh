#!/usr/bin/env bash
# Standalone binary: dist/fuse-uring = Bun runtime + CLI + library + the shim, one file.
# Copy it anywhere (same OS/arch, glibc); it needs neither Bun, Zig nor this checkout.
#   bash scripts/compile.sh [--outfile PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist/fuse-uring
while [ $# -gt 0 ]; do
  case "$1" in
    --outfile) out=$2; shift 2 ;;
    *) echo "usage: $0 [--outfile PATH]" >&2; exit 2 ;;
  esac
done
bash scripts/setup.sh
mkdir -p "$(dirname "$out")"
node_modules/.bin/bun build --compile --minify-syntax --sourcemap=inline \
  bin/compile-entry.ts --outfile "$out" >&2
echo "[compile] $out ($(du -h "$out" | cut -f1)): try $out doctor" >&2
