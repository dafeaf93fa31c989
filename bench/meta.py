#!/usr/bin/env python3
"""Metadata workload and mount smoke test for bench/run.ts.

Runs as its own process (never inside the FUSE daemon) and needs nothing compiled:

  meta.py meta DIR FILES READDIR_MIN_S   create FILES files in two directories (the second
                                        gets min(10000, 3/4·FILES), the first the rest), statx
                                        each one, list the second directory repeatedly for
                                        READDIR_MIN_S, unlink everything; prints one JSON object
  meta.py csu DIR FILES                  the same without the readdir phase (create, stat, unlink)
  meta.py probe DIR [BIG]               smoke test of a fresh mount: small and O_DIRECT I/O,
                                        readdir, stat, rename, unlink; reads BIG (if given)
                                        with O_DIRECT in 128 KiB pieces; prints "ok"

Every phase checks its own result (file counts, contents) and exits non-zero with a message on
the first mismatch, so a filesystem that answers wrongly cannot produce a number.

stat uses statx(AT_STATX_FORCE_SYNC): FUSE then asks the daemon (GETATTR) even while the
kernel's attribute cache is valid, so the phase measures a round trip per file rather than the
kernel's cache (the mount's default 1 s TTL would otherwise serve most of them).
"""
import ctypes
import json
import mmap
import os
import sys
import time

AT_STATX_FORCE_SYNC = 0x2000
READDIR_ENTRIES = 10000
STATX_BASIC_STATS = 0x7FF

_libc = ctypes.CDLL(None, use_errno=True)
_statx = getattr(_libc, "statx", None)
if _statx is not None:
    _statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    _statx.restype = ctypes.c_int


def die(msg):
    sys.stderr.write(f"meta.py: {msg}\n")
    sys.exit(1)


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def meta(root, files, readdir_min_s, with_readdir=True):
    # directory b (the one listed) gets min(10000, 3/4 of the files) entries, directory a the rest
    nb = min(READDIR_ENTRIES, files - files // 4)
    counts = [files - nb, nb]
    dirs = [os.path.join(root, "meta-a"), os.path.join(root, "meta-b")]
    for d in dirs:
        os.mkdir(d)
    dfds = [os.open(d, os.O_RDONLY | os.O_DIRECTORY) for d in dirs]
    names = [[f"f{i:06d}".encode() for i in range(c)] for c in counts]
    out = {"files": files, "readdirEntries": nb, "statMode": "statx(AT_STATX_FORCE_SYNC)" if _statx else "os.stat"}

    def create():
        flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
        for dfd, ns in zip(dfds, names):
            for n in ns:
                os.close(os.open(n, flags, 0o644, dir_fd=dfd))

    out["create"] = {"ops": files, "s": timed(create)}
    for d, c in zip(dirs, counts):
        got = len(os.listdir(d))
        if got != c:
            die(f"after create, {d} lists {got} entries, expected {c}")

    buf = ctypes.create_string_buffer(256)

    def stat_all():
        for dfd, ns in zip(dfds, names):
            for n in ns:
                if _statx is not None:
                    if _statx(dfd, n, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, buf) != 0:
                        e = ctypes.get_errno()
                        die(f"statx {n.decode()}: {os.strerror(e)}")
                else:
                    os.stat(n, dir_fd=dfd)

    out["stat"] = {"ops": files, "s": timed(stat_all)}

    # readdir: list directory b until READDIR_MIN_S has passed (at least 2 passes); every pass
    # must see every entry.
    if with_readdir:
        passes, t0 = 0, time.perf_counter()
        while True:
            got = len(os.listdir(dirs[1]))
            if got != nb:
                die(f"readdir pass {passes + 1}: {got} entries, expected {nb}")
            passes += 1
            el = time.perf_counter() - t0
            if passes >= 2 and el >= readdir_min_s:
                break
        out["readdir"] = {"ops": passes * nb, "passes": passes, "entries": nb, "s": el}

    def unlink_all():
        for dfd, ns in zip(dfds, names):
            for n in ns:
                os.unlink(n, dir_fd=dfd)

    out["unlink"] = {"ops": files, "s": timed(unlink_all)}
    for dfd in dfds:
        os.close(dfd)
    for d in dirs:
        left = os.listdir(d)
        if left:
            die(f"after unlink, {d} still lists {len(left)} entries")
        os.rmdir(d)
    print(json.dumps(out))


def probe(root, big):
    p = os.path.join(root, "probe.txt")
    data = b"fuse-uring bench probe\n" * 100
    with open(p, "wb") as f:
        f.write(data)
    with open(p, "rb") as f:
        if f.read() != data:
            die("read back differs from what was written")
    if os.stat(p).st_size != len(data):
        die("stat size differs from what was written")
    # O_DIRECT write and read of 1 MiB (page-aligned buffer from mmap)
    q = os.path.join(root, "probe.bin")
    pattern = bytes(range(256)) * 4096
    wbuf = mmap.mmap(-1, len(pattern))
    wbuf.write(pattern)
    fd = os.open(q, os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_DIRECT, 0o644)
    try:
        if os.writev(fd, [wbuf]) != len(pattern):
            die("short O_DIRECT write")
    finally:
        os.close(fd)
    rbuf = mmap.mmap(-1, len(pattern))
    fd = os.open(q, os.O_RDONLY | os.O_DIRECT)
    try:
        if os.readv(fd, [rbuf]) != len(pattern):
            die("short O_DIRECT read")
    finally:
        os.close(fd)
    if rbuf[:] != pattern:
        die("O_DIRECT read back differs from what was written")
    names = set(os.listdir(root))
    if not {"probe.txt", "probe.bin"} <= names:
        die(f"readdir misses probe files (got {sorted(names)[:10]})")
    d = os.path.join(root, "probe.dir")
    os.mkdir(d)
    os.rename(p, os.path.join(d, "moved.txt"))
    if os.listdir(d) != ["moved.txt"]:
        die("rename into a directory not visible in readdir")
    os.unlink(os.path.join(d, "moved.txt"))
    os.rmdir(d)
    os.unlink(q)
    if big:
        chunk = 128 << 10
        b = mmap.mmap(-1, chunk)
        fd = os.open(os.path.join(root, big), os.O_RDONLY | os.O_DIRECT)
        total = 0
        try:
            while True:
                n = os.readv(fd, [b])
                if n <= 0:
                    break
                total += n
        finally:
            os.close(fd)
        if total == 0:
            die(f"{big} read 0 bytes")
    print("ok")


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "meta":
        meta(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "csu":
        meta(sys.argv[2], int(sys.argv[3]), 0, with_readdir=False)
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "probe":
        probe(sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)
    else:
        die("usage: meta.py meta DIR FILES READDIR_MIN_S | meta.py csu DIR FILES | meta.py probe DIR [BIG]")


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        die(f"{e.strerror or e} ({e.filename or ''})")
