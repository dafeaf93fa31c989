//! The C ABI of libfuse_uring_shim.so (contract: shim/ABI.md). Only exports live here; each
//! forwards to the file that owns the job. Results: >= 0 success, < 0 = -errno.
//! Every function except the doorbell is called from the JS thread only.

const std = @import("std");
const dev = @import("dev.zig");
const classic = @import("classic.zig");
const ring = @import("ring.zig");
const queue = @import("queue.zig");
const bell = @import("bell.zig");
const dataplane = @import("dataplane.zig");
const sys = @import("sys.zig");
const uring = @import("uring.zig");

const Classic = classic.Classic;
const Ring = ring.Ring;
const Completion = queue.Completion;

/// Bumped on any incompatible ABI change so TypeScript can refuse a stale library.
export fn fu_abi_version() u32 {
    return 9;
}

/// -errno of the last failed `fu_classic_create` (JS thread only, so no atomics needed).
var last_error: i32 = 0;

export fn fu_last_error() i32 {
    return last_error;
}

// ---- device and mount helpers ---------------------------------------------------------------

export fn fu_dev_open() i32 {
    return dev.devOpen();
}

export fn fu_close(fd: i32) i32 {
    return dev.close(fd);
}

export fn fu_mount(source: [*:0]const u8, target: [*:0]const u8, fstype: [*:0]const u8, flags: u32, data: [*:0]const u8) i32 {
    return dev.mount(source, target, fstype, flags, data);
}

export fn fu_umount(target: [*:0]const u8, flags: i32) i32 {
    return dev.umount(target, flags);
}

export fn fu_write(fd: i32, buf: [*]const u8, len: u32) i64 {
    return dev.write(fd, buf, len);
}

export fn fu_backing_open(fuse_fd: i32, fd: i32) i32 {
    return dev.backingOpen(fuse_fd, fd);
}

export fn fu_backing_close(fuse_fd: i32, id: i32) i32 {
    return dev.backingClose(fuse_fd, id);
}

export fn fu_recv_fd(sock: i32) i32 {
    return dev.recvFd(sock);
}

export fn fu_socketpair(out: *[2]i32) i32 {
    return dev.socketpair(out);
}

export fn fu_errno_name(e: i32) [*:0]const u8 {
    return dev.errnoName(e);
}

// ---- classic transport ----------------------------------------------------------------------

export fn fu_classic_create(fd: i32, nslots: u32, payload_size: u32, doorbell: bell.Fn) ?*Classic {
    var err: i32 = 0;
    const c = Classic.create(fd, nslots, payload_size, doorbell, &err);
    last_error = if (c == null) err else 0;
    return c;
}

export fn fu_classic_set_op_sizes(c: *Classic, table: *const [64]u8) i32 {
    return c.setOpSizes(table);
}

export fn fu_classic_start(c: *Classic) i32 {
    return c.start();
}

export fn fu_classic_reply(c: *Classic, slot: u32, payload_len: u32) i64 {
    return c.reply(slot, payload_len);
}

export fn fu_classic_release(c: *Classic, slot: u32) i32 {
    return c.release(slot);
}

export fn fu_classic_header(c: *Classic, slot: u32) ?[*]u8 {
    return c.header(slot);
}

export fn fu_classic_payload(c: *Classic, slot: u32) ?[*]u8 {
    return c.payload(slot);
}

export fn fu_classic_pop(c: *Classic, out: [*]Completion, max: u32) u32 {
    return c.pop(out, max);
}

export fn fu_classic_stop(c: *Classic) void {
    c.stop();
}

export fn fu_classic_destroy(c: *Classic) void {
    c.destroy();
}

export fn fu_classic_stats(c: *Classic) *classic.Stats {
    return &c.stats;
}

// ---- io_uring engine (owned by the calling JS thread) --------------------------------------

export fn fu_ring_create(fd: i32, qids: [*]const u16, nq: u32, nr_queues_total: u32, depth: u32, pinned_depth: u32, payload_size: u32, setup_flags: u32, doorbell: bell.Fn, dp: ?*dataplane.DataPlane, err_out: *i32) ?*Ring {
    err_out.* = 0;
    if (nq == 0 or nq > 4096) {
        err_out.* = -22;
        return null;
    }
    return Ring.create(fd, qids[0..nq], nr_queues_total, depth, pinned_depth, payload_size, setup_flags, doorbell, dp, .{}, err_out);
}

/// fu_ring_create with FUSE 7.46 buffer pools: `pool_len` bytes per queue at `pool_addr` (memory
/// the caller keeps alive until fu_ring_destroy; page aligned), pool_flags bit 0 = zero-copy,
/// bit 1 = test fault (pool refused). ADD_QUEUE/ADD_BUFPOOL are sent by fu_ring_start.
export fn fu_ring_create_pooled(fd: i32, qids: [*]const u16, nq: u32, nr_queues_total: u32, depth: u32, pinned_depth: u32, payload_size: u32, setup_flags: u32, doorbell: bell.Fn, dp: ?*dataplane.DataPlane, pool_addr: usize, pool_len: u32, pool_flags: u32, err_out: *i32) ?*Ring {
    err_out.* = 0;
    if (nq == 0 or nq > 4096 or pool_len == 0 or pool_flags & ~(ring.pool_flag_zero_copy | ring.pool_flag_refuse) != 0) {
        err_out.* = -22;
        return null;
    }
    const zc = pool_flags & ring.pool_flag_zero_copy != 0;
    const refuse = pool_flags & ring.pool_flag_refuse != 0;
    return Ring.create(fd, qids[0..nq], nr_queues_total, depth, pinned_depth, payload_size, setup_flags, doorbell, dp, .{ .base = pool_addr, .len = pool_len, .zero_copy = zc and !refuse, .refuse = refuse }, err_out);
}

