#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine (root) or an already prepared one.
# Installs: liburing-dev, fuse3, fio, attr, stress-ng, binutils (Debian); Bun + TypeScript (npm, pinned in package.json);
# Zig (PyPI `ziglang`, pinned below) unless a matching `zig` is on PATH. Builds the shim.
# Fast when everything is present: every step checks before it acts.
set -euo pipefail
cd "$(dirname "$0")/.."
ZIG_VERSION=0.15.1

log() { printf '[setup] %s\n' "$*" >&2; }

need_apt=()
[ -f /usr/include/liburing.h ] || need_apt+=(liburing-dev)
command -v fusermount3 >/dev/null 2>&1 || need_apt+=(fuse3)
command -v fio >/dev/null 2>&1 || need_apt+=(fio)
command -v taskset >/dev/null 2>&1 || need_apt+=(util-linux)
command -v attr >/dev/null 2>&1 || need_apt+=(attr)
command -v objdump >/dev/null 2>&1 || need_apt+=(binutils)   # test/baseline-build.test.ts
command -v stress-ng >/dev/null 2>&1 || need_apt+=(stress-ng) # test/integration/memfs-shared.test.ts
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing Debian packages: ${need_apt[*]} — run this script as root once (apt-get install)"; exit 1
  fi
  log "apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x node_modules/.bin/bun ] || ! node_modules/.bin/bun --version >/dev/null 2>&1 \
   || [ package.json -nt node_modules/.package-lock.json ]; then
  log "npm install (bun, typescript)"
  if [ -f package-lock.json ]; then npm ci --no-audit --no-fund >/dev/null; else npm install --no-audit --no-fund >/dev/null; fi
fi

zig_ok() { command -v zig >/dev/null 2>&1 && [ "$(zig version 2>/dev/null)" = "$ZIG_VERSION" ]; }
if zig_ok; then ZIG=zig
else
  if [ "$(python3 -m ziglang version 2>/dev/null || true)" != "$ZIG_VERSION" ]; then
    log "pip install ziglang==$ZIG_VERSION"
    python3 -m pip install -q --disable-pip-version-check "ziglang==$ZIG_VERSION" 2>/dev/null \
      || python3 -m pip install -q --disable-pip-version-check --break-system-packages "ziglang==$ZIG_VERSION"
  fi
  ZIG="python3 -m ziglang"
fi

# Rebuild the shim only when a source is newer than the library.
lib=zig-out/lib/libfuse_uring_shim.so
if [ ! -f "$lib" ] || [ -n "$(find shim build.zig -newer "$lib" -type f 2>/dev/null | head -1)" ]; then
  log "building shim (zig build -Doptimize=ReleaseSafe: the baseline CPU of the arch, see build.zig)"
  $ZIG build -Doptimize=ReleaseSafe
fi
log "ready: $(node_modules/.bin/bun --version) bun, zig $($ZIG version), $lib"
