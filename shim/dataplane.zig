//! The native data plane's table: file handles the shim answers READ/WRITE/FSYNC for itself,
//! without waking JavaScript (docs/ARCHITECTURE.md "Native data plane").
//!
//! A native file handle is `fh_tag + slot`: the session hands that number to the kernel in the
//! OPEN/CREATE reply after storing the backing fd in `fds[slot]`. Every transport thread that
//! sees a READ/WRITE/FSYNC whose fh is in [fh_tag, fh_tag + capacity) and whose slot holds an
//! fd serves it from that fd. The kernel only sends I/O on a handle after the OPEN reply and
//! sends RELEASE only after the last I/O on it was answered, so a slot is never cleared while a
//! request on it is being served (the stores are still atomic: several threads read the table).
//!
//! A slot is empty, mapped, busy (being released by a transport thread) or released: its
//! RELEASE was answered natively (mode_release) and the descriptor closed, and the slot waits
//! until JS collects it (set(slot, -1) answers 1 once) and finishes its own bookkeeping. The
//! state word is the only arbiter between the thread that releases natively and JS clearing a
//! slot (teardown), so exactly one of them reports the handle as closed.

const std = @import("std");
const linux = std.os.linux;
const assert = std.debug.assert;
const sys = @import("sys.zig");
const layout = @import("layout.zig");

/// 2^47: far above any fh a filesystem hands out by counting, exact as a JS number.
pub const fh_tag: u64 = 1 << 47;
pub const max_capacity: u32 = 1 << 20;

/// What the table holds for a native handle: the descriptor I/O goes to, and for a handle whose
/// I/O bypasses the page cache (O_DIRECT) a buffered descriptor of the same file for the
/// requests the backing filesystem refuses for alignment (EINVAL).
pub const Handle = struct {
    fd: i32,
    /// Buffered descriptor of the same open file description's file, or -1.
    fallback: i32,
    /// `fd` is O_DIRECT: its reads and writes wait for the device, so they go asynchronous.
    direct: bool,
    /// FLUSH of this handle is close(dup(flush_fd)) and the shim does it (mode_flush); -1: the
    /// filesystem's flush handler answers it.
    flush_fd: i32 = -1,
};

/// Slot states (DataPlane.states).
const slot_empty: u32 = 0;
const slot_mapped: u32 = 1;
const slot_busy: u32 = 2;
const slot_released: u32 = 3;

/// fu_dataplane_set(slot, -1) results.
pub const cleared_mapped: i32 = 0;
pub const cleared_released: i32 = 1;
pub const cleared_nothing: i32 = 2;
/// fu_dataplane_set fd: collect a natively released slot, leave any other alone.
pub const collect_only: i32 = -2;

/// fu_dataplane_set mode bits.
pub const mode_direct: u32 = 1;
/// The filesystem's FLUSH of this handle is close(dup(fd)) of the descriptor it gave (what
/// close(2) of the caller's file does to the backing file, as libfuse's passthrough does): the
/// shim answers FLUSH itself, one JS request less per close.
pub const mode_flush: u32 = 2;
/// The filesystem's RELEASE of this handle is close(fd) of the descriptor it gave plus
/// bookkeeping it does later (lib/session: releaseClosed): a ring whose owner collects released
/// slots (fu_ring_released) closes the descriptor and answers RELEASE itself.
pub const mode_release: u32 = 4;

