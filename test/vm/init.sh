#!/bin/busybox sh
# /init of the guest's initramfs (scripts/vm.sh packs it with a static busybox and the four 9p
# modules). Mounts the host's / read-only and the checkout read-write over 9p, chroots into the
# host's root and runs RUN/cmd.sh there; writes its exit code to RUN/rc, then powers off.
# Kernel command line: fu.proj=CHECKOUT fu.run=RUNDIR (absolute paths, the same as on the host).
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
stty -F /dev/console -onlcr 2>/dev/null   # plain \n on the host's terminal

say() { echo "[vm-init] $*" > /dev/console; }
off() { sync; poweroff -f; echo o > /proc/sysrq-trigger; sleep 10; }
die() { say "FAILED: $*"; off; }
arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^fu\.$1=//p"; }
proj=$(arg proj); run=$(arg run)
[ -n "$proj" ] && [ -n "$run" ] || die "fu.proj/fu.run missing from the kernel command line: $(cat /proc/cmdline)"

for m in netfs 9pnet 9pnet_virtio 9p; do
  insmod /lib/modules/$m.ko || die "insmod $m"
done
# 9p caps msize at 512000. The host's root is read-only and does not change under the guest:
# cache it. The checkout is read-write and the host reads what the guest wrote after power-off.
o9p="trans=virtio,version=9p2000.L,msize=512000"
mkdir -p /newroot
mount -t 9p -o "$o9p,ro,cache=loose" host /newroot || die "mount host / over 9p"
n=/newroot
mount -t proc proc $n/proc && mount -t sysfs sys $n/sys && mount -t devtmpfs dev $n/dev || die "proc/sys/dev"
mkdir -p $n/dev/pts $n/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $n/dev/pts
mount -t tmpfs -o mode=1777 shm $n/dev/shm
mount -t tmpfs -o mode=1777 tmp $n/tmp
mount -t tmpfs -o mode=755 run $n/run
# The checkout last, over the guest's own /tmp and /run: a checkout under /tmp (a CI clone) would
# otherwise be hidden by the tmpfs. Its mountpoint may have to be made inside that tmpfs.
mkdir -p "$n$proj" || die "mkdir $proj"
mount -t 9p -o "$o9p,cache=mmap" proj "$n$proj" || die "mount checkout $proj over 9p"
mount -t fusectl none $n/sys/fs/fuse/connections || die "mount fusectl"
echo Y > /sys/module/fuse/parameters/enable_uring || die "enable_uring=Y"
hostname fuse-uring-guest
# The kernel's default open-file limit (1024/4096) is far below a host's (systemd: 65536 and
# more); the passthrough holds a descriptor per known node and tests look up 3000 files.
ulimit -n 65536 || die "ulimit -n 65536"

: > "$n$run/started" || die "cannot write $run/started in the checkout"   # stops the boot watchdog
# The command's output goes through a pipe, as in CI (not a terminal).
set -o pipefail
chroot $n /bin/bash "$run/cmd.sh" < /dev/null 2>&1 | cat > /dev/console
rc=$?
echo "$rc" > "$n$run/rc" || say "cannot write $run/rc"
umount "$n$proj" 2>/dev/null
off
