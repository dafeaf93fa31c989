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