pub const DataPlane = struct {
    fds: []i32,
    /// Per slot: the buffered fallback of a direct handle (or -1), and the descriptor the table
    /// opened itself (closed when the slot is cleared; -1 if none).
    fallbacks: []i32,
    owned: []i32,
    direct: []bool,
    /// Per slot: the descriptor a native FLUSH duplicates and closes (mode_flush), or -1.
    flushes: []i32,
    /// Per slot: the descriptor a native RELEASE closes (mode_release), or -1.
    releases: []i32,
    /// Per slot: slot_empty, slot_mapped, slot_busy or slot_released (atomic).
    states: []u32,
    /// Node descriptors GETATTR is answered from (enableNodes), or null: every GETATTR goes to JS.
    nodes: ?*NodeTable = null,

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
        self.* = .{ .fds = &.{}, .fallbacks = &.{}, .owned = &.{}, .direct = &.{}, .flushes = &.{}, .releases = &.{}, .states = &.{} };
        self.allocate(capacity) catch {
            self.destroy();
            err.* = sys.neg(.NOMEM);
            return null;
        };
        return self;
    }

    fn allocate(self: *DataPlane, capacity: u32) !void {
        const allocator = std.heap.page_allocator;
        self.fds = try allocator.alloc(i32, capacity);
        @memset(self.fds, -1);
        self.fallbacks = try allocator.alloc(i32, capacity);
        @memset(self.fallbacks, -1);
        self.owned = try allocator.alloc(i32, capacity);
        @memset(self.owned, -1);
        self.direct = try allocator.alloc(bool, capacity);
        @memset(self.direct, false);
        self.flushes = try allocator.alloc(i32, capacity);
        @memset(self.flushes, -1);
        self.releases = try allocator.alloc(i32, capacity);
        @memset(self.releases, -1);
        self.states = try allocator.alloc(u32, capacity);
        @memset(self.states, slot_empty);
    }

    pub fn destroy(self: *DataPlane) void {
        const allocator = std.heap.page_allocator;
        if (self.nodes) |t| t.destroy();
        for (self.owned) |fd| if (fd >= 0) sys.closeFd(fd);
        if (self.fds.len > 0) allocator.free(self.fds);
        if (self.fallbacks.len > 0) allocator.free(self.fallbacks);
        if (self.owned.len > 0) allocator.free(self.owned);
        if (self.direct.len > 0) allocator.free(self.direct);
        if (self.flushes.len > 0) allocator.free(self.flushes);
        if (self.releases.len > 0) allocator.free(self.releases);
        if (self.states.len > 0) allocator.free(self.states);
        allocator.destroy(self);
    }

    /// fd >= 0 maps an empty slot. With `mode_direct` the handle's I/O bypasses the page cache:
    /// a buffered `fd` is reopened with O_DIRECT (kept buffered if the backing filesystem refuses
    /// O_DIRECT); an `fd` that already is O_DIRECT gets a buffered reopen as its fallback
    /// whatever the mode. `fd` stays owned by the caller (unless a native RELEASE closes it).
    /// fd < 0 clears the slot and closes what the table opened for it: cleared_mapped (the
    /// caller's descriptor is still open), cleared_released (RELEASE was answered natively and
    /// closed it; reported once) or cleared_nothing (empty, or being released right now).
    /// fd == collect_only clears a released slot only (cleared_released), never a mapped one.
    pub fn set(self: *DataPlane, slot: u32, fd: i32, mode: u32) i32 {
        if (slot >= self.fds.len) return sys.neg(.INVAL);
        if (fd == collect_only) {
            return if (@cmpxchgStrong(u32, &self.states[slot], slot_released, slot_empty, .acq_rel, .acquire) == null) cleared_released else cleared_nothing;
        }
        if (fd < 0) {
            if (@cmpxchgStrong(u32, &self.states[slot], slot_mapped, slot_busy, .acq_rel, .acquire)) |cur| {
                if (cur == slot_released and @cmpxchgStrong(u32, &self.states[slot], slot_released, slot_empty, .acq_rel, .acquire) == null) return cleared_released;
                return cleared_nothing;
            }
            self.clearSlot(slot);
            @atomicStore(u32, &self.states[slot], slot_empty, .release);
            return cleared_mapped;
        }
        if (@atomicLoad(u32, &self.states[slot], .acquire) != slot_empty) return sys.neg(.BUSY);
        assert(self.owned[slot] == -1 and self.fds[slot] == -1);
        var io_fd = fd;
        var fallback: i32 = -1;
        var direct = false;
        const fl_rc = linux.fcntl(fd, linux.F.GETFL, 0);
        if (sys.errnoOf(fl_rc) == .SUCCESS) {
            const fl: u32 = @truncate(fl_rc);
            if (fl & o_direct != 0) {
                direct = true;
                fallback = reopen(fd, fl & ~o_direct);
                self.owned[slot] = fallback;
            } else if (mode & mode_direct != 0) {
                const d = reopen(fd, fl | o_direct);
                if (d >= 0) {
                    io_fd = d;
                    fallback = fd;
                    direct = true;
                    self.owned[slot] = d;
                }
            }
        }
        self.fallbacks[slot] = fallback;
        self.direct[slot] = direct;
        // The caller's own descriptor, whichever the I/O goes to: the one its flush would close.
        self.flushes[slot] = if (mode & mode_flush != 0) fd else -1;
        self.releases[slot] = if (mode & mode_release != 0) fd else -1;
        @atomicStore(i32, &self.fds[slot], io_fd, .release);
        @atomicStore(u32, &self.states[slot], slot_mapped, .release);
        return 0;
    }

    /// The slot's fields back to empty, closing what the table opened. Its state is slot_busy
    /// (the caller owns it until it stores the next state).
    fn clearSlot(self: *DataPlane, slot: u32) void {
        assert(@atomicLoad(u32, &self.states[slot], .acquire) == slot_busy);
        @atomicStore(i32, &self.fds[slot], -1, .release);
        const owned = self.owned[slot];
        self.owned[slot] = -1;
        self.fallbacks[slot] = -1;
        self.direct[slot] = false;
        self.flushes[slot] = -1;
        self.releases[slot] = -1;
        if (owned >= 0) sys.closeFd(owned);
    }

    /// RELEASE of native handle `fh`, answered by the shim: the slot is cleared, the caller's
    /// descriptor closed (close's result, 0 or -errno, is the answer) and the slot left
    /// released until JS collects it. null when `fh` is no mode_release handle (JS answers).
    /// The kernel sends RELEASE once, after the handle's last request was answered.
    pub fn release(self: *DataPlane, fh: u64) ?i64 {
        if (fh < fh_tag or fh - fh_tag >= self.fds.len) return null;
        const slot: u32 = @intCast(fh - fh_tag);
        if (@cmpxchgStrong(u32, &self.states[slot], slot_mapped, slot_busy, .acq_rel, .acquire) != null) return null;
        const fd = self.releases[slot];
        if (fd < 0) {
            @atomicStore(u32, &self.states[slot], slot_mapped, .release);
            return null;
        }
        self.clearSlot(slot);
        // close is never restarted (the descriptor is gone even on EINTR).
        const rc = sys.result(linux.close(fd));
        @atomicStore(u32, &self.states[slot], slot_released, .release);
        return rc;
    }

    /// From now on GETATTR is answered from a node table of 2^log2 entries (once; it lives as
    /// long as the data plane). Published atomically: transports serving meanwhile see it or not.
    pub fn enableNodes(self: *DataPlane, log2: u5, ttl_sec: u64, ttl_nsec: u32) i32 {
        if (@atomicLoad(?*NodeTable, &self.nodes, .acquire) != null) return sys.neg(.EXIST);
        var err: i32 = 0;
        const t = NodeTable.create(log2, ttl_sec, ttl_nsec, &err) orelse return err;
        @atomicStore(?*NodeTable, &self.nodes, t, .release);
        return 0;
    }

    pub fn nodeTable(self: *const DataPlane) ?*NodeTable {
        return @atomicLoad(?*NodeTable, &self.nodes, .acquire);
    }

    /// The handle of a native fh, or null when `fh` is not one (the request goes to JS).
    pub fn lookup(self: *const DataPlane, fh: u64) ?Handle {
        if (fh < fh_tag) return null;
        const slot = fh - fh_tag;
        if (slot >= self.fds.len) return null;
        const i: usize = @intCast(slot);
        const fd = @atomicLoad(i32, &self.fds[i], .acquire);
        if (fd < 0) return null;
        return .{ .fd = fd, .fallback = self.fallbacks[i], .direct = self.direct[i], .flush_fd = self.flushes[i] };
    }
};

