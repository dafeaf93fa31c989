#!/usr/bin/env bash
# Standalone binary: dist/fuse-uring = Bun runtime + CLI + library + the shim, one file.
# Copy it anywhere (same OS/arch, glibc); it needs neither Bun, Zig nor this checkout.
#   bash scripts/compile.sh [--outfile PATH]
set -euo pipefail
out=
while [ $# -gt 0 ]; do
  case "$1" in
    --outfile) out=$(realpath -m -- "$2"); shift 2 ;;
    *) echo "usage: $0 [--outfile PATH]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
out=${out:-dist/fuse-uring}
# The Bun runtime inside is the baseline build of the arch (x64: no AVX/AVX2, runs from Nehalem
# on; Bun has nothing older), fetched by Bun from the npm registry once: the binary must run on
# any x86-64/arm64 box, not only on CPUs like the build machine's (docs/GUEST.md, baseline test).
case "$(uname -m)" in
  x86_64) arch=x64; bun_target=bun-linux-x64-baseline ;;
  aarch64) arch=arm64; bun_target=bun-linux-arm64 ;;
  *) echo "[compile] unsupported machine $(uname -m)" >&2; exit 1 ;;
esac
# The portable shim (glibc ≥ 2.17) of this machine's arch, at the path bin/compile-entry.ts embeds.
bash scripts/pack.sh --arches "$arch"
mkdir -p "$(dirname "$out")" dist/shim
cp "prebuilt/linux-$arch/libfuse_uring_shim.so" dist/shim/libfuse_uring_shim.so
# --sourcemap embeds the map in the binary (stack traces name lib/*.ts); the .map file Bun also
# writes beside it is not needed.
# lib/worker-main.ts is a second entry point: the threads of --workers N start from it.
node_modules/.bin/bun build --compile --minify-syntax --sourcemap \
  bin/compile-entry.ts lib/worker-main.ts --outfile "$out" >&2
rm -f "$out.map"
echo "[compile] $out ($(du -h "$out" | cut -f1)): try $out doctor" >&2
