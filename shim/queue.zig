//! Single-producer single-consumer ring of fixed-size records, plus the record types that cross
//! between the JS thread and the native threads.
//!
//! One thread only ever calls `push`, one other thread only ever calls `pop`. The buffer is
//! allocated once by the owner (at `*_create`) and never grows: every user sizes it so that it
//! cannot overflow (the callers keep per-entry ownership state that bounds the number of records
//! in flight), and `push` asserts that.
//!
//! All index accesses are seq_cst: the doorbell/kick protocols pair a queue access with a flag
//! access on the other side (store-buffering pattern), which needs sequential consistency, and
//! Zig 0.15 has no standalone fence. The cost is irrelevant next to a syscall per batch.

const std = @import("std");
const assert = std.debug.assert;

/// Native → JS record (16 bytes, the layout TypeScript decodes).
pub const Completion = extern struct {
    kind: Kind,
    idx: u32,
    res: i64,

    pub const Kind = enum(u32) {
        /// Entry `idx` holds a request.
        request = 0,
        /// A `fu_ring_io` on entry `idx` finished; `res` = bytes or -errno.
        io_done = 1,
        /// The source ended; `res` = -errno that ended it (0 = stopped on request). Sent once.
        stopped = 2,
    };

    comptime {
        assert(@sizeOf(Completion) == 16);
        assert(@offsetOf(Completion, "idx") == 4);
        assert(@offsetOf(Completion, "res") == 8);
    }
};

/// JS → ring thread record: what to put into the next SQE for an entry.
pub const Command = extern struct {
    kind: Kind,
    idx: u32,
    fd: i32,
    len: u32,
    off: u64,

    pub const Kind = enum(u32) {
        commit = 0,
        read = 1,
        write = 2,
    };
};

pub fn Spsc(comptime T: type) type {
    return struct {
        const Self = @This();

        /// Consumer-owned index (next record to pop); own cache line to avoid false sharing.
        head: u32 align(64) = 0,
        /// Producer-owned index (next free cell).
        tail: u32 align(64) = 0,
        buf: []T,
        mask: u32,

        /// `buf.len` must be a power of two (so indices wrap with a mask and `tail -% head`
        /// stays meaningful across u32 overflow).
        pub fn init(buf: []T) Self {
            assert(buf.len > 0);
            assert(std.math.isPowerOfTwo(buf.len));
            assert(buf.len <= std.math.maxInt(u32) / 2);
            return .{ .buf = buf, .mask = @intCast(buf.len - 1) };
        }

        /// Producer side. Overflow is a logic error of the caller (capacity is sized from the
        /// number of entries), so it is an assertion, not an error return.
        pub fn push(self: *Self, value: T) void {
            const tail = @atomicLoad(u32, &self.tail, .monotonic);
            const head = @atomicLoad(u32, &self.head, .seq_cst);
            assert(tail -% head < self.buf.len);
            self.buf[tail & self.mask] = value;
            @atomicStore(u32, &self.tail, tail +% 1, .seq_cst);
        }

        /// Consumer side.
        pub fn pop(self: *Self) ?T {
            const head = @atomicLoad(u32, &self.head, .monotonic);
            const tail = @atomicLoad(u32, &self.tail, .seq_cst);
            if (head == tail) return null;
            assert(tail -% head <= self.buf.len);
            const value = self.buf[head & self.mask];
            @atomicStore(u32, &self.head, head +% 1, .seq_cst);
            return value;
        }

        /// Either side: a snapshot, exact only for the consumer.
        pub fn isEmpty(self: *const Self) bool {
            return @atomicLoad(u32, &self.head, .seq_cst) == @atomicLoad(u32, &self.tail, .seq_cst);
        }
    };
}

/// Smallest power of two >= n (n >= 1).
pub fn capacityFor(n: u32) u32 {
    assert(n >= 1);
    return std.math.ceilPowerOfTwoAssert(u32, n);
}

test "spsc push/pop wraps" {
    var cells: [4]u32 = undefined;
    var q = Spsc(u32).init(&cells);
    var i: u32 = 0;
    while (i < 10) : (i += 1) {
        q.push(i);
        q.push(i + 100);
        try std.testing.expectEqual(@as(?u32, i), q.pop());
        try std.testing.expectEqual(@as(?u32, i + 100), q.pop());
        try std.testing.expectEqual(@as(?u32, null), q.pop());
    }
    try std.testing.expect(q.isEmpty());
}