// ---- node table: GETATTR without JS -----------------------------------------------------------

/// A table of node id → descriptor (the filesystem's O_PATH descriptor of the node, owned by
/// the filesystem) that GETATTR is answered from: statx of the descriptor, encoded as
/// fuse_attr_out with the session's attribute TTL (docs/DATAPLANE.md "Native GETATTR").
///
/// Index = node id & mask; an entry holds one node (a second node with the same index is
/// refused and served by JS). The filesystem sets an entry when a node gets its descriptor and
/// clears it before closing that descriptor (eviction, deletion, FORGET). Its calls come one at
/// a time (under its table lock); the transports' threads read concurrently. A reader counts
/// itself in `users` before it loads the descriptor, and clear() waits until no reader of the
/// entry is left before it returns, so a descriptor number is never statx'ed after the
/// filesystem closed it (and possibly reused it for another file).
pub const NodeTable = struct {
    ids: []u64,
    fds: []i32,
    users: []u32,
    mask: u64,
    ttl_sec: u64,
    ttl_nsec: u32,
    /// 1 once LOOKUPs of missing names in the table's directories are answered here
    /// (enableMissing; published atomically), with this negative-entry TTL (0: ENOENT).
    missing: u32 = 0,
    neg_sec: u64 = 0,
    neg_nsec: u32 = 0,

    pub const max_log2: u5 = 22;

    pub fn create(log2: u5, ttl_sec: u64, ttl_nsec: u32, err: *i32) ?*NodeTable {
        if (log2 == 0 or log2 > max_log2 or ttl_nsec >= 1_000_000_000) {
            err.* = sys.neg(.INVAL);
            return null;
        }
        const allocator = std.heap.page_allocator;
        const n: usize = @as(usize, 1) << log2;
        const self = allocator.create(NodeTable) catch {
            err.* = sys.neg(.NOMEM);
            return null;
        };
        self.* = .{ .ids = &.{}, .fds = &.{}, .users = &.{}, .mask = n - 1, .ttl_sec = ttl_sec, .ttl_nsec = ttl_nsec };
        self.ids = allocator.alloc(u64, n) catch return self.failed(err);
        @memset(self.ids, 0);
        self.fds = allocator.alloc(i32, n) catch return self.failed(err);
        @memset(self.fds, -1);
        self.users = allocator.alloc(u32, n) catch return self.failed(err);
        @memset(self.users, 0);
        return self;
    }

    fn failed(self: *NodeTable, err: *i32) ?*NodeTable {
        self.destroy();
        err.* = sys.neg(.NOMEM);
        return null;
    }

    pub fn destroy(self: *NodeTable) void {
        const allocator = std.heap.page_allocator;
        if (self.ids.len > 0) allocator.free(self.ids);
        if (self.fds.len > 0) allocator.free(self.fds);
        if (self.users.len > 0) allocator.free(self.users);
        allocator.destroy(self);
    }

    fn index(self: *const NodeTable, nodeid: u64) usize {
        return @intCast(nodeid & self.mask);
    }

    /// Node `nodeid` is answered from `fd` from now on: 0, or -EBUSY when its entry holds
    /// another node (JS answers this one).
    pub fn set(self: *NodeTable, nodeid: u64, fd: i32) i32 {
        assert(fd >= 0 and nodeid != 0);
        const i = self.index(nodeid);
        const cur = @atomicLoad(i32, &self.fds[i], .seq_cst);
        if (cur >= 0) {
            // The filesystem clears before it sets again; the same node set twice keeps one fd.
            return if (@atomicLoad(u64, &self.ids[i], .seq_cst) == nodeid and cur == fd) 0 else sys.neg(.BUSY);
        }
        @atomicStore(u64, &self.ids[i], nodeid, .seq_cst);
        @atomicStore(i32, &self.fds[i], fd, .seq_cst);
        return 0;
    }

    /// Node `nodeid`'s descriptor is about to be closed: no reader uses it once this returns.
    pub fn clear(self: *NodeTable, nodeid: u64) void {
        self.detach(nodeid);
        self.drain(nodeid);
    }

    /// No new GETATTR of `nodeid` uses its descriptor; readers already in their statx may (drain
    /// waits for them). Quick: safe under the filesystem's lock.
    pub fn detach(self: *NodeTable, nodeid: u64) void {
        const i = self.index(nodeid);
        if (@atomicLoad(u64, &self.ids[i], .seq_cst) != nodeid) return;
        _ = @atomicRmw(i32, &self.fds[i], .Xchg, -1, .seq_cst);
    }

    /// After detach(nodeid): returns once no reader of its entry is left, so the descriptor it
    /// had may be closed. A reader that counted itself before the detach may still be in its
    /// statx (microseconds, or as long as the backing filesystem makes a statx wait: call this
    /// outside locks); one that counts itself after it sees -1 or a newer descriptor (then this
    /// waits for it too, harmlessly).
    pub fn drain(self: *NodeTable, nodeid: u64) void {
        const i = self.index(nodeid);
        var spins: u32 = 0;
        while (@atomicLoad(u32, &self.users[i], .seq_cst) != 0) : (spins += 1) {
            if (spins < 100) std.atomic.spinLoopHint() else _ = linux.sched_yield();
        }
    }

    /// statx(`path` relative to node `nodeid`'s descriptor) counted as a reader of its entry (so
    /// clear() waits for it): the errno, or null when the entry holds no descriptor of that node.
    fn statxAt(self: *NodeTable, nodeid: u64, path: [*:0]const u8, flags: u32, mask: u32, stx: *linux.Statx) ?linux.E {
        const i = self.index(nodeid);
        _ = @atomicRmw(u32, &self.users[i], .Add, 1, .seq_cst);
        defer _ = @atomicRmw(u32, &self.users[i], .Sub, 1, .seq_cst);
        const fd = @atomicLoad(i32, &self.fds[i], .seq_cst);
        if (fd < 0 or @atomicLoad(u64, &self.ids[i], .seq_cst) != nodeid) return null;
        return sys.errnoOf(linux.statx(fd, path, flags, mask, stx));
    }

    /// From now on a LOOKUP in a directory of the table whose name is not there is answered by
    /// the shim (lookupMissing): a negative entry with TTL `sec` + `nsec`, or ENOENT when 0.
    pub fn enableMissing(self: *NodeTable, sec: u64, nsec: u32) i32 {
        if (nsec >= 1_000_000_000) return sys.neg(.INVAL);
        if (@atomicLoad(u32, &self.missing, .acquire) != 0) return sys.neg(.EXIST);
        self.neg_sec = sec;
        self.neg_nsec = nsec;
        @atomicStore(u32, &self.missing, 1, .release);
        return 0;
    }

    /// LOOKUP of `name` (the request's payload: `len` bytes, the last a NUL) in directory node
    /// `nodeid`, when the name does not exist there (statx on the directory's descriptor says
    /// ENOENT: what the filesystem's own lookup does first): the answer's payload size — a
    /// negative fuse_entry_out written to `pay` (nodeid 0, entry_valid = the negative TTL) — or
    /// -ENOENT without a negative TTL. null: JS answers (not enabled, no entry, "." or "..",
    /// the name exists, any other error).
    pub fn lookupMissing(self: *NodeTable, nodeid: u64, name: [*]const u8, len: u32, pay: [*]u8) ?i64 {
        if (@atomicLoad(u32, &self.missing, .acquire) == 0) return null;
        if (len < 2 or name[len - 1] != 0) return null;
        const n = name[0 .. len - 1];
        if (std.mem.indexOfScalar(u8, n, 0) != null or std.mem.eql(u8, n, ".") or std.mem.eql(u8, n, "..")) return null;
        var stx: linux.Statx = undefined;
        const e = self.statxAt(nodeid, @ptrCast(name), linux.AT.SYMLINK_NOFOLLOW, linux.STATX_TYPE, &stx) orelse return null;
        if (e != .NOENT) return null;
        if (self.neg_sec == 0 and self.neg_nsec == 0) return sys.neg(.NOENT);
        @memset(pay[0..entry_out_size], 0);
        std.mem.writeInt(u64, pay[16..24], self.neg_sec, .little);
        std.mem.writeInt(u32, pay[32..36], self.neg_nsec, .little);
        return entry_out_size;
    }

    /// GETATTR of `nodeid` into `pay` (fuse_attr_out): its size, or null when the node has no
    /// entry or the statx failed (JS answers then, with its own errors and fallbacks).
    pub fn getattr(self: *NodeTable, nodeid: u64, pay: [*]u8) ?i64 {
        var stx: linux.Statx = undefined;
        const e = self.statxAt(nodeid, "", linux.AT.EMPTY_PATH | linux.AT.SYMLINK_NOFOLLOW, linux.STATX_BASIC_STATS, &stx) orelse return null;
        if (e != .SUCCESS) return null;
        encodeAttrOut(pay, &stx, self.ttl_sec, self.ttl_nsec);
        return attr_out_size;
    }
};

