#!/usr/bin/env bash
# Runs one command in a Linux 7.3 guest (QEMU) against this checkout; streams its output and
# exits with its exit code. docs/GUEST.md explains the guest; in short:
#   bash scripts/vm.sh [--cpu MODEL] [--smp N] [--mem MiB] [--timeout SEC] [--env K=V]… [--] CMD [ARG…]
# - the kernel: Debian experimental's linux-{base,binary,modules}-7.3-amd64, fetched once with
#   apt-get download through a private apt state in the cache (the system's sources untouched);
#   its vmlinux is booted directly (PVH entry) with a busybox initramfs (test/vm/init.sh);
# - the guest sees the host's / read-only and the checkout read-write (9p) at the same paths,
#   runs CMD as root in the checkout with FUSE_URING_GUEST=1 and FUSE_URING_VM_CPU=MODEL set,
#   io_uring FUSE enabled and fusectl mounted;
# - KVM when it works (probed once per host boot), TCG otherwise; one line says which.
# A guest that cannot be booted fails (exit 1 and the reason), it never skips.
# Cached after the first run (kernel, initramfs, the KVM probe): then it boots in seconds.
# Environment: FUSE_URING_VM_CACHE (default .cache/vm), FUSE_URING_VM_ACCEL (auto|kvm|tcg),
# FUSE_URING_VM_CPU (default max), FUSE_URING_VM_KERNEL (ABI name, default 7.3-amd64),
# FUSE_URING_VM_MIRROR (default http://deb.debian.org/debian), FUSE_URING_VM_VERBOSE=1 (kernel log),
# FUSE_URING_VM_TIMEOUT (whole run, default 3600 s), FUSE_URING_VM_BOOT_TIMEOUT (until the command starts, 300 s).
set -euo pipefail
cd "$(dirname "$0")/.."
PROJ=$(pwd -P)
CACHE=${FUSE_URING_VM_CACHE:-$PROJ/.cache/vm}
KABI=${FUSE_URING_VM_KERNEL:-7.3-amd64}
MIRROR=${FUSE_URING_VM_MIRROR:-http://deb.debian.org/debian}
CPU=${FUSE_URING_VM_CPU:-max}
SMP=$(nproc); MEM=4096; TIMEOUT=${FUSE_URING_VM_TIMEOUT:-3600}
BOOT_TIMEOUT=${FUSE_URING_VM_BOOT_TIMEOUT:-300}
ENVS=()
log() { printf '[vm] %s\n' "$*" >&2; }
fail() { printf '[vm] FAILED: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) CPU=$2; shift 2 ;;
    --smp) SMP=$2; shift 2 ;;
    --mem) MEM=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --env) [[ "$2" == *=* ]] || fail "--env wants K=V, got $2"; ENVS+=("$2"); shift 2 ;;
    --) shift; break ;;
    -*) echo "usage: $0 [--cpu MODEL] [--smp N] [--mem MiB] [--timeout SEC] [--env K=V]… [--] CMD [ARG…]" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || fail "no command given (usage: $0 [options] [--] CMD [ARG…])"
[ "$(uname -m)" = x86_64 ] || fail "the guest is x86_64 only (this machine is $(uname -m))"
[[ "$PROJ" != *[[:space:]]* ]] || fail "checkout path has white space: $PROJ"
[ "$(id -u)" = 0 ] || fail "run as root (the guest exports / over 9p with the host's owners)"

