//! Thin helpers over raw Linux syscalls shared by the transports: errno conversion, anonymous
//! mappings, eventfds, thread set-up. Raw syscalls (std.os.linux) return `-errno` in the result
//! word, which is exactly the ABI's "negative = -errno" convention, so results pass through.

const std = @import("std");
const linux = std.os.linux;
const assert = std.debug.assert;

pub const E = linux.E;

/// Raw syscall result as a signed value: >= 0 success, < 0 = -errno.
pub fn result(rc: usize) i64 {
    return @as(isize, @bitCast(rc));
}

/// errno of a raw syscall result, .SUCCESS when it succeeded.
pub fn errnoOf(rc: usize) E {
    return linux.E.init(rc);
}

/// errno of a negative result (-errno), e.g. a CQE res or a liburing return value.
pub fn errnoOfNeg(res: i32) E {
    assert(res < 0 and res > -4096);
    return @enumFromInt(@as(u16, @intCast(-res)));
}

pub fn neg(e: E) i32 {
    assert(e != .SUCCESS);
    return -@as(i32, @intFromEnum(e));
}

/// Anonymous private read/write mapping. `populate` pre-faults every page (MAP_POPULATE) so the
/// kernel never takes a page fault while copying a request in and the memory is resident before
/// io_uring pins it. Returns null and sets `err` (-errno) on failure.
pub fn mapAnon(len: usize, populate: bool, err: *i32) ?[]align(std.heap.page_size_min) u8 {
    assert(len > 0);
    assert(len % std.heap.page_size_min == 0);
    const rc = linux.mmap(null, len, linux.PROT.READ | linux.PROT.WRITE, .{
        .TYPE = .PRIVATE,
        .ANONYMOUS = true,
        .POPULATE = populate,
    }, -1, 0);
    switch (errnoOf(rc)) {
        .SUCCESS => {},
        // ENOMEM (no memory / map count), EAGAIN (locked memory), EINVAL (len overflow): all
        // mean "cannot have this much memory"; the caller reports the errno unchanged.
        else => |e| {
            err.* = neg(e);
            return null;
        },
    }
    const ptr: [*]align(std.heap.page_size_min) u8 = @ptrFromInt(rc);
    return ptr[0..len];
}

pub fn unmap(mem: []align(std.heap.page_size_min) u8) void {
    const rc = linux.munmap(mem.ptr, mem.len);
    // munmap of a mapping we created can only fail on a programming error (bad range).
    assert(errnoOf(rc) == .SUCCESS);
}

pub fn roundUp(n: usize, to: usize) usize {
    assert(std.math.isPowerOfTwo(to));
    return (n + to - 1) & ~(to - 1);
}

/// eventfd for waking a native thread. `nonblock` for fds read with read(2) after poll(2);
/// blocking for fds read through io_uring (io_uring returns -EAGAIN for a non-blocking file
/// instead of arming a poll).
pub fn eventfdOpen(nonblock: bool) i32 {
    const flags: u32 = if (nonblock) linux.EFD.CLOEXEC | linux.EFD.NONBLOCK else linux.EFD.CLOEXEC;
    const rc = linux.eventfd(0, flags);
    return @intCast(result(rc));
}

/// Adds 1 to the eventfd counter. Cannot block (counter never gets near 2^64-2) and the fd is
/// ours, so every error is a programming error.
pub fn eventfdSignal(fd: i32) void {
    assert(fd >= 0);
    const one: u64 = 1;
    while (true) {
        const rc = linux.write(fd, std.mem.asBytes(&one), 8);
        switch (errnoOf(rc)) {
            .SUCCESS => return assert(rc == 8),
            .INTR => continue,
            else => |e| std.debug.panic("eventfd write failed: {s}", .{@tagName(e)}),
        }
    }
}

/// Resets a non-blocking eventfd counter to zero.
pub fn eventfdDrain(fd: i32) void {
    var value: u64 = 0;
    while (true) {
        const rc = linux.read(fd, std.mem.asBytes(&value), 8);
        switch (errnoOf(rc)) {
            .SUCCESS => return assert(rc == 8),
            .INTR => continue,
            .AGAIN => return, // already zero
            else => |e| std.debug.panic("eventfd read failed: {s}", .{@tagName(e)}),
        }
    }
}

pub fn closeFd(fd: i32) void {
    assert(fd >= 0);
    // close(2) always releases the fd on Linux, even when it reports EINTR/EIO; never retry.
    _ = linux.close(fd);
}

/// Native threads block every signal: signals belong to the JS runtime's thread (Bun installs
/// handlers that expect to run there), and a blocked thread never sees EINTR. glibc's
/// pthread_sigmask keeps its internal signals (cancel/setxid) deliverable.
pub fn blockSignals() void {
    const set = std.posix.sigfillset();
    var old: std.c.sigset_t = undefined;
    const rc = std.c.pthread_sigmask(std.c.SIG.BLOCK, &set, &old);
    assert(rc == 0);
}