/// struct fuse_attr_out: attr_valid, attr_valid_nsec, dummy, struct fuse_attr (88 bytes).
pub const attr_out_size: u32 = 104;
/// struct fuse_entry_out: nodeid, generation, entry_valid, attr_valid, entry_valid_nsec,
/// attr_valid_nsec, struct fuse_attr.
pub const entry_out_size: u32 = 128;

/// fuse_attr_out from a statx, as lib/protocol/codec.ts encodeAttrOut does from the Attr the
/// passthrough builds (lib/fs/passthrough/stat.ts attr()).
pub fn encodeAttrOut(pay: [*]u8, stx: *const linux.Statx, ttl_sec: u64, ttl_nsec: u32) void {
    const w = struct {
        fn u64at(p: [*]u8, off: usize, v: u64) void {
            std.mem.writeInt(u64, p[off..][0..8], v, .little);
        }
        fn u32at(p: [*]u8, off: usize, v: u32) void {
            std.mem.writeInt(u32, p[off..][0..4], v, .little);
        }
    };
    w.u64at(pay, 0, ttl_sec);
    w.u32at(pay, 8, ttl_nsec);
    w.u32at(pay, 12, 0);
    const a = pay + 16;
    w.u64at(a, 0, stx.ino);
    w.u64at(a, 8, stx.size);
    w.u64at(a, 16, stx.blocks);
    w.u64at(a, 24, @bitCast(stx.atime.sec));
    w.u64at(a, 32, @bitCast(stx.mtime.sec));
    w.u64at(a, 40, @bitCast(stx.ctime.sec));
    w.u32at(a, 48, stx.atime.nsec);
    w.u32at(a, 52, stx.mtime.nsec);
    w.u32at(a, 56, stx.ctime.nsec);
    w.u32at(a, 60, stx.mode);
    w.u32at(a, 64, stx.nlink);
    w.u32at(a, 68, stx.uid);
    w.u32at(a, 72, stx.gid);
    // The kernel's 32-bit device encoding (new_encode_dev).
    w.u32at(a, 76, (stx.rdev_minor & 0xff) | (stx.rdev_major << 8) | ((stx.rdev_minor & ~@as(u32, 0xff)) << 12));
    w.u32at(a, 80, if (stx.blksize != 0) stx.blksize else 4096);
    w.u32at(a, 84, 0);
}

