//! FUSE-over-io_uring engine, owned by one JS thread (docs/ARCHITECTURE.md).
//!
//! The thread that runs the filesystem's handlers also owns the io_uring: it creates it (so
//! SINGLE_ISSUER/DEFER_TASKRUN name it as the submitter and the kernel's task work that copies
//! requests into our buffers runs on it), and one `enter` call submits every queued
//! COMMIT_AND_FETCH and backing I/O, runs that task work, and reaps the completions. Under load a
//! request is reaped, handled and answered on this one thread, the way libfuse's ring threads
//! work: no hand-off to another thread.
//!
//! Only an idle owner needs waking from elsewhere: before it returns to its event loop it
//! enables the ring's registered eventfd (`setIdle(true)`); the kernel signals it when a
//! request or completion arrives; the watcher thread blocked on that eventfd rings the
//! doorbell once. While the owner is busy the eventfd stays disabled and the watcher sleeps.
//!
//! Native data plane: a READ/WRITE/FSYNC on a handle registered in the DataPlane table is served
//! here, inside `enter`, without surfacing to JS: READ_FIXED/WRITE_FIXED/FSYNC between the
//! backing fd and the entry's registered payload, then COMMIT_AND_FETCH with the result.
//!
//! Entry states (owner thread only): registering/waiting (the kernel holds it, waiting for a
//! request) → js (JS holds a request; at most one JS I/O on its payload) or native (a native
//! I/O is in flight) → waiting (COMMIT_AND_FETCH queued) … → dead (connection gone). An entry
//! whose command fails unexpectedly is registered again, so a queue never shrinks silently; a
//! queue that loses every entry stops the engine with that error (the session then aborts the
//! connection instead of letting that CPU's callers hang).

const std = @import("std");
const linux = std.os.linux;
const assert = std.debug.assert;

const sys = @import("sys.zig");
const queue = @import("queue.zig");
const bell_mod = @import("bell.zig");
const layout = @import("layout.zig");
const uring = @import("uring.zig");
const dataplane = @import("dataplane.zig");

const Completion = queue.Completion;
const DataPlane = dataplane.DataPlane;

/// Read by JS as u64 words in this order (lib/transport/uring.ts).
pub const Stats = extern struct {
    /// io_uring_enter calls (each submits what is queued and reaps).
    enters: u64 = 0,
    cqes: u64 = 0,
    /// Doorbells rung by the watcher thread: wake-ups of the owner from another thread.
    wakeups: u64 = 0,
    /// Requests received on this engine's entries (JS and native).
    requests: u64 = 0,
    /// COMMIT_AND_FETCH SQEs prepared.
    commits: u64 = 0,
    /// READ/WRITE(_FIXED)/FSYNC SQEs prepared (JS backing I/O and native).
    io_ops: u64 = 0,
    /// Unexpected CQE results / failures (not counting the normal -ENOTCONN shutdown).
    errors: u64 = 0,
    /// Entries that completed for good.
    dead: u64 = 0,
    /// 1 if the payloads are registered fixed buffers.
    fixed_buffers: u64 = 0,
    /// Requests answered by the native data plane (no JS).
    native_requests: u64 = 0,
    native_read_bytes: u64 = 0,
    native_write_bytes: u64 = 0,
    /// Native requests answered with an error from the backing fd.
    native_errors: u64 = 0,
    /// Entry commands retried or entries registered again after an unexpected error.
    recovered: u64 = 0,
    /// Most entries held at once (JS + native).
    inflight_max: u64 = 0,
    /// Times the owner went idle (armed the eventfd).
    idles: u64 = 0,
    /// Most native I/Os in flight at once.
    native_inflight_max: u64 = 0,
    /// Native reads/writes done synchronously on the owner thread (size <= native_sync_max).
    native_sync: u64 = 0,
    /// Wait timers queued (one bounds many blocking waits; see `enter`).
    wait_timers: u64 = 0,
    /// 1 if /dev/fuse is the ring's fixed file 0 (entry commands skip an fget/fput per SQE).
    fixed_file: u64 = 0,
    /// Native reads/writes submitted as READ_FIXED/WRITE_FIXED (answered from the completion).
    native_async: u64 = 0,
    /// Native requests on O_DIRECT handles (the backing file's page cache is bypassed).
    native_direct: u64 = 0,
    /// Direct reads/writes the backing filesystem refused (EINVAL, alignment) and that were
    /// done once more on the handle's buffered descriptor.
    direct_fallbacks: u64 = 0,
    // ---- FUSE 7.46 buffer pools (ABI 5) ----
    /// Queues whose payloads come from a buffer pool (ADD_QUEUE + ADD_BUFPOOL accepted).
    pool_queues: u64 = 0,
    /// Queues that asked for a pool and fell back to per-entry payloads.
    pool_refused: u64 = 0,
    /// -errno of the last refused ADD_QUEUE/ADD_BUFPOOL (0: none).
    pool_error: i64 = 0,
    /// Queues created with FUSE_URING_ZERO_COPY.
    zero_copy_queues: u64 = 0,
    /// Native READ/WRITEs done straight at the client's pages (FUSE_URING_ENT_ZERO_COPY).
    zero_copy_requests: u64 = 0,
    zero_copy_bytes: u64 = 0,
    /// 1 if the pools are registered buffers (IORING_URING_CMD_FIXED, index = queue).
    pool_fixed: u64 = 0,
    /// -errno of a refused FUSE_URING_ZERO_COPY ADD_QUEUE (-EPERM without CAP_SYS_ADMIN).
    zero_copy_error: i64 = 0,
    // ---- ABI 6 ----
    /// FLUSHes answered natively (mode_flush handles: close(dup(fd)), no JS).
    native_flushes: u64 = 0,
    // ---- ABI 7 ----
    /// GETATTRs answered natively from the node table (no JS).
    native_getattrs: u64 = 0,
    // ---- ABI 8 ----
    /// RELEASEs answered natively (mode_release handles: close(fd); JS collects the slot).
    native_releases: u64 = 0,
    /// LOOKUPs of missing names answered natively from the node table (negative entry/ENOENT).
    native_lookups: u64 = 0,
};

/// Slots of the RELEASEs a ring answered natively since its owner last collected them
/// (fu_ring_released; docs/DATAPLANE.md "Native RELEASE"). Written by the shim inside enter,
/// read and emptied by JS between enters: both on the owner thread, so no atomics.
pub const Released = extern struct {
    count: u32 = 0,
    /// Non-zero once the owner asked for the list: only then are RELEASEs answered natively
    /// (an owner that never collects would leave the filesystem's bookkeeping undone).
    enabled: u32 = 0,
    slots: [released_cap]u32 = undefined,
};
/// 4 KiB in all. When the list is full, RELEASEs go to JS until it is collected.
pub const released_cap: u32 = 1022;
comptime {
    assert(@sizeOf(Released) == 4096);
}

/// Buffer pools asked for by fu_ring_create_pooled (docs/BUFFERS.md). `base` is memory the
/// caller owns (a SharedArrayBuffer allocated by JS) and keeps alive until fu_ring_destroy:
/// queue q's pool is `base + q * len`, `len` bytes, cut by the kernel into len / payload_size
/// buffers. zero_copy: ask ADD_QUEUE for FUSE_URING_ZERO_COPY (the kernel answers -EPERM
/// without CAP_SYS_ADMIN; the queue is then made without it). refuse: test fault, ADD_BUFPOOL
/// gets a 4 KiB pool, which the kernel refuses (-EINVAL: no whole buffer fits).
pub const PoolConfig = struct {
    base: usize = 0,
    len: u32 = 0,
    zero_copy: bool = false,
    refuse: bool = false,
};
pub const pool_flag_zero_copy: u32 = 1 << 0;
pub const pool_flag_refuse: u32 = 1 << 1;

