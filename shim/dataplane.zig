//! The native data plane's table: file handles the shim answers READ/WRITE/FSYNC for itself,
//! without waking JavaScript (docs/ARCHITECTURE.md "Native data plane").
//!
//! A native file handle is `fh_tag + slot`: the session hands that number to the kernel in the
//! OPEN/CREATE reply after storing the backing fd in `fds[slot]`. Every transport thread that
//! sees a READ/WRITE/FSYNC whose fh is in [fh_tag, fh_tag + capacity) and whose slot holds an
//! fd serves it from that fd. The kernel only sends I/O on a handle after the OPEN reply and
//! sends RELEASE only after the last I/O on it was answered, so a slot is never cleared while a
//! request on it is being served (the stores are still atomic: several threads read the table).

const std = @import("std");
const assert = std.debug.assert;
const sys = @import("sys.zig");
const layout = @import("layout.zig");

/// 2^47: far above any fh a filesystem hands out by counting, exact as a JS number.
pub const fh_tag: u64 = 1 << 47;
pub const max_capacity: u32 = 1 << 20;

pub const DataPlane = struct {
    fds: []i32,

    pub fn create(capacity: u32, err: *i32) ?*DataPlane {
        if (capacity == 0 or capacity > max_capacity) {
            err.* = sys.neg(.INVAL);
            return null;
        }
        const allocator = std.heap.page_allocator;
        const self = allocator.create(DataPlane) catch {
            err.* = sys.neg(.NOMEM);
            return null;
        };
        const fds = allocator.alloc(i32, capacity) catch {
            allocator.destroy(self);
            err.* = sys.neg(.NOMEM);
            return null;
        };
        @memset(fds, -1);
        self.* = .{ .fds = fds };
        return self;
    }

    pub fn destroy(self: *DataPlane) void {
        const allocator = std.heap.page_allocator;
        allocator.free(self.fds);
        allocator.destroy(self);
    }

    /// fd < 0 clears the slot. The fd stays owned by the caller (the session closes it).
    pub fn set(self: *DataPlane, slot: u32, fd: i32) i32 {
        if (slot >= self.fds.len) return sys.neg(.INVAL);
        @atomicStore(i32, &self.fds[slot], if (fd < 0) -1 else fd, .release);
        return 0;
    }

    /// The backing fd of a native handle, or null when `fh` is not one (the request goes to JS).
    pub fn lookup(self: *const DataPlane, fh: u64) ?i32 {
        if (fh < fh_tag) return null;
        const slot = fh - fh_tag;
        if (slot >= self.fds.len) return null;
        const fd = @atomicLoad(i32, &self.fds[@intCast(slot)], .acquire);
        return if (fd < 0) null else fd;
    }
};

/// Opcodes the data plane serves (fuse_kernel.h).
pub const op_read: u32 = 15;
pub const op_write: u32 = 16;
pub const op_fsync: u32 = 20;

/// The request's fh if it is one the data plane could serve (READ/WRITE/FSYNC all carry fh as
/// the first u64 of their per-op header).
pub fn servedOp(opcode: u32) bool {
    return opcode == op_read or opcode == op_write or opcode == op_fsync;
}

/// Counters both transports keep for the answers they encode.
pub const Tally = struct {
    errors: u64 = 0,
    read_bytes: u64 = 0,
    write_bytes: u64 = 0,
};

/// Writes the answer to a served READ/WRITE/FSYNC whose backing I/O returned `res` (bytes or
/// -errno): fuse_out_header over the in_header (len, error; unique at offset 8 stays), and for
/// WRITE a fuse_write_out in the payload. Returns the payload bytes of the answer.
pub fn encodeAnswer(hdr: [*]u8, pay: [*]u8, opcode: u32, res: i64, tally: *Tally) u32 {
    var out_len: u32 = 0;
    var err: i32 = 0;
    if (res < 0) {
        // The kernel accepts errors in (-512, 0]; anything else would be refused.
        err = if (res > -512) @intCast(res) else sys.neg(.IO);
        tally.errors += 1;
    } else if (opcode == op_read) {
        out_len = @intCast(res);
        tally.read_bytes += out_len;
    } else if (opcode == op_write) {
        std.mem.writeInt(u32, pay[0..4], @intCast(res), .little);
        std.mem.writeInt(u32, pay[4..8], 0, .little);
        out_len = 8;
        tally.write_bytes += @intCast(res);
    }
    std.mem.writeInt(u32, hdr[0..4], layout.out_header_size + out_len, .little);
    std.mem.writeInt(i32, hdr[4..8], err, .little);
    return out_len;
}

test "encodeAnswer: read bytes, write_out, errors" {
    var hdr: [288]u8 = @splat(0xee);
    var pay: [16]u8 = @splat(0xee);
    var t: Tally = .{};
    try std.testing.expectEqual(@as(u32, 100), encodeAnswer(&hdr, &pay, op_read, 100, &t));
    try std.testing.expectEqual(@as(u32, 116), std.mem.readInt(u32, hdr[0..4], .little));
    try std.testing.expectEqual(@as(i32, 0), std.mem.readInt(i32, hdr[4..8], .little));
    try std.testing.expectEqual(@as(u32, 8), encodeAnswer(&hdr, &pay, op_write, 4096, &t));
    try std.testing.expectEqual(@as(u32, 4096), std.mem.readInt(u32, pay[0..4], .little));
    try std.testing.expectEqual(@as(u32, 0), encodeAnswer(&hdr, &pay, op_write, -28, &t));
    try std.testing.expectEqual(@as(i32, -28), std.mem.readInt(i32, hdr[4..8], .little));
    try std.testing.expectEqual(@as(u32, 16), std.mem.readInt(u32, hdr[0..4], .little));
    try std.testing.expectEqual(Tally{ .errors = 1, .read_bytes = 100, .write_bytes = 4096 }, t);
}

test "lookup only inside the tag window" {
    var err: i32 = 0;
    const dp = DataPlane.create(4, &err).?;
    defer dp.destroy();
    try std.testing.expectEqual(@as(?i32, null), dp.lookup(3));
    try std.testing.expectEqual(@as(?i32, null), dp.lookup(fh_tag + 1));
    try std.testing.expectEqual(@as(i32, 0), dp.set(1, 7));
    try std.testing.expectEqual(@as(?i32, 7), dp.lookup(fh_tag + 1));
    try std.testing.expectEqual(@as(?i32, null), dp.lookup(fh_tag + 4));
    try std.testing.expect(dp.set(4, 1) < 0);
    _ = dp.set(1, -1);
    try std.testing.expectEqual(@as(?i32, null), dp.lookup(fh_tag + 1));
}