test "node table: set, getattr, clear; a second node on the same entry is refused" {
    var err: i32 = 0;
    const t = NodeTable.create(2, 5, 250_000_000, &err).?;
    defer t.destroy();
    const rc = linux.openat(linux.AT.FDCWD, "/dev/null", .{ .PATH = true, .CLOEXEC = true }, 0);
    try std.testing.expect(sys.errnoOf(rc) == .SUCCESS);
    const fd: i32 = @intCast(rc);
    defer sys.closeFd(fd);
    var pay: [attr_out_size]u8 = @splat(0xee);
    try std.testing.expectEqual(@as(?i64, null), t.getattr(5, &pay));
    try std.testing.expectEqual(@as(i32, 0), t.set(5, fd));
    try std.testing.expectEqual(@as(i32, 0), t.set(5, fd));
    try std.testing.expect(t.set(9, fd) < 0); // 9 & 3 == 5 & 3
    try std.testing.expectEqual(@as(?i64, attr_out_size), t.getattr(5, &pay));
    try std.testing.expectEqual(@as(?i64, null), t.getattr(9, &pay));
    var stx: linux.Statx = undefined;
    _ = linux.statx(fd, "", linux.AT.EMPTY_PATH, linux.STATX_BASIC_STATS, &stx);
    try std.testing.expectEqual(@as(u64, 5), std.mem.readInt(u64, pay[0..8], .little));
    try std.testing.expectEqual(@as(u32, 250_000_000), std.mem.readInt(u32, pay[8..12], .little));
    try std.testing.expectEqual(stx.ino, std.mem.readInt(u64, pay[16..24], .little));
    try std.testing.expectEqual(@as(u32, stx.mode), std.mem.readInt(u32, pay[16 + 60 ..][0..4], .little));
    // /dev/null is char device 1:3.
    try std.testing.expectEqual(@as(u32, (1 << 8) | 3), std.mem.readInt(u32, pay[16 + 76 ..][0..4], .little));
    t.clear(9); // not its node: nothing happens
    try std.testing.expectEqual(@as(?i64, attr_out_size), t.getattr(5, &pay));
    t.detach(5);
    try std.testing.expectEqual(@as(?i64, null), t.getattr(5, &pay));
    t.drain(5);
    try std.testing.expectEqual(@as(i32, 0), t.set(9, fd));
    try std.testing.expectEqual(@as(u32, 0), t.users[1]);
}