/// struct iovec of REGISTER's iovec pair; a pool queue's payload iovec is {NULL, 0}.
const RegIovec = extern struct { base: ?[*]u8, len: usize };
comptime {
    assert(@sizeOf(RegIovec) == @sizeOf(std.posix.iovec));
}

/// Where an entry's payload bytes are for backing I/O.
const EntryBuf = struct { ptr: [*]u8, fixed: bool, index: u32 };

const EntryState = enum(u8) { idle, registering, waiting, js, native, dead };

/// user_data: entry commands carry the entry index; I/O the index with a tag.
const ud_js_io: u64 = 1 << 32;
const ud_native: u64 = 2 << 32;
const ud_tag_mask: u64 = 0xffff_ffff << 32;
const ud_cancel: u64 = std.math.maxInt(u64) - 1;
/// The wait timer (at most one in the kernel at a time).
const ud_timer: u64 = std.math.maxInt(u64) - 2;
/// ADD_QUEUE/ADD_BUFPOOL at start (queue index in the low bits).
const ud_setup: u64 = 3 << 32;

/// Not an io_uring flag: set in fu_ring_create's setup_flags to skip fixed-buffer registration.
pub const no_fixed_buffers_flag: u32 = 1 << 31;
/// Not an io_uring flag: fault injection for tests (FUSE_URING_FAULT=bad-commit): the first
/// COMMIT of every entry carries a bad qid, fails with -EINVAL, and must be recovered.
pub const fault_bad_commit_flag: u32 = 1 << 30;
const shim_flags = no_fixed_buffers_flag | fault_bad_commit_flag;

const io_drain_budget_ms: u32 = 1000;
/// Re-registrations of one entry in a row before it is given up.
const max_reregister: u8 = 3;

