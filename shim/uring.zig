//! Zig view of shim/uring_wrappers.c (liburing behind non-inline functions, see that file for
//! why). `Ring` and `Sqe` are opaque; `Cqe` is the kernel's 16-byte CQE (no CQE32).

const std = @import("std");

pub const Ring = opaque {};
pub const Sqe = opaque {};

pub const Cqe = extern struct {
    user_data: u64,
    res: i32,
    flags: u32,
};

comptime {
    std.debug.assert(@sizeOf(Cqe) == 16);
}

/// Setup flags (docs/KERNEL.md §4; values from liburing).
pub const setup_sqe128: u32 = 1 << 10;
pub const setup_single_issuer: u32 = 1 << 12;
pub const setup_defer_taskrun: u32 = 1 << 13;

/// FUSE uring cmd_op values (docs/KERNEL.md §4).
pub const fuse_cmd_register: u32 = 1;
pub const fuse_cmd_commit_and_fetch: u32 = 2;

/// Kernel limit on SQ entries (IORING_MAX_ENTRIES).
pub const max_sq_entries: u32 = 32768;

pub extern fn fuw_ring_size() c_uint;
pub extern fn fuw_ring_align() c_uint;
pub extern fn fuw_init(ring: *Ring, sq_entries: c_uint, cq_entries: c_uint, flags: c_uint) c_int;
pub extern fn fuw_exit(ring: *Ring) void;
pub extern fn fuw_register_buffers(ring: *Ring, iov: [*]const std.posix.iovec, n: c_uint) c_int;
pub extern fn fuw_get_sqe(ring: *Ring) ?*Sqe;
pub extern fn fuw_submit(ring: *Ring) c_int;
pub extern fn fuw_submit_and_wait(ring: *Ring, wait_nr: c_uint) c_int;
pub extern fn fuw_submit_and_get_events(ring: *Ring) c_int;
pub extern fn fuw_peek_batch(ring: *Ring, cqes: [*]*Cqe, max: c_uint) c_uint;
pub extern fn fuw_cq_advance(ring: *Ring, n: c_uint) void;
pub extern fn fuw_register_fuse_fd(ring: *Ring, fd: c_int) c_int;
pub extern fn fuw_prep_fuse_cmd(sqe: *Sqe, fd: c_int, fixed: c_int, cmd_op: u32, addr: u64, len: u32, commit_id: u64, qid: u16, user_data: u64) void;
pub extern fn fuw_prep_read(sqe: *Sqe, fd: c_int, buf: *anyopaque, len: c_uint, off: u64, user_data: u64) void;
pub extern fn fuw_prep_rw(sqe: *Sqe, write: c_int, fixed: c_int, fd: c_int, buf: ?*anyopaque, len: c_uint, off: u64, buf_index: c_uint, user_data: u64) void;
pub extern fn fuw_prep_cancel_all(sqe: *Sqe, user_data: u64) void;
pub extern fn fuw_submit_and_wait_ms(ring: *Ring, ms: c_uint) c_int;
pub extern fn fuw_register_eventfd(ring: *Ring, fd: c_int) c_int;
pub extern fn fuw_eventfd_enable(ring: *Ring, enabled: c_int) c_int;
pub extern fn fuw_prep_fsync(sqe: *Sqe, fd: c_int, datasync: c_int, user_data: u64) void;
pub const Timespec = extern struct { sec: i64, nsec: i64 };
pub extern fn fuw_prep_timeout(sqe: *Sqe, ts: *const Timespec, user_data: u64) void;
pub extern fn fuw_sq_ready(ring: *Ring) c_uint;

/// FUSE 7.46 (Linux 7.3): fs/fuse/dev_uring.c, include/uapi/linux/fuse.h.
pub const fuse_cmd_add_queue: u32 = 3;
pub const fuse_cmd_add_bufpool: u32 = 4;
/// cmd_req.flags of ADD_QUEUE (CAP_SYS_ADMIN, and only with a bufpool).
pub const fuse_uring_zero_copy: u64 = 1 << 0;
/// ring_ent_in_out.flags: the request's pages are registered at the entry's zero-copy index.
pub const fuse_uring_ent_zero_copy: u64 = 1 << 0;
pub extern fn fuw_fuse_cmd_746(sqe: *Sqe, flags: u64, union_lo: u64, union_len: u32, fixed_pool: c_int, buf_index: u16) void;
pub extern fn fuw_register_buffers_sparse(ring: *Ring, nr: c_uint) c_int;
pub extern fn fuw_update_buffers(ring: *Ring, off: c_uint, iov: [*]const std.posix.iovec, n: c_uint) c_int;
pub extern fn fuw_unregister_buffers(ring: *Ring) c_int;
pub extern fn fuw_wait_cqe(ring: *Ring, cqe: **Cqe) c_int;

