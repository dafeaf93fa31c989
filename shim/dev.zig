//! /dev/fuse device, mount(2), ioctls and fd passing. Stateless wrappers: each returns the
//! syscall's result or -errno unchanged (the caller — TypeScript — decides what an errno means
//! for the user), retrying only EINTR, which never means anything to the caller.

const std = @import("std");
const linux = std.os.linux;
const assert = std.debug.assert;
const sys = @import("sys.zig");

/// FUSE_DEV_IOC_BACKING_OPEN = _IOW(229, 1, struct fuse_backing_map) (docs/KERNEL.md §1).
/// SCM_RIGHTS (std.os.linux.SCM lacks it in Zig 0.15).
const scm_rights: i32 = 1;

const ioc_backing_open: u32 = 0x4010E501;
/// FUSE_DEV_IOC_BACKING_CLOSE = _IOW(229, 2, uint32_t).
const ioc_backing_close: u32 = 0x4004E502;

/// struct fuse_backing_map (16 B).
const BackingMap = extern struct {
    fd: i32,
    flags: u32,
    padding: u64,
};

comptime {
    assert(@sizeOf(BackingMap) == 16);
}

pub fn devOpen() i32 {
    const rc = linux.open("/dev/fuse", .{ .ACCMODE = .RDWR, .CLOEXEC = true }, 0);
    return @intCast(sys.result(rc));
}

pub fn close(fd: i32) i32 {
    if (fd < 0) return sys.neg(.BADF);
    const rc = linux.close(fd);
    return switch (sys.errnoOf(rc)) {
        .SUCCESS => 0,
        // Linux releases the fd before reporting EINTR; retrying would close someone else's fd.
        .INTR => 0,
        else => |e| sys.neg(e),
    };
}

pub fn mount(source: [*:0]const u8, target: [*:0]const u8, fstype: [*:0]const u8, flags: u32, data: [*:0]const u8) i32 {
    const rc = linux.mount(source, target, fstype, flags, @intFromPtr(data));
    return @intCast(sys.result(rc));
}

pub fn umount(target: [*:0]const u8, flags: i32) i32 {
    const rc = linux.umount2(target, @bitCast(flags));
    return @intCast(sys.result(rc));
}

pub fn write(fd: i32, buf: [*]const u8, len: u32) i64 {
    while (true) {
        const rc = linux.write(fd, buf, len);
        switch (sys.errnoOf(rc)) {
            .INTR => continue,
            else => return sys.result(rc),
        }
    }
}

pub fn backingOpen(fuse_fd: i32, fd: i32) i32 {
    var map: BackingMap = .{ .fd = fd, .flags = 0, .padding = 0 };
    const rc = linux.ioctl(fuse_fd, ioc_backing_open, @intFromPtr(&map));
    return @intCast(sys.result(rc));
}

pub fn backingClose(fuse_fd: i32, id: i32) i32 {
    var backing_id: u32 = @bitCast(id);
    const rc = linux.ioctl(fuse_fd, ioc_backing_close, @intFromPtr(&backing_id));
    return @intCast(sys.result(rc));
}

/// Receives one fd sent with SCM_RIGHTS (fusermount3's `_FUSE_COMMFD` protocol: one data byte
/// plus the /dev/fuse fd). -ECONNRESET: the peer closed without sending (fusermount3 failed;
/// its stderr says why). -EPROTO: a message without an fd.
pub fn recvFd(sock: i32) i32 {
    var byte: [1]u8 = undefined;
    var iov = [1]std.posix.iovec{.{ .base = &byte, .len = 1 }};
    // CMSG_SPACE(sizeof(int)) = 16-byte cmsghdr + 4-byte fd padded to 8.
    var control: [24]u8 align(8) = @splat(0);
    var msg: linux.msghdr = .{
        .name = null,
        .namelen = 0,
        .iov = &iov,
        .iovlen = 1,
        .control = &control,
        .controllen = control.len,
        .flags = 0,
    };
    const rc = while (true) {
        const rc = linux.recvmsg(sock, &msg, linux.MSG.CMSG_CLOEXEC);
        switch (sys.errnoOf(rc)) {
            .SUCCESS => break rc,
            .INTR => continue,
            else => |e| return sys.neg(e),
        }
    };
    if (rc == 0) return sys.neg(.CONNRESET);
    const cmsg_len = std.mem.readInt(u64, control[0..8], .little);
    const level = std.mem.readInt(i32, control[8..12], .little);
    const kind = std.mem.readInt(i32, control[12..16], .little);
    if (msg.controllen < 20 or cmsg_len < 20 or level != linux.SOL.SOCKET or kind != scm_rights) {
        return sys.neg(.PROTO);
    }
    const fd = std.mem.readInt(i32, control[16..20], .little);
    assert(fd >= 0);
    return fd;
}

/// socketpair for fusermount3: out[0] stays with us (CLOEXEC), out[1] is inherited by the
/// helper, so it must not be CLOEXEC.
pub fn socketpair(out: *[2]i32) i32 {
    const rc = linux.socketpair(linux.AF.UNIX, linux.SOCK.STREAM, 0, out);
    switch (sys.errnoOf(rc)) {
        .SUCCESS => {},
        else => |e| return sys.neg(e),
    }
    const rc2 = linux.fcntl(out[0], linux.F.SETFD, linux.FD_CLOEXEC);
    switch (sys.errnoOf(rc2)) {
        .SUCCESS => return 0,
        else => |e| {
            sys.closeFd(out[0]);
            sys.closeFd(out[1]);
            out.* = .{ -1, -1 };
            return sys.neg(e);
        },
    }
}

/// "ENOENT" for 2 or -2; "E?" for numbers Linux does not define.
pub fn errnoName(e: i32) [*:0]const u8 {
    const n: u32 = @abs(e);
    if (n < errno_names.len) return errno_names[n];
    return "E?";
}

const errno_names = blk: {
    const fields = @typeInfo(linux.E).@"enum".fields;
    var max: usize = 0;
    for (fields) |f| max = @max(max, f.value);
    var names: [max + 1][*:0]const u8 = @splat("E?");
    // Iterate in reverse so that for aliases (EAGAIN/EWOULDBLOCK…) the first-declared name wins.
    var i = fields.len;
    while (i > 0) {
        i -= 1;
        const f = fields[i];
        names[f.value] = if (f.value == 0) "OK" else "E" ++ f.name;
    }
    break :blk names;
};
