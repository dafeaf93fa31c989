#!/usr/bin/env bash
# Prebuilt shims for the npm package (run by `npm pack` / `npm publish` through "prepack"):
#   prebuilt/linux-x64/libfuse_uring_shim.so    built here (x86_64, glibc ≥ 2.17)
#   prebuilt/linux-arm64/libfuse_uring_shim.so  cross-built with Zig (aarch64, glibc ≥ 2.17)
# Installing the package then needs neither Zig nor liburing: lib/native.ts loads
# prebuilt/<platform>-<arch>/. Both link liburing.a statically; the arm64 one needs Debian's
# liburing-dev:arm64, which is fetched with `apt-get download` into .cache/ (as root this adds
# the arm64 dpkg architecture if missing); set LIBURING_ARM64=/path/liburing.a to use another.
#   bash scripts/pack.sh [--arches "x64 arm64"]      (env FUSE_URING_PACK_ARCHES works too)
# Fast when nothing changed (Zig's cache: ~1 s per arch).
set -euo pipefail
cd "$(dirname "$0")/.."
arches=${FUSE_URING_PACK_ARCHES:-x64 arm64}
while [ $# -gt 0 ]; do
  case "$1" in
    --arches) arches=$2; shift 2 ;;
    *) echo "usage: $0 [--arches \"x64 arm64\"]" >&2; exit 2 ;;
  esac
done
log() { printf '[pack] %s\n' "$*" >&2; }

bash scripts/setup.sh
ZIG_VERSION=$(sed -n 's/^ZIG_VERSION=//p' scripts/setup.sh)
if command -v zig >/dev/null 2>&1 && [ "$(zig version)" = "$ZIG_VERSION" ]; then ZIG=(zig); else ZIG=(python3 -m ziglang); fi

arm64_liburing() {
  if [ -n "${LIBURING_ARM64:-}" ]; then echo "$LIBURING_ARM64"; return; fi
  if [ -f /usr/lib/aarch64-linux-gnu/liburing.a ]; then echo /usr/lib/aarch64-linux-gnu/liburing.a; return; fi
  local cache=.cache/arm64-liburing
  if [ ! -f "$cache/root/usr/lib/aarch64-linux-gnu/liburing.a" ]; then
    command -v apt-get >/dev/null 2>&1 || { log "no apt-get: cannot fetch liburing-dev:arm64"; return 1; }
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
      if [ "$(id -u)" != 0 ]; then log "liburing-dev:arm64 needs the arm64 dpkg architecture: as root run dpkg --add-architecture arm64 && apt-get update"; return 1; fi
      log "dpkg --add-architecture arm64 && apt-get update (to fetch liburing-dev:arm64)"
      dpkg --add-architecture arm64
      apt-get update -qq >/dev/null
    fi
    mkdir -p "$cache"
    local deb
    (cd "$cache" && apt-get download -qq liburing-dev:arm64 >/dev/null 2>&1) || { log "apt-get download liburing-dev:arm64 failed"; return 1; }
    deb=$(ls "$cache"/liburing-dev_*_arm64.deb | head -1)
    dpkg-deb -x "$deb" "$cache/root"
  fi
  echo "$cache/root/usr/lib/aarch64-linux-gnu/liburing.a"
}

build() { # build ARCH ZIG_TRIPLE [extra zig build args…]
  local arch=$1 triple=$2; shift 2
  local out=prebuilt/linux-$arch/libfuse_uring_shim.so
  log "zig build -Dtarget=$triple → $out"
  "${ZIG[@]}" build -Doptimize=ReleaseSafe -Dtarget="$triple" "$@" \
    --prefix "prebuilt/linux-$arch" --prefix-lib-dir . >&2
  log "$out: $(file -b "$out" | cut -d, -f1-2)"
}

for a in $arches; do
  case "$a" in
    x64) build x64 x86_64-linux-gnu.2.17 ;;
    arm64)
      if lib=$(arm64_liburing); then
        build arm64 aarch64-linux-gnu.2.17 -Dliburing="$lib" -Dliburing-include="$(dirname "$(dirname "$(dirname "$lib")")")/include"
      else
        log "SKIPPED linux-arm64: no arm64 liburing.a (see above); the package will work on x64 only"
      fi ;;
    *) log "unknown arch $a (x64, arm64)"; exit 2 ;;
  esac
done