# --- host tools, installed only when missing -------------------------------------------------
static_busybox() { [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; }
need=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
static_busybox || need+=(busybox-static)
command -v cpio >/dev/null 2>&1 || need+=(cpio)
command -v zstd >/dev/null 2>&1 || need+=(zstd)
command -v xz >/dev/null 2>&1 || need+=(xz-utils)
command -v apt-get >/dev/null 2>&1 || fail "no apt-get: this harness needs a Debian host"
if [ ${#need[@]} -gt 0 ]; then
  log "apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || true
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null || fail "apt-get install ${need[*]}"
fi

# --- the kernel: vmlinux, config, the 9p modules ----------------------------------------------
KDIR=$CACHE/kernel/$KABI
mkdir -p "$CACHE"
exec 9> "$CACHE/.lock"; flock 9   # one builder of the cache at a time (released before the boot)
fetch_kernel() {
  local apt=$CACHE/apt dl=$CACHE/kernel/.download
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/empty" "$dl"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR experimental main" > "$apt/sources.list"
  : > "$apt/status"
  local o=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/empty"
    -o "Dir::Etc::Preferences=$apt/empty/none" -o "Dir::Etc::PreferencesParts=$apt/empty"
    -o "Dir::State::Lists=$apt/lists" -o "Dir::State::status=$apt/status" -o "Dir::Cache=$apt/cache"
    -o APT::Sandbox::User=root -q)
  log "fetching linux-{base,binary,modules}-$KABI from Debian experimental ($MIRROR; private apt state in $apt)"
  apt-get "${o[@]}" update >/dev/null || fail "apt-get update of Debian experimental ($MIRROR) failed"
  rm -f "$dl"/*.deb
  (cd "$dl" && apt-get "${o[@]}" download "linux-base-$KABI" "linux-binary-$KABI" "linux-modules-$KABI" >/dev/null) \
    || fail "apt-get download linux-{base,binary,modules}-$KABI failed (does experimental still serve it? see FUSE_URING_VM_KERNEL)"
  local tmp=$KDIR.tmp; rm -rf "$tmp"; mkdir -p "$tmp/x" "$tmp/modules"
  local deb
  for deb in "$dl"/*.deb; do
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/x" --wildcards \
      "*/modules/$KABI/vmlinuz" "*/modules/$KABI/config" \
      '*/netfs.ko.xz' '*/9pnet.ko.xz' '*/9pnet_virtio.ko.xz' '*/9p.ko.xz' 2>/dev/null || true
  done
  local m=$tmp/x/usr/lib/modules/$KABI
  [ -f "$m/vmlinuz" ] && [ -f "$m/config" ] || fail "vmlinuz or config missing from the packages"
  python3 test/vm/extract-vmlinux.py "$m/vmlinuz" "$tmp/vmlinux" || fail "cannot extract vmlinux from $m/vmlinuz"
  cp "$m/config" "$tmp/config"
  local k
  for k in netfs 9pnet 9pnet_virtio 9p; do
    local f; f=$(find "$m" -name "$k.ko.xz" | head -1)
    [ -n "$f" ] || fail "module $k.ko.xz missing from linux-modules-$KABI"
    xz -dc "$f" > "$tmp/modules/$k.ko"
  done
  dpkg-deb -f "$dl"/linux-binary-*.deb Version > "$tmp/version"
  rm -rf "$tmp/x" "$dl"
  rm -rf "$KDIR"; mv "$tmp" "$KDIR"
}
[ -f "$KDIR/vmlinux" ] && [ -f "$KDIR/version" ] || fetch_kernel
for opt in CONFIG_FUSE_FS=y CONFIG_FUSE_IO_URING=y CONFIG_PVH=y; do
  grep -qx "$opt" "$KDIR/config" || fail "$KABI kernel config lacks $opt"
done

# --- the initramfs (rebuilt when init.sh, busybox or the modules change) ----------------------
key=$(cat test/vm/init.sh /bin/busybox "$KDIR"/modules/*.ko | sha256sum | cut -c1-16)
INITRD=$CACHE/initrd-$key.cpio
if [ ! -f "$INITRD" ]; then
  r=$(mktemp -d)
  mkdir -p "$r/bin" "$r/lib/modules" "$r/proc" "$r/sys" "$r/dev"
  cp /bin/busybox "$r/bin/busybox"
  cp "$KDIR"/modules/*.ko "$r/lib/modules/"
  install -m 755 test/vm/init.sh "$r/init"
  (cd "$r" && find . | cpio -o -H newc --quiet) > "$INITRD.tmp"
  rm -rf "$r"; mv "$INITRD.tmp" "$INITRD"
  find "$CACHE" -maxdepth 1 -name 'initrd-*.cpio' ! -path "$INITRD" -delete
fi
flock -u 9; exec 9>&-

# --- one boot ----------------------------------------------------------------------------------
# qemu_args ACCEL CPU RUNDIR: sets Q to the QEMU command line (console on stdio).
qemu_args() {
  local accel=$1 cpu=$2 run=$3
  # mitigations=off: a throwaway test guest; page-table isolation alone costs TCG much time.
  local append="console=ttyS0 panic=-1 mitigations=off fu.proj=$PROJ fu.run=$run"
  [ "${FUSE_URING_VM_VERBOSE:-}" = 1 ] || append="quiet $append"
  local acc=(-accel tcg,thread=multi)
  [ "$accel" = kvm ] && acc=(-accel kvm)
  Q=(qemu-system-x86_64 "${acc[@]}" -cpu "$cpu" -m "$MEM" -smp "$SMP"
    -nodefaults -no-user-config -display none -serial stdio -no-reboot
    -kernel "$KDIR/vmlinux" -initrd "$INITRD" -append "$append"
    -virtfs "local,path=/,mount_tag=host,security_model=passthrough,readonly=on,multidevs=remap"
    -virtfs "local,path=$PROJ,mount_tag=proj,security_model=passthrough,multidevs=remap")
}
new_run() { # new_run CMD… → a run directory in the checkout holding cmd.sh
  local run; mkdir -p "$PROJ/.cache/vm-runs"
  run=$(mktemp -d "$PROJ/.cache/vm-runs/run.XXXXXX")
  {
    echo "cd $(printf '%q' "$PROJ") || exit 126"
    echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 TERM=dumb"
    echo "export FUSE_URING_GUEST=1 FUSE_URING_VM_CPU=$(printf '%q' "$CPU")"
    local e; for e in ${ENVS[@]+"${ENVS[@]}"}; do echo "export $(printf '%q' "$e")"; done
    printf 'exec'; printf ' %q' "$@"; echo
  } > "$run/cmd.sh"
  echo "$run"
}

# --- KVM or TCG --------------------------------------------------------------------------------
# On a virtualised host /dev/kvm can exist and still fail ("KVM internal error … emulation
# failure" on instructions the nested hypervisor does not emulate; QEMU then hangs). So the probe
# boots the guest with `true` and watches for that; the answer is kept until the host reboots.
accel_reason=""
choose_accel() {
  case "${FUSE_URING_VM_ACCEL:-auto}" in
    kvm|tcg) ACCEL=$FUSE_URING_VM_ACCEL; accel_reason="FUSE_URING_VM_ACCEL"; return ;;
    auto) ;;
    *) fail "FUSE_URING_VM_ACCEL must be auto, kvm or tcg" ;;
  esac
  if [ ! -w /dev/kvm ]; then ACCEL=tcg; accel_reason="no /dev/kvm"; return; fi
  local stamp; stamp=$CACHE/kvm-probe.$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)
  if [ ! -f "$stamp" ]; then
    local run out pid i r=
    run=$(new_run true); out=$run/console
    qemu_args kvm "$CPU" "$run"
    (ulimit -c 0; "${Q[@]}" < /dev/null > "$out" 2>&1) 2>/dev/null & pid=$!
    for i in $(seq 1 150); do   # ≤ 15 s; a working KVM boots in about one
      [ -f "$run/rc" ] && break
      grep -q "KVM internal error" "$out" 2>/dev/null && break   # QEMU would hang there
      kill -0 $pid 2>/dev/null || break
      sleep 0.1
    done
    if [ -f "$run/rc" ]; then r=ok
    elif kill -0 $pid 2>/dev/null && ! grep -q "KVM internal error" "$out"; then r="fails: no answer from a KVM guest in 15 s"
    else r="fails: $(grep -m1 'KVM internal error\|error' "$out" || grep -v '^\s*$' "$out" | tail -1 || echo "QEMU exited")"
    fi
    kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
    rm -rf "$run"
    find "$CACHE" -maxdepth 1 -name 'kvm-probe.*' -delete
    echo "$r" > "$stamp"
  fi
  if [ "$(cat "$stamp")" = ok ]; then ACCEL=kvm; accel_reason="KVM works"
  else ACCEL=tcg; accel_reason="KVM unusable here: $(sed 's/^fails: //' "$stamp")"; fi
}
choose_accel

RUN=$(new_run "$@")
trap 'rm -rf "$RUN"' EXIT
log "Linux $KABI $(cat "$KDIR/version") under QEMU $(echo $ACCEL | tr a-z A-Z) ($accel_reason), -cpu $CPU, $SMP CPUs, $MEM MiB: $*"
start=$(date +%s)
set +e
qemu_args "$ACCEL" "$CPU" "$RUN"
timeout -k 10 "$TIMEOUT" "${Q[@]}" < /dev/null & qpid=$!
# Boot watchdog: init.sh writes RUN/started just before it runs the command; a guest that has
# not got there within FUSE_URING_VM_BOOT_TIMEOUT seconds is stopped (a hung boot fails now,
# not after --timeout).
( for _ in $(seq "$BOOT_TIMEOUT"); do
    sleep 1; [ -f "$RUN/started" ] && exit 0; kill -0 $qpid 2>/dev/null || exit 0
  done
  echo "[vm] FAILED: the guest did not start the command within ${BOOT_TIMEOUT}s (FUSE_URING_VM_BOOT_TIMEOUT): stopping QEMU" >&2
  kill $qpid ) & wpid=$!
wait $qpid
qrc=$?
kill $wpid 2>/dev/null; wait $wpid 2>/dev/null
echo   # the kernel's last console line ("reboot: Power down") ends without one
set -e
if [ ! -f "$RUN/rc" ]; then
  [ $qrc = 124 ] && fail "the guest did not finish within ${TIMEOUT}s (FUSE_URING_VM_TIMEOUT)"
  fail "the guest did not report an exit code (QEMU exit $qrc): it did not boot or its init failed (see above; FUSE_URING_VM_VERBOSE=1 shows the kernel log)"
fi
rc=$(cat "$RUN/rc")
log "guest command exited $rc after $(( $(date +%s) - start ))s"
exit "$rc"