test "encodeAnswer: getattr answers carry the attr bytes" {
    var hdr: [288]u8 = @splat(0);
    var pay: [attr_out_size]u8 = @splat(0);
    var t: Tally = .{};
    try std.testing.expectEqual(attr_out_size, encodeAnswer(&hdr, &pay, op_getattr, attr_out_size, &t));
    try std.testing.expectEqual(@as(u32, 16 + attr_out_size), std.mem.readInt(u32, hdr[0..4], .little));
}

test "encodeAnswer: a LOOKUP's ENOENT is an answer, not a native error; its negative entry is payload" {
    var hdr: [288]u8 = @splat(0);
    var pay: [entry_out_size]u8 = @splat(0);
    var t: Tally = .{};
    try std.testing.expectEqual(@as(u32, 0), encodeAnswer(&hdr, &pay, op_lookup, sys.neg(.NOENT), &t));
    try std.testing.expectEqual(@as(i32, sys.neg(.NOENT)), std.mem.readInt(i32, hdr[4..8], .little));
    try std.testing.expectEqual(entry_out_size, encodeAnswer(&hdr, &pay, op_lookup, entry_out_size, &t));
    try std.testing.expectEqual(@as(u32, 16 + entry_out_size), std.mem.readInt(u32, hdr[0..4], .little));
    try std.testing.expectEqual(@as(u64, 0), t.errors);
    _ = encodeAnswer(&hdr, &pay, op_release, sys.neg(.IO), &t);
    try std.testing.expectEqual(@as(u64, 1), t.errors);
}

const o_direct: u32 = @bitCast(linux.O{ .DIRECT = true });
/// Status flags a reopen keeps (F_GETFL also reports O_LARGEFILE and O_NONBLOCK; the access
/// mode, O_APPEND and O_SYNC/O_DSYNC are what make it the same kind of descriptor).
const o_keep: u32 = @as(u32, @bitCast(linux.O{ .ACCMODE = .RDWR, .APPEND = true, .DSYNC = true, .SYNC = true, .DIRECT = true })) | 3;

/// A new descriptor of the file `fd` is open on (/proc/self/fd/N), with status flags `fl`; -1 if
/// that fails (the caller then does without).
fn reopen(fd: i32, fl: u32) i32 {
    var buf: [32]u8 = undefined;
    const path = std.fmt.bufPrintZ(&buf, "/proc/self/fd/{d}", .{fd}) catch unreachable;
    var flags: linux.O = @bitCast(fl & o_keep);
    flags.CLOEXEC = true;
    const rc = linux.openat(linux.AT.FDCWD, path, flags, 0);
    if (sys.errnoOf(rc) != .SUCCESS) return -1;
    return @intCast(rc);
}

/// A read or write on a direct handle that the backing filesystem refused (EINVAL: offset, size
/// or memory not aligned to its block size) is done once more on the buffered fallback.
pub fn wantsFallback(h: Handle, opcode: u32, res: i64) bool {
    return h.fallback >= 0 and res == sys.neg(.INVAL) and (opcode == op_read or opcode == op_write);
}

/// pread/pwrite between `fd` and `pay`, restarted after EINTR; bytes or -errno.
pub fn transfer(fd: i32, opcode: u32, pay: [*]u8, size: u32, offset: u64) i64 {
    assert(opcode == op_read or opcode == op_write);
    while (true) {
        const rc = if (opcode == op_read) linux.pread(fd, pay, size, @bitCast(offset)) else linux.pwrite(fd, pay, size, @bitCast(offset));
        if (sys.errnoOf(rc) != .INTR) return sys.result(rc);
    }
}

/// Opcodes the data plane serves (fuse_kernel.h).
pub const op_lookup: u32 = 1;
pub const op_getattr: u32 = 3;
pub const op_read: u32 = 15;
pub const op_write: u32 = 16;
pub const op_fsync: u32 = 20;
pub const op_flush: u32 = 25;
pub const op_release: u32 = 18;

