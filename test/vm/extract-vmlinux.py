#!/usr/bin/env python3
"""Extract the uncompressed kernel (an ELF `vmlinux`) from a zstd-compressed x86 bzImage.

QEMU boots the ELF directly through its PVH entry note (no bootloader, no decompressor: the
decompressor's first instructions are ones a virtualised host's KVM cannot emulate, see
docs/GUEST.md). The payload is a zstd frame inside the bzImage; the magic 28 b5 2f fd also
occurs by chance before it, so each match is tried until one decompresses to an ELF.

  extract-vmlinux.py VMLINUZ OUT
"""
import subprocess
import sys

MAGIC = b"\x28\xb5\x2f\xfd"


def main() -> int:
    src, out = sys.argv[1], sys.argv[2]
    data = open(src, "rb").read()
    pos = data.find(MAGIC)
    tried = 0
    while pos >= 0:
        tried += 1
        # zstd stops at the end of the frame and complains about the bytes after it (the
        # bzImage's trailer); the frame's output is complete all the same, so judge the output.
        p = subprocess.run(["zstd", "-dc", "-q"], input=data[pos:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if p.stdout[:4] == b"\x7fELF" and len(p.stdout) > 1 << 20:
            with open(out, "wb") as f:
                f.write(p.stdout)
            print(f"vmlinux: zstd frame at offset {pos} (match {tried}), {len(p.stdout)} bytes", file=sys.stderr)
            return 0
        pos = data.find(MAGIC, pos + 1)
    print(f"{src}: no zstd frame that decompresses to an ELF ({tried} magic matches tried)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