pub const Ring = struct {
    fd: i32,
    event_fd: i32,
    nr_queues: u32,
    depth: u32,
    /// Entries per queue (the last of each queue: see pinned()) whose per-entry payloads are
    /// prefaulted and registered as fixed buffers: the pinned-memory budget. The others are
    /// mapped but touched only when used (the kernel hands a queue's most recently answered
    /// entry out first, so they fill only under that much concurrency) and do plain READ/WRITE.
    pinned_depth: u32,
    n: u32,
    payload_size: u32,
    setup_flags: u32,
    ring: *uring.Ring,
    ring_mem: []align(64) u8,
    headers: []align(std.heap.page_size_min) u8,
    payloads: []align(std.heap.page_size_min) u8,
    reg_iovecs: []RegIovec,
    /// The registered-buffer table's iovecs (a null base is a sparse slot).
    buf_iovecs: []RegIovec,
    /// qids[q] = kernel queue id of this engine's q-th queue (entries q*depth ..).
    qids: []u16,
    dp: ?*DataPlane,
    pool: PoolConfig,
    /// Per queue: payloads from the pool (else per-entry), and FUSE_URING_ZERO_COPY.
    queue_pool: []bool,
    queue_zc: []bool,
    /// The per-entry payloads are registered buffers (index = entry).
    entry_table: bool = false,

    // Owner thread only.
    state: []EntryState,
    commit_ids: []u64,
    js_io: []bool,
    native_op: []u8,
    /// The request went to its handle's buffered descriptor after the direct one refused it.
    native_fell_back: []bool,
    retries: []u8,
    live: []u32,
    bad_qid_pending: []bool,
    dead_count: u32 = 0,
    last_dead_res: i32 = 0,
    held: u32 = 0,
    native_inflight: u32 = 0,
    js_io_inflight: u32 = 0,
    stopped: bool = false,
    started: bool = false,
    out: [*]Completion = undefined,
    out_len: u32 = 0,
    out_max: u32 = 0,
    payloads_unsafe: bool = false,
    /// The wait timer: a pure IORING_OP_TIMEOUT that bounds blocking waits. It stays queued
    /// across enters until it expires (`timer_live`), so a busy owner does not arm and cancel a
    /// kernel timer on every wait; `timer_fired` says the current enter saw it expire.
    wait_ts: uring.Timespec = .{ .sec = 0, .nsec = 0 },
    timer_live: bool = false,
    timer_fired: bool = false,
    /// Native reads/writes up to this size are done with pread/pwrite on the owner thread;
    /// larger ones with io_uring fixed-buffer I/O (several in flight). fu_ring_set_native_sync.
    native_sync_max: u32 = 64 * 1024,
    /// Reads/writes on O_DIRECT handles wait for the device: asynchronous (many in flight per
    /// queue) unless set (fu_ring_set_direct_sync, for measuring).
    direct_sync: bool = false,
    /// CQEs of the batch being reaped that come after the one being handled (policy input).
    batch_left: u32 = 0,
    released: Released = .{},

    // Cross-thread.
    bell: bell_mod.Bell,
    watcher_stop: u32 = 0,
    watcher: ?std.Thread = null,
    stats: Stats = .{},

    /// Runs on the owner thread: the ring's submitter is the thread that creates it.
    pub fn create(fd: i32, qids: []const u16, nr_queues_total: u32, depth: u32, pinned_depth: u32, payload_size: u32, setup_flags: u32, doorbell: bell_mod.Fn, dp: ?*DataPlane, pool: PoolConfig, err: *i32) ?*Ring {
        if (fd < 0) return fail(err, .BADF);
        const nq: u32 = @intCast(qids.len);
        if (nq == 0 or depth == 0 or nq > 4096 or depth > 4096 or pinned_depth > depth) return fail(err, .INVAL);
        for (qids) |q| if (q >= nr_queues_total) return fail(err, .INVAL);
        const n64 = @as(u64, nq) * depth;
        if (2 * n64 + 8 > uring.max_sq_entries) return fail(err, .INVAL);
        const n: u32 = @intCast(n64);
        if (payload_size < 8192 or payload_size % 4096 != 0) return fail(err, .INVAL);
        if (pool.len > 0 and (pool.base == 0 or pool.len < payload_size or pool.base % 4096 != 0 or pool.len % 4096 != 0)) return fail(err, .INVAL);
        assert(!(pool.refuse and pool.zero_copy)); // a zero-copy queue without a pool takes no entries

        const allocator = std.heap.page_allocator;
        const self = allocator.create(Ring) catch return fail(err, .NOMEM);
        self.* = .{
            .fd = fd,
            .event_fd = -1,
            .nr_queues = nq,
            .depth = depth,
            .pinned_depth = pinned_depth,
            .n = n,
            .payload_size = payload_size,
            .setup_flags = setup_flags,
            .ring = undefined,
            .ring_mem = &.{},
            .headers = &.{},
            .payloads = &.{},
            .reg_iovecs = &.{},
            .buf_iovecs = &.{},
            .qids = &.{},
            .dp = dp,
            .pool = pool,
            .queue_pool = &.{},
            .queue_zc = &.{},
            .state = &.{},
            .commit_ids = &.{},
            .js_io = &.{},
            .native_op = &.{},
            .native_fell_back = &.{},
            .retries = &.{},
            .live = &.{},
            .bad_qid_pending = &.{},
            .bell = .{ .func = doorbell, .source = .ring },
        };
        self.allocate(qids, err) catch {
            self.free();
            return null;
        };
        var i: u32 = 0;
        while (i < n) : (i += 1) {
            const hdr = self.header(i).?;
            self.reg_iovecs[2 * i] = .{ .base = hdr, .len = layout.header_size };
            if (pool.len == 0) {
                const pay = self.payload(i).?;
                self.reg_iovecs[2 * i + 1] = .{ .base = pay, .len = payload_size };
                self.buf_iovecs[i] = self.fixedIovec(i, pay);
            } else {
                // A pool queue's REGISTER carries an empty payload iovec (dev_uring.c
                // fuse_uring_create_ring_ent: -EINVAL otherwise).
                self.reg_iovecs[2 * i + 1] = .{ .base = null, .len = 0 };
            }
        }
        // One SQE per entry command and per I/O can be queued between two enters.
        const sq_entries = std.math.ceilPowerOfTwoAssert(u32, 2 * n + 8);
        const rc = uring.fuw_init(self.ring, sq_entries, 2 * sq_entries, uring.setup_sqe128 | (setup_flags & ~shim_flags));
        if (rc < 0) {
            // EPERM: io_uring disabled/seccomp; ENOSYS: no io_uring; EINVAL: bad flag
            // combination; ENOMEM: ring memory.
            err.* = rc;
            self.free();
            return null;
        }
        // Fixed buffers only speed up backing I/O; above RLIMIT_MEMLOCK plain READ/WRITE on the
        // same memory work too.
        if (pool.len == 0) {
            const reg_rc = if (setup_flags & no_fixed_buffers_flag != 0) -1 else uring.fuw_register_buffers(self.ring, @ptrCast(self.buf_iovecs.ptr), n);
            self.stats.fixed_buffers = if (reg_rc == 0) 1 else 0;
            self.entry_table = reg_rc == 0;
        } else self.registerPools(setup_flags & no_fixed_buffers_flag == 0);
        // Refused (e.g. RLIMIT_NOFILE): entry commands name the fd itself, which works the same.
        self.stats.fixed_file = if (uring.fuw_register_fuse_fd(self.ring, fd) == 0) 1 else 0;
        const ev_rc = uring.fuw_register_eventfd(self.ring, self.event_fd);
        const off_rc = if (ev_rc == 0) uring.fuw_eventfd_enable(self.ring, 0) else ev_rc;
        if (off_rc < 0) {
            uring.fuw_exit(self.ring);
            err.* = off_rc;
            self.free();
            return null;
        }
        self.watcher = std.Thread.spawn(.{}, watch, .{self}) catch |e| {
            err.* = switch (e) {
                error.SystemResources, error.ThreadQuotaExceeded, error.LockedMemoryLimitExceeded => sys.neg(.AGAIN),
                error.OutOfMemory => sys.neg(.NOMEM),
                error.Unexpected => sys.neg(.INVAL),
            };
            uring.fuw_exit(self.ring);
            self.free();
            return null;
        };
        self.watcher.?.setName("fu-ring-watch") catch {}; // cosmetic
        return self;
    }

    fn allocate(self: *Ring, qids: []const u16, err: *i32) error{Failed}!void {
        const allocator = std.heap.page_allocator;
        const n = self.n;
        self.ring_mem = allocator.alignedAlloc(u8, .@"64", uring.fuw_ring_size()) catch return failErr(err, .NOMEM);
        assert(uring.fuw_ring_align() <= 64);
        self.ring = @ptrCast(self.ring_mem.ptr);
        self.reg_iovecs = allocator.alloc(RegIovec, 2 * @as(usize, n)) catch return failErr(err, .NOMEM);
        self.buf_iovecs = allocator.alloc(RegIovec, n) catch return failErr(err, .NOMEM);
        self.qids = allocator.alloc(u16, qids.len) catch return failErr(err, .NOMEM);
        @memcpy(self.qids, qids);
        self.state = allocator.alloc(EntryState, n) catch return failErr(err, .NOMEM);
        self.commit_ids = allocator.alloc(u64, n) catch return failErr(err, .NOMEM);
        self.js_io = allocator.alloc(bool, n) catch return failErr(err, .NOMEM);
        self.native_op = allocator.alloc(u8, n) catch return failErr(err, .NOMEM);
        self.native_fell_back = allocator.alloc(bool, n) catch return failErr(err, .NOMEM);
        self.retries = allocator.alloc(u8, n) catch return failErr(err, .NOMEM);
        self.bad_qid_pending = allocator.alloc(bool, n) catch return failErr(err, .NOMEM);
        self.live = allocator.alloc(u32, qids.len) catch return failErr(err, .NOMEM);
        self.queue_pool = allocator.alloc(bool, qids.len) catch return failErr(err, .NOMEM);
        self.queue_zc = allocator.alloc(bool, qids.len) catch return failErr(err, .NOMEM);
        @memset(self.queue_pool, false);
        @memset(self.queue_zc, false);
        @memset(self.state, .idle);
        @memset(self.commit_ids, 0);
        @memset(self.js_io, false);
        @memset(self.native_op, 0);
        @memset(self.native_fell_back, false);
        @memset(self.retries, 0);
        @memset(self.bad_qid_pending, self.setup_flags & fault_bad_commit_flag != 0);
        @memset(self.live, self.depth);
        // Pre-fault everything: the kernel copies requests in from task work and buffer
        // registration pins the payloads; neither should start by faulting pages in.
        self.headers = sys.mapAnon(sys.roundUp(@as(usize, n) * layout.header_stride, std.heap.page_size_min), true, err) orelse return error.Failed;
        // With a pool the per-entry payloads exist only if the kernel refuses it (start).
        // (Prefaulted only when every entry is pinned: else registration faults the pinned ones
        // in, and the unpinned ones stay untouched until used.)
        if (self.pool.len == 0) self.payloads = sys.mapAnon(@as(usize, n) * self.payload_size, self.pinned_depth == self.depth, err) orelse return error.Failed;
        const efd = sys.eventfdOpen(false);
        if (efd < 0) {
            err.* = efd;
            return error.Failed;
        }
        self.event_fd = efd;
    }

    fn free(self: *Ring) void {
        assert(self.watcher == null);
        const allocator = std.heap.page_allocator;
        if (self.event_fd >= 0) sys.closeFd(self.event_fd);
        if (self.payloads.len > 0 and !self.payloads_unsafe) sys.unmap(self.payloads);
        if (self.headers.len > 0) sys.unmap(self.headers);
        if (self.live.len > 0) allocator.free(self.live);
        if (self.queue_pool.len > 0) allocator.free(self.queue_pool);
        if (self.queue_zc.len > 0) allocator.free(self.queue_zc);
        if (self.bad_qid_pending.len > 0) allocator.free(self.bad_qid_pending);
        if (self.retries.len > 0) allocator.free(self.retries);
        if (self.native_op.len > 0) allocator.free(self.native_op);
        if (self.native_fell_back.len > 0) allocator.free(self.native_fell_back);
        if (self.js_io.len > 0) allocator.free(self.js_io);
        if (self.commit_ids.len > 0) allocator.free(self.commit_ids);
        if (self.state.len > 0) allocator.free(self.state);
        if (self.qids.len > 0) allocator.free(self.qids);
        if (self.buf_iovecs.len > 0) allocator.free(self.buf_iovecs);
        if (self.reg_iovecs.len > 0) allocator.free(self.reg_iovecs);
        if (self.ring_mem.len > 0) allocator.free(self.ring_mem);
        allocator.destroy(self);
    }

    /// Owner thread. Stops the watcher, reaps (bounded) the I/O still in flight on our payloads,
    /// then exits the ring, which cancels the entries the kernel holds: after that nothing is
    /// copied into our buffers and they can be unmapped.
    pub fn destroy(self: *Ring) void {
        self.stopWatcher();
        self.drainIo();
        uring.fuw_exit(self.ring);
        self.free();
    }

    fn stopWatcher(self: *Ring) void {
        if (self.watcher) |w| {
            @atomicStore(u32, &self.watcher_stop, 1, .seq_cst);
            sys.eventfdSignal(self.event_fd);
            w.join();
            self.watcher = null;
        }
    }

    pub fn header(self: *Ring, idx: u32) ?[*]u8 {
        if (idx >= self.n) return null;
        return self.headers.ptr + @as(usize, idx) * layout.header_stride;
    }

    /// The entry's own payload buffer; null for entries of a pool queue (their payload moves:
    /// `ent_in_out.offset` names it per request).
    pub fn payload(self: *Ring, idx: u32) ?[*]u8 {
        if (idx >= self.n or self.payloads.len == 0 or self.queue_pool[idx / self.depth]) return null;
        return self.payloads.ptr + @as(usize, idx) * self.payload_size;
    }

    /// Entry `idx` is one of its queue's pinned ones (see pinned_depth): the last ones. Entries
    /// are registered in index order and the kernel makes each one the head of its queue's
    /// available list, handing out the head first, so the last registered are used first.
    fn pinned(self: *const Ring, idx: u32) bool {
        return idx % self.depth >= self.depth - self.pinned_depth;
    }

    /// The registered-buffer table's slot of entry `idx`: its payload if pinned, else empty
    /// (a sparse slot: registration neither pins nor faults it in; it is never used as fixed).
    fn fixedIovec(self: *const Ring, idx: u32, pay: [*]u8) RegIovec {
        return if (self.pinned(idx)) .{ .base = pay, .len = self.payload_size } else .{ .base = null, .len = 0 };
    }

    /// Where the request in entry `idx` has its payload: the pool buffer at ent_in_out.offset
    /// (pool queues) or the entry's own buffer. null if the kernel's offset is outside the pool.
    fn entryBuf(self: *Ring, idx: u32) ?EntryBuf {
        const q = idx / self.depth;
        if (!self.queue_pool[q]) return .{ .ptr = self.payload(idx).?, .fixed = self.entry_table and self.pinned(idx), .index = idx };
        const off = std.mem.readInt(u32, self.header(idx).?[layout.pool_offset_offset..][0..4], .little);
        if (@as(u64, off) + self.payload_size > self.pool.len) return null;
        return .{ .ptr = @ptrFromInt(self.pool.base + @as(usize, q) * self.pool.len + off), .fixed = self.stats.pool_fixed == 1, .index = q };
    }

    // ---- buffer pools (FUSE 7.46, docs/BUFFERS.md) -----------------------------------------

    /// create(): the ring's registered-buffer table = [pool of queue 0 .. nq-1] + (zero-copy)
    /// one empty slot per entry (index nq + entry), where the kernel registers a zero-copy
    /// request's pages. Refused (RLIMIT_MEMLOCK…): unregistered pools, no zero-copy.
    fn registerPools(self: *Ring, want_fixed: bool) void {
        const nq = self.nr_queues;
        if (!want_fixed) {
            self.pool.zero_copy = false;
            return;
        }
        const slots = nq + if (self.pool.zero_copy) self.n else 0;
        var q: u32 = 0;
        while (q < nq) : (q += 1) self.buf_iovecs[q] = .{ .base = @ptrFromInt(self.pool.base + @as(usize, q) * self.pool.len), .len = self.pool.len };
        if (uring.fuw_register_buffers_sparse(self.ring, slots) == 0) {
            if (uring.fuw_update_buffers(self.ring, 0, @ptrCast(self.buf_iovecs.ptr), nq) == 0) {
                self.stats.pool_fixed = 1;
                self.stats.fixed_buffers = 1;
                return;
            }
            _ = uring.fuw_unregister_buffers(self.ring);
        }
        self.pool.zero_copy = false;
    }

    /// start(), before the first REGISTER: ADD_QUEUE (+ZERO_COPY) then ADD_BUFPOOL for every
    /// queue, waited for here (they complete inline). A queue whose pool is refused gets
    /// per-entry payloads (allocated now; the kernel allows that as long as the queue has no
    /// pool and no ZERO_COPY). Returns -errno only when a queue cannot serve at all.
    fn setupPools(self: *Ring) i32 {
        const nq = self.nr_queues;
        var res: [2]i32 = undefined;
        var q: u32 = 0;
        while (q < nq) : (q += 1) {
            var zc = self.pool.zero_copy;
            var rc = self.setupCmd(uring.fuse_cmd_add_queue, q, if (zc) uring.fuse_uring_zero_copy else 0);
            if (rc < 0 and zc) {
                // -EPERM: not CAP_SYS_ADMIN. The queue still gets a pool, without zero-copy.
                self.stats.zero_copy_error = rc;
                zc = false;
                rc = self.setupCmd(uring.fuse_cmd_add_queue, q, 0);
            }
            res[0] = rc;
            res[1] = if (rc == 0) self.setupCmd(uring.fuse_cmd_add_bufpool, q, 0) else rc;
            if (res[1] == 0) {
                self.queue_pool[q] = true;
                self.queue_zc[q] = zc;
                self.stats.pool_queues += 1;
                if (zc) self.stats.zero_copy_queues += 1;
            } else {
                self.stats.pool_refused += 1;
                self.stats.pool_error = res[1];
                // dev_uring.c: entries of a ZERO_COPY queue without a pool are refused.
                if (zc and res[0] == 0) return res[1];
            }
        }
        if (self.stats.pool_queues == nq) return 0;
        var err: i32 = 0;
        self.payloads = sys.mapAnon(@as(usize, self.n) * self.payload_size, self.pinned_depth == self.depth, &err) orelse return err;
        var i: u32 = 0;
        while (i < self.n) : (i += 1) {
            if (self.queue_pool[i / self.depth]) continue;
            const pay = self.payload(i).?;
            self.reg_iovecs[2 * i + 1] = .{ .base = pay, .len = self.payload_size };
            self.buf_iovecs[i] = self.fixedIovec(i, pay);
        }
        if (self.stats.pool_queues == 0 and self.setup_flags & no_fixed_buffers_flag == 0) {
            // No pool anywhere: the table becomes today's (payload of entry i at index i).
            if (self.stats.pool_fixed == 1) _ = uring.fuw_unregister_buffers(self.ring);
            self.stats.pool_fixed = 0;
            self.entry_table = uring.fuw_register_buffers(self.ring, @ptrCast(self.buf_iovecs.ptr), self.n) == 0;
            self.stats.fixed_buffers = @intFromBool(self.entry_table);
        }
        return 0;
    }

    /// One ADD_QUEUE/ADD_BUFPOOL, submitted and waited for (-EAGAIN: INIT reply not yet
    /// processed, retried for up to ~1 s).
    fn setupCmd(self: *Ring, cmd_op: u32, q: u32, flags: u64) i32 {
        var tries: u32 = 0;
        while (true) : (tries += 1) {
            const sqe = uring.fuw_get_sqe(self.ring) orelse return sys.neg(.BUSY);
            uring.fuw_prep_fuse_cmd(sqe, self.fuseFd(), @intCast(self.stats.fixed_file), cmd_op, 0, 0, 0, self.qids[q], ud_setup | q);
            if (cmd_op == uring.fuse_cmd_add_bufpool) {
                const len: u32 = if (self.pool.refuse) 4096 else self.pool.len;
                uring.fuw_fuse_cmd_746(sqe, 0, self.pool.base + @as(usize, q) * self.pool.len, len, @intCast(self.stats.pool_fixed), @intCast(q));
            } else uring.fuw_fuse_cmd_746(sqe, flags, 0, 0, 0, 0);
            const sub = uring.fuw_submit(self.ring);
            self.stats.enters += 1;
            if (sub < 0) return sub;
            var cqe: *uring.Cqe = undefined;
            const wrc = uring.fuw_wait_cqe(self.ring, &cqe);
            if (wrc < 0) return wrc;
            // Nothing else is in flight before the first REGISTER.
            assert(cqe.user_data == ud_setup | q);
            const rc = cqe.res;
            uring.fuw_cq_advance(self.ring, 1);
            if (rc == sys.neg(.AGAIN) and tries < 1000) {
                std.Thread.sleep(std.time.ns_per_ms);
                continue;
            }
            return rc;
        }
    }

    /// Queues REGISTER for every entry (submitted by the next enter); after the INIT reply.
    pub fn start(self: *Ring) i32 {
        if (self.started) return sys.neg(.ALREADY);
        self.started = true;
        if (self.pool.len > 0) {
            const rc = self.setupPools();
            if (rc < 0) return rc;
        }
        var i: u32 = 0;
        while (i < self.n) : (i += 1) self.prepRegister(i);
        return 0;
    }

    /// Submits what is queued, runs the kernel's task work and reaps completions, serving
    /// native requests in place. Returns how many records it wrote to `out` (requests and I/O
    /// completions for JS, STOPPED last). With `wait_us` > 0 it blocks until there is something
    /// for JS or the wait timer expires (armed for `wait_us` when none is queued, so one enter
    /// waits at most that long); 0 never blocks.
    pub fn enter(self: *Ring, out: [*]Completion, max: u32, wait_us: u32) u32 {
        assert(max >= 2 * self.n + 1);
        self.out = out;
        self.out_len = 0;
        self.out_max = max;
        if (self.stopped) return 0;
        self.timer_fired = false;
        while (true) {
            // Block only with a wait timer in the kernel: it is what ends a wait with nothing
            // for JS (the timer is not re-armed per wait: that cost an hrtimer arm and cancel
            // on every io_uring_enter, docs/ARCHITECTURE.md). If none can be queued, poll.
            const block = wait_us > 0 and (self.timer_live or self.armTimer(wait_us));
            const rc = if (block) uring.fuw_submit_and_wait(self.ring, 1) else uring.fuw_submit_and_get_events(self.ring);
            self.stats.enters += 1;
            if (rc < 0) switch (sys.errnoOfNeg(rc)) {
                // INTR: a signal; AGAIN/BUSY: CQ overflow backlog or a transient kernel
                // shortage — reaping below resolves both.
                .TIME, .INTR, .AGAIN, .BUSY => {},
                else => {
                    self.stats.errors += 1;
                    self.finish(rc);
                    return self.out_len;
                },
            };
            self.reap();
            // A blocking wait ends with records for JS, the timer's expiry (JS then goes idle or
            // runs its event loop: timers, signals, the classic reader's doorbell), or the end.
            // (Released slots wait for the next of these: JS collects them then, at most one
            // wait period later — returning for them alone cost an enter per closed file.)
            if (self.stopped or self.out_len > 0 or !block or self.timer_fired) break;
            assert(self.timer_live);
        }
        // Native replies queued by the last reap go out now, not after JS's batch.
        if (uring.fuw_sq_ready(self.ring) > 0 and !self.stopped) {
            const rc = uring.fuw_submit(self.ring);
            self.stats.enters += 1;
            if (rc < 0 and rc != sys.neg(.INTR) and rc != sys.neg(.AGAIN) and rc != sys.neg(.BUSY)) {
                self.stats.errors += 1;
                self.finish(rc);
            }
        }
        return self.out_len;
    }

    fn reap(self: *Ring) void {
        var cqes: [64]*uring.Cqe = undefined;
        while (true) {
            const got = uring.fuw_peek_batch(self.ring, &cqes, cqes.len);
            if (got == 0) break;
            for (cqes[0..got], 0..) |cqe, i| {
                self.batch_left = got - @as(u32, @intCast(i)) - 1;
                self.handleCqe(cqe.user_data, cqe.res);
            }
            self.batch_left = 0;
            uring.fuw_cq_advance(self.ring, got);
            self.stats.cqes += got;
        }
    }

    fn push(self: *Ring, c: Completion) void {
        assert(self.out_len < self.out_max);
        self.out[self.out_len] = c;
        self.out_len += 1;
    }

    /// Queues the wait timer (submitted by the caller's next enter). False if no SQE is free.
    fn armTimer(self: *Ring, wait_us: u32) bool {
        assert(!self.timer_live);
        const sqe = self.getSqe() orelse return false;
        self.wait_ts = .{ .sec = @intCast(wait_us / 1_000_000), .nsec = @as(i64, wait_us % 1_000_000) * 1000 };
        uring.fuw_prep_timeout(sqe, &self.wait_ts, ud_timer);
        self.timer_live = true;
        self.stats.wait_timers += 1;
        return true;
    }

    pub fn setNativeSyncMax(self: *Ring, bytes: u32) void {
        self.native_sync_max = bytes;
    }

    pub fn setDirectSync(self: *Ring, on: bool) void {
        self.direct_sync = on;
    }

    /// Policy: which native reads/writes run synchronously on the owner thread. Buffered
    /// handles up to `native_sync_max` (page-cache hits and tmpfs answer in microseconds, and
    /// io_uring would punt files without FMODE_NOWAIT to an io-wq worker); direct handles wait
    /// for the device, so they are submitted and answered from the completion.
    /// A direct transfer still runs synchronously when it is all this ring has to do (the only
    /// request held, nothing else reaped behind it): at one request in flight the pread skips
    /// a submit-and-complete round (4 KiB QD1 O_DIRECT randrw, ext4: +10% IOPS, measured).
    fn syncTransfer(self: *const Ring, h: dataplane.Handle, size: u32) bool {
        if (!h.direct) return size <= self.native_sync_max;
        return self.direct_sync or (self.held == 1 and self.batch_left == 0);
    }

    /// Owner thread: true when going back to the event loop (the kernel then signals the
    /// eventfd on the next request or completion and the watcher rings the doorbell once).
    pub fn setIdle(self: *Ring, idle: bool) i32 {
        if (idle) {
            self.bell.disarm();
            self.stats.idles += 1;
        }
        return uring.fuw_eventfd_enable(self.ring, @intFromBool(idle));
    }

    /// Queues COMMIT_AND_FETCH for an entry JS holds. -EINVAL: not held by JS; -EBUSY: JS I/O
    /// on its payload is still running (answering now would let the kernel reuse the buffer
    /// under the I/O).
    pub fn commit(self: *Ring, idx: u32) i32 {
        if (idx >= self.n or self.state[idx] != .js) return sys.neg(.INVAL);
        if (self.js_io[idx]) return sys.neg(.BUSY);
        self.prepCommit(idx);
        return 0;
    }

    /// Backing I/O for a JS-held entry: read (1) into / write (2) from its payload. The result
    /// comes back as an IO_DONE record from a later enter.
    pub fn io(self: *Ring, kind: u32, idx: u32, fd: i32, off: u64, len: u32) i32 {
        if (kind != 1 and kind != 2) return sys.neg(.INVAL);
        if (idx >= self.n or self.state[idx] != .js or fd < 0 or len > self.payload_size) return sys.neg(.INVAL);
        if (self.js_io[idx]) return sys.neg(.BUSY);
        const buf = self.entryBuf(idx) orelse return sys.neg(.INVAL);
        const sqe = self.getSqe() orelse return sys.neg(.BUSY);
        uring.fuw_prep_rw(sqe, @intFromBool(kind == 2), @intFromBool(buf.fixed), fd, buf.ptr, len, off, buf.index, ud_js_io | idx);
        self.js_io[idx] = true;
        self.js_io_inflight += 1;
        self.stats.io_ops += 1;
        return 0;
    }

    // ---- completions ------------------------------------------------------------------

    fn handleCqe(self: *Ring, user_data: u64, res: i32) void {
        if (user_data == ud_cancel) return;
        if (user_data == ud_timer) {
            // -ETIME: expired; -ECANCELED: cancelled at teardown. Either way it is gone.
            assert(self.timer_live);
            self.timer_live = false;
            if (res == sys.neg(.TIME)) self.timer_fired = true;
            return;
        }
        const idx: u32 = @truncate(user_data);
        assert(idx < self.n);
        switch (user_data & ud_tag_mask) {
            ud_js_io => {
                assert(self.state[idx] == .js and self.js_io[idx]);
                self.js_io[idx] = false;
                self.js_io_inflight -= 1;
                self.push(.{ .kind = .io_done, .idx = idx, .res = res });
            },
            ud_native => self.finishNative(idx, res),
            0 => self.entryCompleted(idx, res),
            else => unreachable,
        }
    }

    fn entryCompleted(self: *Ring, idx: u32, res: i32) void {
        const st = self.state[idx];
        assert(st == .registering or st == .waiting);
        if (res == 0) {
            const commit_id = layout.readCommitId(self.header(idx).?);
            if (commit_id == 0) {
                // The kernel never issues unique 0; committing it could never complete a
                // request, so the entry is registered again instead.
                self.stats.errors += 1;
                return self.recover(idx, sys.neg(.PROTO));
            }
            self.retries[idx] = 0;
            self.commit_ids[idx] = commit_id;
            self.stats.requests += 1;
            self.held += 1;
            if (self.held > self.stats.inflight_max) self.stats.inflight_max = self.held;
            if (self.serveNative(idx)) return;
            if (self.entFlags(idx) & uring.fuse_uring_ent_zero_copy != 0) {
                // Zero-copy pages but no native handle (released meanwhile): JS has no view of
                // them and the pool has no buffer for a READ. Answer EIO here.
                self.state[idx] = .native;
                self.native_op[idx] = @intCast(std.mem.readInt(u32, self.header(idx).?[4..8], .little));
                self.native_inflight += 1;
                return self.finishNative(idx, sys.neg(.IO));
            }
            self.state[idx] = .js;
            self.push(.{ .kind = .request, .idx = idx, .res = 0 });
            return;
        }
        switch (sys.errnoOfNeg(res)) {
            // REGISTER before the INIT reply was processed, or an interrupted command: again.
            .AGAIN, .INTR => if (st == .registering) self.prepRegister(idx) else self.prepCommitSqe(idx),
            // Normal end: unmount/abort, or the ring's task is exiting.
            .NOTCONN, .CONNABORTED, .CANCELED => self.kill(idx, res),
            // EINVAL (bad qid/iovec), ENOENT (unknown commit_id), EIO, EFAULT, ENOMEM…
            else => {
                self.stats.errors += 1;
                self.recover(idx, res);
            },
        }
    }

    /// An entry whose command failed unexpectedly. A failed COMMIT left the reply unread, so it
    /// is sent once more (a transient failure then still answers the caller); after that, and
    /// for a failed REGISTER, the entry is registered again (only a new REGISTER gives the
    /// queue its slot back), up to max_reregister times in a row; then it is dead.
    fn recover(self: *Ring, idx: u32, res: i32) void {
        const was_commit = self.state[idx] == .waiting;
        if (self.retries[idx] >= max_reregister) return self.kill(idx, res);
        self.retries[idx] += 1;
        self.stats.recovered += 1;
        if (was_commit and self.retries[idx] == 1) self.prepCommitSqe(idx) else self.prepRegister(idx);
    }

    fn kill(self: *Ring, idx: u32, res: i32) void {
        assert(self.state[idx] != .dead);
        self.state[idx] = .dead;
        self.dead_count += 1;
        self.last_dead_res = res;
        self.stats.dead += 1;
        const q = idx / self.depth;
        self.live[q] -= 1;
        const normal = res == sys.neg(.NOTCONN) or res == sys.neg(.CONNABORTED) or res == sys.neg(.CANCELED);
        // A queue without entries would leave every caller on that CPU waiting forever.
        if (self.live[q] == 0 and !normal) return self.finish(res);
        if (self.dead_count == self.n) self.finish(self.last_dead_res);
    }

    fn finish(self: *Ring, res: i32) void {
        if (self.stopped) return;
        self.stopped = true;
        self.push(.{ .kind = .stopped, .idx = 0, .res = res });
    }

    // ---- native data plane ------------------------------------------------------------

    fn serveNative(self: *Ring, idx: u32) bool {
        const dp = self.dp orelse return false;
        const hdr = self.header(idx).?;
        const opcode = std.mem.readInt(u32, hdr[4..8], .little);
        if (opcode == dataplane.op_flush) return self.flushNative(dp, idx);
        if (opcode == dataplane.op_getattr) return self.getattrNative(dp, idx);
        if (opcode == dataplane.op_release) return self.releaseNative(dp, idx);
        if (opcode == dataplane.op_lookup) return self.lookupNative(dp, idx);
        if (!dataplane.servedOp(opcode)) return false;
        const op_in = hdr + layout.op_in_offset;
        const fh = std.mem.readInt(u64, op_in[0..8], .little);
        const h = dp.lookup(fh) orelse return false;
        self.beginNative(idx, opcode);
        if (h.direct) self.stats.native_direct += 1;
        self.prepNativeIo(idx, h);
        return true;
    }

    /// The entry is the shim's from now on until finishNative answers it.
    fn beginNative(self: *Ring, idx: u32, opcode: u32) void {
        self.state[idx] = .native;
        self.native_op[idx] = @intCast(opcode);
        self.native_fell_back[idx] = false;
        self.stats.native_requests += 1;
        self.native_inflight += 1;
        if (self.native_inflight > self.stats.native_inflight_max) self.stats.native_inflight_max = self.native_inflight;
    }

    /// A request the shim answered synchronously (no backing I/O in flight): taken and answered
    /// in one step, `res` being the answer's error or payload length.
    fn answerNative(self: *Ring, idx: u32, opcode: u32, res: i64) void {
        self.beginNative(idx, opcode);
        self.finishNative(idx, @intCast(res));
    }

    /// FLUSH of a mode_flush handle, synchronously (a dup and a close). False: JS answers it
    /// (not such a handle, or no descriptor free for the dup: the flush handler can make room).
    fn flushNative(self: *Ring, dp: *const DataPlane, idx: u32) bool {
        const op_in = self.header(idx).? + layout.op_in_offset;
        const h = dp.lookup(std.mem.readInt(u64, op_in[0..8], .little)) orelse return false;
        if (h.flush_fd < 0) return false;
        const res = dataplane.flush(h.flush_fd) orelse return false;
        self.stats.native_flushes += 1;
        self.answerNative(idx, dataplane.op_flush, res);
        return true;
    }

    /// RELEASE of a mode_release handle, synchronously (a close), when the owner collects
    /// released slots and has room for one more. False: JS answers it (also a release that
    /// must unlock flock locks: the filesystem's release handler does that).
    fn releaseNative(self: *Ring, dp: *DataPlane, idx: u32) bool {
        const list = &self.released;
        if (list.enabled == 0 or list.count == released_cap) return false;
        const op_in = self.header(idx).? + layout.op_in_offset;
        // struct fuse_release_in: fh u64, flags u32, release_flags u32, lock_owner u64.
        if (std.mem.readInt(u32, op_in[12..16], .little) != 0) return false;
        const fh = std.mem.readInt(u64, op_in[0..8], .little);
        const res = dp.release(fh) orelse return false;
        list.slots[list.count] = @intCast(fh - dataplane.fh_tag);
        list.count += 1;
        self.stats.native_releases += 1;
        self.answerNative(idx, dataplane.op_release, res);
        return true;
    }

    /// LOOKUP of a name missing from a directory in the node table, synchronously (one statx).
    /// False: JS answers it (see NodeTable.lookupMissing; also no payload buffer).
    fn lookupNative(self: *Ring, dp: *const DataPlane, idx: u32) bool {
        const t = dp.nodeTable() orelse return false;
        const b = self.entryBuf(idx) orelse return false;
        comptime assert(dataplane.entry_out_size <= 4096); // payload_size is at least a page
        const hdr = self.header(idx).?;
        const len = std.mem.readInt(u32, hdr[layout.payload_sz_offset..][0..4], .little);
        if (len > self.payload_size) return false;
        const nodeid = std.mem.readInt(u64, hdr[layout.nodeid_offset..][0..8], .little);
        const res = t.lookupMissing(nodeid, b.ptr, len, b.ptr) orelse return false;
        self.stats.native_lookups += 1;
        self.answerNative(idx, dataplane.op_lookup, res);
        return true;
    }

    /// GETATTR of a node in the data plane's node table, synchronously (one statx). False: JS
    /// answers it (no table, node not in it, the statx failed, or no payload buffer).
    fn getattrNative(self: *Ring, dp: *const DataPlane, idx: u32) bool {
        const t = dp.nodeTable() orelse return false;
        const b = self.entryBuf(idx) orelse return false;
        comptime assert(dataplane.attr_out_size <= 4096); // payload_size is at least a page
        const nodeid = std.mem.readInt(u64, self.header(idx).?[layout.nodeid_offset..][0..8], .little);
        const res = t.getattr(nodeid, b.ptr) orelse return false;
        self.stats.native_getattrs += 1;
        self.answerNative(idx, dataplane.op_getattr, res);
        return true;
    }

    fn entFlags(self: *Ring, idx: u32) u64 {
        return std.mem.readInt(u64, self.header(idx).?[layout.ent_in_out_offset..][0..8], .little);
    }

    /// The buffered twin of a direct handle: where a request goes once the direct descriptor
    /// refused it (EINVAL). Its fallback is -1, so it never falls back again.
    fn buffered(h: dataplane.Handle) dataplane.Handle {
        return .{ .fd = h.fallback, .fallback = -1, .direct = false };
    }

    fn prepNativeIo(self: *Ring, idx: u32, h: dataplane.Handle) void {
        const fd = h.fd;
        const hdr = self.header(idx).?;
        const op_in = hdr + layout.op_in_offset;
        const opcode: u32 = self.native_op[idx];
        const offset = std.mem.readInt(u64, op_in[8..16], .little);
        const size = std.mem.readInt(u32, op_in[16..20], .little);
        const payload_sz = std.mem.readInt(u32, hdr[layout.payload_sz_offset..][0..4], .little);
        if (opcode != dataplane.op_fsync and (size > self.payload_size or (opcode == dataplane.op_write and size > payload_sz))) {
            // The kernel never sends more than max_write/max_pages; answer EIO rather than
            // touch memory past the payload.
            return self.finishNative(idx, sys.neg(.IO));
        }
        // Zero-copy requests (FUSE_URING_ENT_ZERO_COPY) always go as READ_FIXED/WRITE_FIXED at
        // the entry's kernel-buffer slot, direct handle or not: their pages have no user address
        // a synchronous pread could use. A direct one refused with EINVAL goes again, zero-copy,
        // on the buffered descriptor (finishNative; docs/DATAPLANE.md).
        const zc = opcode != dataplane.op_fsync and self.entFlags(idx) & uring.fuse_uring_ent_zero_copy != 0;
        if (zc) return self.prepZeroCopyIo(idx, fd, opcode, offset, size);
        const buf = self.entryBuf(idx) orelse return self.finishNative(idx, sys.neg(.IO));
        if (opcode != dataplane.op_fsync and self.syncTransfer(h, size)) {
            // Synchronously on this thread, as libfuse does (see syncTransfer).
            const res = dataplane.transfer(fd, opcode, buf.ptr, size, offset);
            self.stats.native_sync += 1;
            return self.finishNative(idx, @intCast(res));
        }
        const sqe = self.getSqe() orelse return self.finishNative(idx, sys.neg(.BUSY));
        if (opcode == dataplane.op_fsync) {
            const datasync = std.mem.readInt(u32, op_in[8..12], .little) & 1;
            uring.fuw_prep_fsync(sqe, fd, @intCast(datasync), ud_native | idx);
        } else {
            uring.fuw_prep_rw(sqe, @intFromBool(opcode == dataplane.op_write), @intFromBool(buf.fixed), fd, buf.ptr, size, offset, buf.index, ud_native | idx);
            self.stats.native_async += 1;
        }
        self.stats.io_ops += 1;
    }

    /// Zero-copy READ/WRITE: the kernel registered the client's pages at this entry's slot of
    /// the buffer table (nr_queues + entry, an io_uring kernel buffer whose addresses start at
    /// 0): READ_FIXED/WRITE_FIXED between the backing fd and those pages, no pool buffer.
    fn prepZeroCopyIo(self: *Ring, idx: u32, fd: i32, opcode: u32, offset: u64, size: u32) void {
        assert(self.queue_zc[idx / self.depth]);
        const sqe = self.getSqe() orelse return self.finishNative(idx, sys.neg(.BUSY));
        uring.fuw_prep_rw(sqe, @intFromBool(opcode == dataplane.op_write), 1, fd, null, size, offset, self.zeroCopyIndex(idx), ud_native | idx);
        if (!self.native_fell_back[idx]) {
            self.stats.zero_copy_requests += 1;
            self.stats.zero_copy_bytes += size;
        }
        self.stats.native_async += 1;
        self.stats.io_ops += 1;
    }

    fn zeroCopyIndex(self: *const Ring, idx: u32) u32 {
        return self.nr_queues + idx;
    }

    fn finishNative(self: *Ring, idx: u32, first_res: i32) void {
        assert(self.state[idx] == .native);
        const hdr = self.header(idx).?;
        const opcode: u32 = self.native_op[idx];
        var r = first_res;
        // (Only I/O is retried: a FLUSH's or RELEASE's close is never repeated, GETATTR is final.)
        if (dataplane.servedOp(opcode) and (r == sys.neg(.INTR) or r == sys.neg(.AGAIN) or r == sys.neg(.INVAL))) {
            const op_in = hdr + layout.op_in_offset;
            const fh = std.mem.readInt(u64, op_in[0..8], .little);
            if (self.dp.?.lookup(fh)) |found| {
                // After a fallback the request lives on the buffered descriptor (retries too).
                const h = if (self.native_fell_back[idx]) buffered(found) else found;
                if (r != sys.neg(.INVAL)) return self.prepNativeIo(idx, h);
                if (dataplane.wantsFallback(h, opcode, r)) {
                    self.stats.direct_fallbacks += 1;
                    self.native_fell_back[idx] = true;
                    if (self.entFlags(idx) & uring.fuse_uring_ent_zero_copy != 0) {
                        // No user address for the client's pages: READ_FIXED/WRITE_FIXED again.
                        return self.prepNativeIo(idx, buffered(h));
                    }
                    // The size was checked against the payload before the first attempt.
                    const size = std.mem.readInt(u32, op_in[16..20], .little);
                    assert(size <= self.payload_size);
                    const offset = std.mem.readInt(u64, op_in[8..16], .little);
                    if (self.entryBuf(idx)) |b| {
                        r = @intCast(dataplane.transfer(h.fallback, opcode, b.ptr, size, offset));
                    } else r = sys.neg(.IO);
                }
            }
        }
        // Only a successful WRITE writes payload (its write_out; the kernel gives WRITEs a pool
        // buffer even on zero-copy). A zero-copy READ has no buffer at all.
        var pay: [*]u8 = hdr; // not written unless r >= 0 and WRITE
        if (r >= 0 and (opcode == dataplane.op_write or opcode == dataplane.op_getattr or opcode == dataplane.op_lookup)) {
            if (self.entryBuf(idx)) |b| pay = b.ptr else r = sys.neg(.IO);
        }
        var tally: dataplane.Tally = .{};
        const out_len = dataplane.encodeAnswer(hdr, pay, opcode, r, &tally);
        self.stats.native_errors += tally.errors;
        self.stats.native_read_bytes += tally.read_bytes;
        self.stats.native_write_bytes += tally.write_bytes;
        std.mem.writeInt(u32, hdr[layout.payload_sz_offset..][0..4], out_len, .little);
        self.native_inflight -= 1;
        self.state[idx] = .js; // for prepCommit's bookkeeping
        self.prepCommit(idx);
    }

    // ---- SQEs -------------------------------------------------------------------------

    /// An SQE, submitting queued ones first if the SQ is full. null only if the kernel takes no
    /// SQEs at all (the next enter then reports the error).
    fn getSqe(self: *Ring) ?*uring.Sqe {
        if (uring.fuw_get_sqe(self.ring)) |sqe| return sqe;
        _ = uring.fuw_submit(self.ring);
        self.stats.enters += 1;
        return uring.fuw_get_sqe(self.ring);
    }

    /// What entry commands put in sqe->fd: index 0 of the fixed files, or the fd.
    fn fuseFd(self: *const Ring) i32 {
        return if (self.stats.fixed_file == 1) 0 else self.fd;
    }

    fn prepRegister(self: *Ring, idx: u32) void {
        const sqe = self.getSqe() orelse return self.kill(idx, sys.neg(.BUSY));
        const q = idx / self.depth;
        uring.fuw_prep_fuse_cmd(sqe, self.fuseFd(), @intCast(self.stats.fixed_file), uring.fuse_cmd_register, @intFromPtr(&self.reg_iovecs[2 * idx]), 2, 0, self.qids[q], idx);
        if (self.queue_pool[q]) uring.fuw_fuse_cmd_746(sqe, 0, if (self.queue_zc[q]) self.zeroCopyIndex(idx) else 0, 0, @intCast(self.stats.pool_fixed), @intCast(q));
        self.state[idx] = .registering;
    }

    fn prepCommit(self: *Ring, idx: u32) void {
        assert(self.state[idx] == .js and !self.js_io[idx]);
        assert(self.held > 0);
        self.held -= 1;
        self.prepCommitSqe(idx);
    }

    fn prepCommitSqe(self: *Ring, idx: u32) void {
        const sqe = self.getSqe() orelse return self.kill(idx, sys.neg(.BUSY));
        var qid = self.qids[idx / self.depth];
        if (self.bad_qid_pending[idx]) {
            // Fault injection (tests): the kernel rejects this COMMIT with -EINVAL before
            // looking at the request, so recovery must send the same reply again.
            self.bad_qid_pending[idx] = false;
            qid = 0xffff;
        }
        uring.fuw_prep_fuse_cmd(sqe, self.fuseFd(), @intCast(self.stats.fixed_file), uring.fuse_cmd_commit_and_fetch, 0, 0, self.commit_ids[idx], qid, idx);
        const q = idx / self.depth;
        if (self.queue_pool[q]) uring.fuw_fuse_cmd_746(sqe, 0, 0, 0, @intCast(self.stats.pool_fixed), @intCast(q));
        self.state[idx] = .waiting;
        self.stats.commits += 1;
    }

    /// Teardown with READ/WRITE in flight: an io-wq worker may still write through the
    /// payload's addresses, so cancel and reap (bounded: a read from a pipe may never end);
    /// what is left marks the payloads unsafe to unmap (leaked instead).
    fn drainIo(self: *Ring) void {
        if (self.js_io_inflight + self.native_inflight == 0) return;
        if (self.getSqe()) |sqe| uring.fuw_prep_cancel_all(sqe, ud_cancel);
        var waited: u32 = 0;
        while (self.js_io_inflight + self.native_inflight > 0 and waited < io_drain_budget_ms) : (waited += 100) {
            _ = uring.fuw_submit_and_wait_ms(self.ring, 100);
            var cqes: [64]*uring.Cqe = undefined;
            while (true) {
                const got = uring.fuw_peek_batch(self.ring, &cqes, cqes.len);
                if (got == 0) break;
                for (cqes[0..got]) |cqe| {
                    const tag = cqe.user_data & ud_tag_mask;
                    if (cqe.user_data == ud_cancel or tag == 0) continue;
                    const idx: u32 = @truncate(cqe.user_data);
                    if (tag == ud_js_io and self.js_io[idx]) {
                        self.js_io[idx] = false;
                        self.js_io_inflight -= 1;
                    } else if (tag == ud_native and self.state[idx] == .native) {
                        self.state[idx] = .dead;
                        self.native_inflight -= 1;
                    }
                }
                uring.fuw_cq_advance(self.ring, got);
            }
        }
        if (self.js_io_inflight + self.native_inflight > 0) {
            self.payloads_unsafe = true;
            self.stats.errors += 1;
        }
    }

    // ---- watcher thread ---------------------------------------------------------------

    fn watch(self: *Ring) void {
        sys.blockSignals();
        var value: u64 = 0;
        while (true) {
            const rc = linux.read(self.event_fd, std.mem.asBytes(&value), 8);
            switch (sys.errnoOf(rc)) {
                .SUCCESS => {},
                .INTR => continue,
                // The eventfd is ours and blocking: any other error is a programming error.
                else => |e| std.debug.panic("ring eventfd read failed: {s}", .{@tagName(e)}),
            }
            if (@atomicLoad(u32, &self.watcher_stop, .seq_cst) != 0) return;
            if (self.bell.ring()) _ = @atomicRmw(u64, &self.stats.wakeups, .Add, 1, .monotonic);
        }
    }
};

fn fail(err: *i32, e: sys.E) ?*Ring {
    err.* = sys.neg(e);
    return null;
}

fn failErr(err: *i32, e: sys.E) error{Failed} {
    err.* = sys.neg(e);
    return error.Failed;
}