// The SQEs the shim sends for FUSE 7.46, byte for byte against include/uapi/linux/fuse.h of
// Linux 7.3 (struct fuse_uring_cmd_req at sqe+48: flags @0, commit_id @8, qid @16, padding[6]
// @18, union @24 { bufpool { uaddr @24, len @32, reserved @36 }, ent_zero_copy_buf_index @24 },
// 40 B; checked with offsetof against that header) and include/uapi/linux/io_uring.h
// (opcode @0, flags @1, fd @4, cmd_op @8, addr @16, len @24, uring_cmd_flags @28, user_data
// @32, buf_index @40; IORING_URING_CMD_FIXED = 1).
test "ADD_BUFPOOL SQE: registered pool (CMD_FIXED + buf_index), uaddr/len in the 7.46 union" {
    var sqe: [128]u8 align(8) = @splat(0xee);
    const s: *Sqe = @ptrCast(&sqe);
    fuw_prep_fuse_cmd(s, 0, 1, fuse_cmd_add_bufpool, 0, 0, 0, 5, 0x3_0000_0005);
    fuw_fuse_cmd_746(s, 0, 0x7f12_3456_7000, 4 << 20, 1, 5);
    const rd = std.mem.readInt;
    try std.testing.expectEqual(@as(u8, 46), sqe[0]); // IORING_OP_URING_CMD
    try std.testing.expectEqual(@as(u8, 1), sqe[1]); // IOSQE_FIXED_FILE
    try std.testing.expectEqual(@as(i32, 0), rd(i32, sqe[4..8], .little));
    try std.testing.expectEqual(@as(u32, 4), rd(u32, sqe[8..12], .little)); // FUSE_IO_URING_CMD_ADD_BUFPOOL
    try std.testing.expectEqual(@as(u32, 1), rd(u32, sqe[28..32], .little)); // IORING_URING_CMD_FIXED
    try std.testing.expectEqual(@as(u64, 0x3_0000_0005), rd(u64, sqe[32..40], .little));
    try std.testing.expectEqual(@as(u16, 5), rd(u16, sqe[40..42], .little)); // buf_index = the pool's
    const cmd = sqe[48..];
    try std.testing.expectEqual(@as(u64, 0), rd(u64, cmd[0..8], .little)); // flags (must be 0)
    try std.testing.expectEqual(@as(u64, 0), rd(u64, cmd[8..16], .little)); // commit_id
    try std.testing.expectEqual(@as(u16, 5), rd(u16, cmd[16..18], .little)); // qid
    try std.testing.expectEqualSlices(u8, &[_]u8{0} ** 6, cmd[18..24]); // padding
    try std.testing.expectEqual(@as(u64, 0x7f12_3456_7000), rd(u64, cmd[24..32], .little)); // bufpool.uaddr
    try std.testing.expectEqual(@as(u32, 4 << 20), rd(u32, cmd[32..36], .little)); // bufpool.len
    try std.testing.expectEqual(@as(u32, 0), rd(u32, cmd[36..40], .little)); // bufpool.reserved
    try std.testing.expectEqualSlices(u8, &[_]u8{0} ** 40, cmd[40..80]);
}

test "ADD_QUEUE with FUSE_URING_ZERO_COPY; REGISTER with ent_zero_copy_buf_index on a pool queue" {
    var sqe: [128]u8 align(8) = @splat(0xee);
    const s: *Sqe = @ptrCast(&sqe);
    const rd = std.mem.readInt;
    fuw_prep_fuse_cmd(s, 7, 0, fuse_cmd_add_queue, 0, 0, 0, 1, 9);
    fuw_fuse_cmd_746(s, fuse_uring_zero_copy, 0, 0, 0, 0);
    try std.testing.expectEqual(@as(u8, 0), sqe[1]);
    try std.testing.expectEqual(@as(i32, 7), rd(i32, sqe[4..8], .little));
    try std.testing.expectEqual(@as(u32, 3), rd(u32, sqe[8..12], .little));
    try std.testing.expectEqual(@as(u32, 0), rd(u32, sqe[28..32], .little)); // no CMD_FIXED
    try std.testing.expectEqual(@as(u16, 0), rd(u16, sqe[40..42], .little));
    try std.testing.expectEqual(@as(u64, 1), rd(u64, sqe[48..56], .little)); // FUSE_URING_ZERO_COPY
    try std.testing.expectEqual(@as(u16, 1), rd(u16, sqe[64..66], .little));
    try std.testing.expectEqualSlices(u8, &[_]u8{0} ** 62, sqe[66..128]);

    var iov: [2]extern struct { base: ?*anyopaque, len: usize } = .{ .{ .base = &sqe, .len = 288 }, .{ .base = null, .len = 0 } };
    fuw_prep_fuse_cmd(s, 0, 1, fuse_cmd_register, @intFromPtr(&iov), 2, 0, 1, 42);
    fuw_fuse_cmd_746(s, 0, 2 + 17, 0, 1, 1); // zero-copy slot nr_queues + entry = 19; pool index 1
    try std.testing.expectEqual(@as(u32, 1), rd(u32, sqe[8..12], .little));
    try std.testing.expectEqual(@as(u64, @intFromPtr(&iov)), rd(u64, sqe[16..24], .little));
    try std.testing.expectEqual(@as(u32, 2), rd(u32, sqe[24..28], .little)); // iovec count
    try std.testing.expectEqual(@as(u32, 1), rd(u32, sqe[28..32], .little));
    try std.testing.expectEqual(@as(u16, 1), rd(u16, sqe[40..42], .little));
    try std.testing.expectEqual(@as(u16, 19), rd(u16, sqe[72..74], .little)); // ent_zero_copy_buf_index @24
    try std.testing.expectEqual(@as(u64, 19), rd(u64, sqe[72..80], .little)); // rest of the union zero
}