/// A native FLUSH: close(dup(fd)), which runs the backing file's ->flush (NFS, FUSE: write-back
/// and its error) without closing the caller's descriptor. 0 or -errno; null when no descriptor
/// is free for the dup (EMFILE/ENFILE): the request then goes to JS, whose flush handler can
/// make room (the passthrough sheds cached descriptors).
pub fn flush(fd: i32) ?i64 {
    assert(fd >= 0);
    const d = linux.dup(fd);
    switch (sys.errnoOf(d)) {
        .SUCCESS => {},
        .MFILE, .NFILE => return null,
        else => return sys.result(d),
    }
    // close never restarts (the descriptor is gone even on EINTR): report what it said, as
    // close(2) of the caller's file would.
    return sys.result(linux.close(@intCast(d)));
}

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
        // A LOOKUP's ENOENT is its answer (the name is not there), not a failure of the backing file.
        if (opcode != op_lookup) tally.errors += 1;
    } else if (opcode == op_read) {
        out_len = @intCast(res);
        tally.read_bytes += out_len;
    } else if (opcode == op_getattr or opcode == op_lookup) {
        out_len = @intCast(res); // fuse_attr_out / fuse_entry_out, written by the NodeTable
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
    try std.testing.expectEqual(@as(?Handle, null), dp.lookup(3));
    try std.testing.expectEqual(@as(?Handle, null), dp.lookup(fh_tag + 1));
    try std.testing.expectEqual(@as(i32, 0), dp.set(1, 1, 0));
    try std.testing.expectEqual(@as(i32, 1), dp.lookup(fh_tag + 1).?.fd);
    try std.testing.expectEqual(@as(?Handle, null), dp.lookup(fh_tag + 4));
    try std.testing.expect(dp.set(4, 1, 0) < 0);
    _ = dp.set(1, -1, 0);
    try std.testing.expectEqual(@as(?Handle, null), dp.lookup(fh_tag + 1));
}

test "direct mode: a buffered fd is reopened with O_DIRECT and kept as the fallback" {
    var err: i32 = 0;
    const dp = DataPlane.create(2, &err).?;
    defer dp.destroy();
    // /tmp is a disk filesystem here; one that refuses O_DIRECT leaves the handle buffered.
    const path = "/tmp/fuse-uring-dataplane-test";
    const rc = linux.openat(linux.AT.FDCWD, path, .{ .ACCMODE = .RDWR, .CREAT = true, .TRUNC = true, .CLOEXEC = true }, 0o600);
    try std.testing.expect(sys.errnoOf(rc) == .SUCCESS);
    const fd: i32 = @intCast(rc);
    defer sys.closeFd(fd);
    _ = linux.unlinkat(linux.AT.FDCWD, path, 0);
    try std.testing.expectEqual(@as(i32, 0), dp.set(0, fd, mode_direct));
    const h = dp.lookup(fh_tag).?;
    if (h.direct) {
        try std.testing.expect(h.fd != fd and h.fallback == fd);
        const fl: u32 = @truncate(linux.fcntl(h.fd, linux.F.GETFL, 0));
        try std.testing.expect(fl & o_direct != 0 and fl & 3 == 2);
        try std.testing.expect(wantsFallback(h, op_read, sys.neg(.INVAL)));
        try std.testing.expect(!wantsFallback(h, op_fsync, sys.neg(.INVAL)));
        try std.testing.expect(!wantsFallback(h, op_read, sys.neg(.IO)));
    } else {
        try std.testing.expect(h.fd == fd and h.fallback == -1);
    }
    const opened = h.fd;
    _ = dp.set(0, -1, 0);
    try std.testing.expectEqual(@as(?Handle, null), dp.lookup(fh_tag));
    // The reopened descriptor was the table's: closed with the slot.
    if (h.direct) try std.testing.expect(sys.errnoOf(linux.fcntl(opened, linux.F.GETFL, 0)) == .BADF);
    // Without the mode a buffered fd stays as it is.
    try std.testing.expectEqual(@as(i32, 0), dp.set(1, fd, 0));
    try std.testing.expectEqual(Handle{ .fd = fd, .fallback = -1, .direct = false }, dp.lookup(fh_tag + 1).?);
}

test "mode_flush: the handle names the caller's descriptor; flush leaves it open" {
    var err: i32 = 0;
    const dp = DataPlane.create(2, &err).?;
    defer dp.destroy();
    const rc = linux.openat(linux.AT.FDCWD, "/dev/null", .{ .ACCMODE = .RDWR, .CLOEXEC = true }, 0);
    try std.testing.expect(sys.errnoOf(rc) == .SUCCESS);
    const fd: i32 = @intCast(rc);
    defer sys.closeFd(fd);
    try std.testing.expectEqual(@as(i32, 0), dp.set(0, fd, 0));
    try std.testing.expectEqual(@as(i32, -1), dp.lookup(fh_tag).?.flush_fd);
    _ = dp.set(0, -1, 0);
    try std.testing.expectEqual(@as(i32, 0), dp.set(1, fd, mode_flush));
    try std.testing.expectEqual(fd, dp.lookup(fh_tag + 1).?.flush_fd);
    try std.testing.expectEqual(@as(?i64, 0), flush(fd));
    try std.testing.expect(sys.errnoOf(linux.fcntl(fd, linux.F.GETFL, 0)) == .SUCCESS);
    _ = dp.set(1, -1, 0);
    try std.testing.expectEqual(@as(?Handle, null), dp.lookup(fh_tag + 1));
}