export fn fu_ring_start(r: *Ring) i32 {
    return r.start();
}

export fn fu_ring_enter(r: *Ring, out: [*]Completion, max: u32, wait_us: u32) u32 {
    return r.enter(out, max, wait_us);
}

export fn fu_ring_set_idle(r: *Ring, idle: u32) i32 {
    return r.setIdle(idle != 0);
}

export fn fu_ring_set_native_sync(r: *Ring, bytes: u32) void {
    r.setNativeSyncMax(bytes);
}

export fn fu_ring_set_direct_sync(r: *Ring, on: u32) void {
    r.setDirectSync(on != 0);
}

export fn fu_ring_commit(r: *Ring, idx: u32) i32 {
    return r.commit(idx);
}

export fn fu_ring_io(r: *Ring, kind: u32, idx: u32, fd: i32, off: u64, len: u32) i32 {
    return r.io(kind, idx, fd, off, len);
}

export fn fu_ring_header(r: *Ring, idx: u32) ?[*]u8 {
    return r.header(idx);
}

export fn fu_ring_payload(r: *Ring, idx: u32) ?[*]u8 {
    return r.payload(idx);
}

export fn fu_ring_destroy(r: *Ring) void {
    r.destroy();
}

export fn fu_ring_stats(r: *Ring) *ring.Stats {
    return &r.stats;
}

/// The ring's list of natively released slots (ring.Released, 4 KiB). From this call on the
/// ring answers RELEASE of mode_release handles itself; the caller (its owner thread) must
/// collect the list after every fu_ring_enter.
export fn fu_ring_released(r: *Ring) *ring.Released {
    r.released.enabled = 1;
    return &r.released;
}

// ---- native data plane table ----------------------------------------------------------------

export fn fu_dataplane_create(capacity: u32, err_out: *i32) ?*dataplane.DataPlane {
    err_out.* = 0;
    return dataplane.DataPlane.create(capacity, err_out);
}

export fn fu_dataplane_set(dp: *dataplane.DataPlane, slot: u32, fd: i32, mode: u32) i32 {
    return dp.set(slot, fd, mode);
}

/// LOOKUPs of names missing from the node table's directories answered by the shim from now on
/// (ring transport): a negative entry with TTL ttl_sec + ttl_nsec, ENOENT when both are 0.
/// -ENOENT without a node table, -EEXIST the second time.
export fn fu_dataplane_enable_missing(dp: *dataplane.DataPlane, ttl_sec: u64, ttl_nsec: u32) i32 {
    const t = dp.nodeTable() orelse return sys.neg(.NOENT);
    return t.enableMissing(ttl_sec, ttl_nsec);
}

/// GETATTR answered from a node table of 2^log2 entries from now on (attr TTL ttl_sec + ttl_nsec).
export fn fu_dataplane_enable_nodes(dp: *dataplane.DataPlane, log2: u32, ttl_sec: u64, ttl_nsec: u32) i32 {
    if (log2 == 0 or log2 > dataplane.NodeTable.max_log2) return sys.neg(.INVAL);
    return dp.enableNodes(@intCast(log2), ttl_sec, ttl_nsec);
}

/// Node `nodeid`'s GETATTR is answered from `fd` (0, -EBUSY: its entry holds another node, or
/// -ENOENT: no node table).
export fn fu_dataplane_node_set(dp: *dataplane.DataPlane, nodeid: u64, fd: i32) i32 {
    const t = dp.nodeTable() orelse return sys.neg(.NOENT);
    if (fd < 0 or nodeid == 0) return sys.neg(.INVAL);
    return t.set(nodeid, fd);
}

/// Before closing node `nodeid`'s descriptor: with `wait`, returns once no thread uses it any
/// more; without, only stops new uses (fu_dataplane_node_drain waits, outside the caller's locks).
export fn fu_dataplane_node_clear(dp: *dataplane.DataPlane, nodeid: u64, wait: u32) void {
    const t = dp.nodeTable() orelse return;
    if (wait != 0) t.clear(nodeid) else t.detach(nodeid);
}

/// After fu_dataplane_node_clear(…, 0): returns once no thread uses the descriptor it had.
export fn fu_dataplane_node_drain(dp: *dataplane.DataPlane, nodeid: u64) void {
    if (dp.nodeTable()) |t| t.drain(nodeid);
}

export fn fu_dataplane_destroy(dp: *dataplane.DataPlane) void {
    dp.destroy();
}

export fn fu_classic_set_dataplane(c: *Classic, dp: ?*dataplane.DataPlane) i32 {
    return c.setDataPlane(dp);
}

test {
    _ = queue;
    _ = classic;
    _ = dataplane;
    _ = uring;
}