test "mode_release: RELEASE closes the caller's descriptor; the slot is reported released once" {
    var err: i32 = 0;
    const dp = DataPlane.create(2, &err).?;
    defer dp.destroy();
    const open = struct {
        fn devNull() !i32 {
            const rc = linux.openat(linux.AT.FDCWD, "/dev/null", .{ .ACCMODE = .RDWR, .CLOEXEC = true }, 0);
            try std.testing.expect(sys.errnoOf(rc) == .SUCCESS);
            return @intCast(rc);
        }
    };
    // Without the mode: not released natively; clearing reports the descriptor still open.
    const a = try open.devNull();
    try std.testing.expectEqual(@as(i32, 0), dp.set(0, a, mode_flush));
    try std.testing.expectEqual(@as(?i64, null), dp.release(fh_tag));
    try std.testing.expectEqual(cleared_mapped, dp.set(0, -1, 0));
    try std.testing.expectEqual(cleared_nothing, dp.set(0, -1, 0));
    // With it: closed, lookups miss, the slot cannot be mapped until collected, and collecting
    // says so exactly once.
    const b = try open.devNull();
    try std.testing.expectEqual(@as(i32, 0), dp.set(1, b, mode_flush | mode_release));
    try std.testing.expectEqual(cleared_nothing, dp.set(1, collect_only, 0)); // still mapped
    try std.testing.expectEqual(@as(?i64, 0), dp.release(fh_tag + 1));
    try std.testing.expect(sys.errnoOf(linux.fcntl(b, linux.F.GETFL, 0)) == .BADF);
    try std.testing.expectEqual(@as(?Handle, null), dp.lookup(fh_tag + 1));
    try std.testing.expectEqual(@as(?i64, null), dp.release(fh_tag + 1));
    try std.testing.expectEqual(sys.neg(.BUSY), dp.set(1, a, 0));
    try std.testing.expectEqual(cleared_released, dp.set(1, -1, 0));
    try std.testing.expectEqual(cleared_nothing, dp.set(1, -1, 0));
    try std.testing.expectEqual(@as(i32, 0), dp.set(1, a, mode_release));
    try std.testing.expectEqual(@as(?i64, 0), dp.release(fh_tag + 1) orelse -1); // closes a
    try std.testing.expectEqual(cleared_released, dp.set(1, collect_only, 0));
    try std.testing.expectEqual(cleared_nothing, dp.set(1, collect_only, 0));
    const a2 = try open.devNull();
    try std.testing.expectEqual(a, a2); // the lowest free number again

    defer sys.closeFd(a2);
    try std.testing.expectEqual(@as(i32, 0), dp.set(1, a2, 0));
    try std.testing.expectEqual(cleared_mapped, dp.set(1, -1, 0));
    // Outside the table.
    try std.testing.expectEqual(@as(?i64, null), dp.release(fh_tag + 2));
    try std.testing.expectEqual(@as(?i64, null), dp.release(7));
}

test "node table: LOOKUP of a missing name is a negative entry (or ENOENT); anything else goes to JS" {
    var err: i32 = 0;
    const t = NodeTable.create(2, 1, 0, &err).?;
    defer t.destroy();
    const rc = linux.openat(linux.AT.FDCWD, "/", .{ .PATH = true, .DIRECTORY = true, .CLOEXEC = true }, 0);
    try std.testing.expect(sys.errnoOf(rc) == .SUCCESS);
    const fd: i32 = @intCast(rc);
    defer sys.closeFd(fd);
    var pay: [entry_out_size]u8 = @splat(0xee);
    const missing = "fuse-uring-no-such-name\x00";
    try std.testing.expectEqual(@as(i32, 0), t.set(1, fd));
    try std.testing.expectEqual(@as(?i64, null), t.lookupMissing(1, missing, missing.len, &pay)); // not enabled
    try std.testing.expectEqual(@as(i32, 0), t.enableMissing(0, 0));
    try std.testing.expectEqual(@as(?i64, sys.neg(.NOENT)), t.lookupMissing(1, missing, missing.len, &pay));
    t.neg_sec = 1;
    t.neg_nsec = 250_000_000;
    try std.testing.expectEqual(@as(?i64, entry_out_size), t.lookupMissing(1, missing, missing.len, &pay));
    try std.testing.expectEqual(@as(u64, 0), std.mem.readInt(u64, pay[0..8], .little)); // nodeid 0
    try std.testing.expectEqual(@as(u64, 1), std.mem.readInt(u64, pay[16..24], .little));
    try std.testing.expectEqual(@as(u32, 250_000_000), std.mem.readInt(u32, pay[32..36], .little));
    try std.testing.expectEqual(@as(u8, 0), pay[127]);
    const there = "proc\x00";
    try std.testing.expectEqual(@as(?i64, null), t.lookupMissing(1, there, there.len, &pay)); // exists
    try std.testing.expectEqual(@as(?i64, null), t.lookupMissing(1, "..\x00", 3, &pay));
    try std.testing.expectEqual(@as(?i64, null), t.lookupMissing(1, "x", 1, &pay)); // no NUL
    try std.testing.expectEqual(@as(?i64, null), t.lookupMissing(5, missing, missing.len, &pay)); // not in the table
    try std.testing.expectEqual(sys.neg(.EXIST), t.enableMissing(0, 0));
}
