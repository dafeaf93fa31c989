//! FUSE-over-io_uring transport: one native thread owns one io_uring (SQE128) that carries every
//! entry of every queue (docs/KERNEL.md §4: one ring may serve all qids).
//!
//! The ring is created *inside* the thread, so SINGLE_ISSUER/DEFER_TASKRUN hold (the creating
//! task is the only submitter) and the kernel's task work that copies requests into our buffers
//! runs on this thread while it waits with GETEVENTS.
//!
//! Entry ownership: kernel (REGISTER/COMMIT in flight) → completion queue → JS (held, after pop)
//! → command queue (commit) → kernel. I/O commands run only while JS holds the entry, one at a
//! time. So at most n REQUEST + n IO_DONE + 1 STOPPED completions and n commits + n I/Os are
//! queued at once: the queues are sized for that and never overflow.
//!
//! Threads: JS owns pop/commit/io/kick and `js_*`; the ring thread owns the io_uring, `state`,
//! `commit_ids` and every stats counter.

const std = @import("std");
const assert = std.debug.assert;

const sys = @import("sys.zig");
const queue = @import("queue.zig");
const bell_mod = @import("bell.zig");
const layout = @import("layout.zig");
const uring = @import("uring.zig");

const Completion = queue.Completion;
const Command = queue.Command;

pub const Stats = extern struct {
    /// io_uring_enter calls (submit+wait batches).
    submits: u64 = 0,
    cqes: u64 = 0,
    /// Doorbell calls.
    wakeups: u64 = 0,
    /// REQUEST completions pushed (requests served over the ring).
    requests: u64 = 0,
    /// COMMIT_AND_FETCH SQEs prepared.
    commits: u64 = 0,
    /// READ/WRITE(_FIXED) SQEs prepared.
    io_ops: u64 = 0,
    /// Unexpected CQE results / failures (not counting the normal -ENOTCONN shutdown).
    errors: u64 = 0,
    /// Entries that completed for good (shutdown or error).
    dead: u64 = 0,
    /// 1 if the payloads are registered fixed buffers (READ_FIXED/WRITE_FIXED), else 0.
    fixed_buffers: u64 = 0,
};

const EntryState = enum(u8) {
    /// Not yet REGISTERed (before fu_ring_start).
    idle,
    /// REGISTER in flight.
    registering,
    /// COMMIT_AND_FETCH in flight.
    committing,
    /// Holds a request; belongs to JS until it commits.
    held,
    /// Completed with an error; never used again.
    dead,
};

/// user_data: entry commands carry the entry index, I/O ops the index with this tag.
const ud_io_tag: u64 = 1 << 32;
const ud_wake: u64 = std.math.maxInt(u64);
const ud_cancel: u64 = std.math.maxInt(u64) - 1;

/// Not an io_uring flag: set in fu_ring_create's setup_flags to skip fixed-buffer registration
/// (benchmarks compare fixed against plain READ/WRITE on the same memory).
pub const no_fixed_buffers_flag: u32 = 1 << 31;

/// How long teardown waits for canceled READ/WRITEs before giving their memory up for lost.
const io_drain_budget_ms: u32 = 1000;

/// struct io_uring lives on the ring thread's stack in this reservation (checked at run time
/// against sizeof(struct io_uring) from C).
const ring_reservation = 512;

pub const Ring = struct {
    fd: i32,
    wake_fd: i32,
    nr_queues: u32,
    depth: u32,
    n: u32,
    payload_size: u32,
    setup_flags: u32,
    headers: []align(std.heap.page_size_min) u8,
    payloads: []align(std.heap.page_size_min) u8,
    /// REGISTER iovecs, one {header, payload} pair per entry (the kernel copies them at issue).
    reg_iovecs: []std.posix.iovec,
    /// One iovec per payload for io_uring_register_buffers (buf_index = entry).
    buf_iovecs: []std.posix.iovec,

    completions: queue.Spsc(Completion),
    commands: queue.Spsc(Command),
    completion_cells: []Completion,
    command_cells: []Command,

    // JS thread only.
    js_held: []bool,
    js_io_pending: []bool,

    // Ring thread only.
    state: []EntryState,
    commit_ids: []u64,
    dead_count: u32 = 0,
    last_dead_res: i32 = 0,
    wake_buf: u64 = 0,
    /// The eventfd read could not be re-armed: JS could no longer wake the thread.
    wake_broken: bool = false,
    wake_res: i32 = 0,
    /// READ/WRITE SQEs whose CQE has not arrived.
    io_inflight: u32 = 0,
    /// Set (before the thread exits) when teardown could not reap every READ/WRITE: destroy
    /// then leaks the payload mapping instead of unmapping memory a worker may still write.
    payloads_unsafe: bool = false,

    // Cross-thread.
    bell: bell_mod.Bell,
    start_requested: u32 = 0,
    stop_requested: u32 = 0,
    /// Ring thread sets it before blocking in io_uring_enter; kick writes the eventfd only then.
    sleeping: u32 = 0,
    /// After ringing the doorbell, wait this long for JS's replies in user space before
    /// blocking (0 = never): a reply that arrives meanwhile needs no eventfd write and no
    /// wake-up of this thread. Set by fu_ring_set_spin.
    spin_ns: u64 = 0,
    init_done: std.Thread.ResetEvent = .{},
    init_result: i32 = 0,
    thread: ?std.Thread = null,
    stats: Stats = .{},

    pub fn create(fd: i32, nr_queues: u32, depth: u32, payload_size: u32, setup_flags: u32, doorbell: bell_mod.Fn, err: *i32) ?*Ring {
        if (fd < 0) return fail(err, .BADF);
        if (nr_queues == 0 or depth == 0 or nr_queues > 4096 or depth > 4096) return fail(err, .INVAL);
        const n64 = @as(u64, nr_queues) * depth;
        // SQ must hold every REGISTER plus the wake-up read in one go.
        if (n64 + 8 > uring.max_sq_entries) return fail(err, .INVAL);
        const n: u32 = @intCast(n64);
        // The kernel wants payload iovecs >= max(8192, max_write, max_pages * 4096).
        if (payload_size < 8192 or payload_size % 4096 != 0) return fail(err, .INVAL);

        const allocator = std.heap.page_allocator;
        const self = allocator.create(Ring) catch return fail(err, .NOMEM);
        self.* = .{
            .fd = fd,
            .wake_fd = -1,
            .nr_queues = nr_queues,
            .depth = depth,
            .n = n,
            .payload_size = payload_size,
            .setup_flags = setup_flags,
            .headers = &.{},
            .payloads = &.{},
            .reg_iovecs = &.{},
            .buf_iovecs = &.{},
            .completions = undefined,
            .commands = undefined,
            .completion_cells = &.{},
            .command_cells = &.{},
            .js_held = &.{},
            .js_io_pending = &.{},
            .state = &.{},
            .commit_ids = &.{},
            .bell = .{ .func = doorbell, .source = .ring },
        };
        if (self.allocate(err)) |_| {} else |_| {
            self.free();
            return null;
        }
        self.completions = queue.Spsc(Completion).init(self.completion_cells);
        self.commands = queue.Spsc(Command).init(self.command_cells);

        var i: u32 = 0;
        while (i < n) : (i += 1) {
            const hdr = self.header(i).?;
            const pay = self.payload(i).?;
            self.reg_iovecs[2 * i] = .{ .base = hdr, .len = layout.header_size };
            self.reg_iovecs[2 * i + 1] = .{ .base = pay, .len = payload_size };
            self.buf_iovecs[i] = .{ .base = pay, .len = payload_size };
        }

        self.thread = std.Thread.spawn(.{}, run, .{self}) catch |e| {
            err.* = switch (e) {
                error.SystemResources, error.ThreadQuotaExceeded, error.LockedMemoryLimitExceeded => sys.neg(.AGAIN),
                error.OutOfMemory => sys.neg(.NOMEM),
                error.Unexpected => sys.neg(.INVAL),
            };
            self.free();
            return null;
        };
        self.init_done.wait();
        if (self.init_result < 0) {
            // The thread has already torn its ring down and returned.
            self.thread.?.join();
            self.thread = null;
            err.* = self.init_result;
            self.free();
            return null;
        }
        self.thread.?.setName("fu-ring") catch {}; // cosmetic
        return self;
    }

    fn allocate(self: *Ring, err: *i32) error{Failed}!void {
        const allocator = std.heap.page_allocator;
        const n = self.n;
        const cap_completions = queue.capacityFor(2 * n + 1);
        const cap_commands = queue.capacityFor(2 * n);
        self.completion_cells = allocator.alloc(Completion, cap_completions) catch return failErr(err, .NOMEM);
        self.command_cells = allocator.alloc(Command, cap_commands) catch return failErr(err, .NOMEM);
        self.reg_iovecs = allocator.alloc(std.posix.iovec, 2 * @as(usize, n)) catch return failErr(err, .NOMEM);
        self.buf_iovecs = allocator.alloc(std.posix.iovec, n) catch return failErr(err, .NOMEM);
        self.js_held = allocator.alloc(bool, n) catch return failErr(err, .NOMEM);
        self.js_io_pending = allocator.alloc(bool, n) catch return failErr(err, .NOMEM);
        self.state = allocator.alloc(EntryState, n) catch return failErr(err, .NOMEM);
        self.commit_ids = allocator.alloc(u64, n) catch return failErr(err, .NOMEM);
        @memset(self.js_held, false);
        @memset(self.js_io_pending, false);
        @memset(self.state, .idle);
        @memset(self.commit_ids, 0);
        // Pre-fault everything: the kernel copies requests in from task work and the payloads
        // get pinned by buffer registration; neither should start by faulting pages in.
        self.headers = sys.mapAnon(sys.roundUp(@as(usize, n) * layout.header_stride, std.heap.page_size_min), true, err) orelse return error.Failed;
        self.payloads = sys.mapAnon(@as(usize, n) * self.payload_size, true, err) orelse return error.Failed;
        const wake_fd = sys.eventfdOpen(false);
        if (wake_fd < 0) {
            err.* = wake_fd;
            return error.Failed;
        }
        self.wake_fd = wake_fd;
    }

    /// Frees whatever `allocate` got (slices still empty were never allocated).
    fn free(self: *Ring) void {
        assert(self.thread == null);
        const allocator = std.heap.page_allocator;
        if (self.wake_fd >= 0) sys.closeFd(self.wake_fd);
        if (self.payloads.len > 0 and !self.payloads_unsafe) sys.unmap(self.payloads);
        if (self.headers.len > 0) sys.unmap(self.headers);
        if (self.commit_ids.len > 0) allocator.free(self.commit_ids);
        if (self.state.len > 0) allocator.free(self.state);
        if (self.js_io_pending.len > 0) allocator.free(self.js_io_pending);
        if (self.js_held.len > 0) allocator.free(self.js_held);
        if (self.buf_iovecs.len > 0) allocator.free(self.buf_iovecs);
        if (self.reg_iovecs.len > 0) allocator.free(self.reg_iovecs);
        if (self.command_cells.len > 0) allocator.free(self.command_cells);
        if (self.completion_cells.len > 0) allocator.free(self.completion_cells);
        allocator.destroy(self);
    }

    /// Joins the thread first: it exits its io_uring (io_uring_queue_exit, which cancels every
    /// entry the kernel still has) before returning, so no kernel write can reach the buffers
    /// once they are unmapped here.
    pub fn destroy(self: *Ring) void {
        if (self.thread) |thread| {
            self.stop();
            thread.join();
            self.thread = null;
        }
        self.free();
    }

    pub fn start(self: *Ring) i32 {
        if (@atomicRmw(u32, &self.start_requested, .Xchg, 1, .seq_cst) != 0) return sys.neg(.ALREADY);
        sys.eventfdSignal(self.wake_fd);
        return 0;
    }

    pub fn stop(self: *Ring) void {
        @atomicStore(u32, &self.stop_requested, 1, .seq_cst);
        sys.eventfdSignal(self.wake_fd);
    }

    pub fn kick(self: *Ring) void {
        // Pairs with the ring thread's store of `sleeping` then re-check of the command queue.
        if (@atomicRmw(u32, &self.sleeping, .Xchg, 0, .seq_cst) == 1) sys.eventfdSignal(self.wake_fd);
    }

    pub fn header(self: *Ring, idx: u32) ?[*]u8 {
        if (idx >= self.n) return null;
        return self.headers.ptr + @as(usize, idx) * layout.header_stride;
    }

    pub fn payload(self: *Ring, idx: u32) ?[*]u8 {
        if (idx >= self.n) return null;
        return self.payloads.ptr + @as(usize, idx) * self.payload_size;
    }

    pub fn pop(self: *Ring, out: [*]Completion, max: u32) u32 {
        self.bell.disarm();
        var count: u32 = 0;
        while (count < max) {
            const c = self.completions.pop() orelse break;
            switch (c.kind) {
                .request => {
                    assert(!self.js_held[c.idx]);
                    assert(!self.js_io_pending[c.idx]);
                    self.js_held[c.idx] = true;
                },
                .io_done => {
                    assert(self.js_io_pending[c.idx]);
                    self.js_io_pending[c.idx] = false;
                },
                .stopped => {},
            }
            out[count] = c;
            count += 1;
        }
        return count;
    }

    /// Queues COMMIT_AND_FETCH for a held entry. -EINVAL: not held by JS (never popped, or
    /// already committed); -EBUSY: an I/O on its payload is still running.
    pub fn commit(self: *Ring, idx: u32) i32 {
        if (idx >= self.n or !self.js_held[idx]) return sys.neg(.INVAL);
        if (self.js_io_pending[idx]) return sys.neg(.BUSY);
        self.js_held[idx] = false;
        self.commands.push(.{ .kind = .commit, .idx = idx, .fd = -1, .len = 0, .off = 0 });
        return 0;
    }

    /// Queues a read (kind 1) or write (kind 2) of `len` bytes at `off` of `fd` into/from a
    /// held entry's payload; IO_DONE reports the result. One at a time per entry.
    pub fn io(self: *Ring, kind: u32, idx: u32, fd: i32, off: u64, len: u32) i32 {
        const command_kind: Command.Kind = switch (kind) {
            1 => .read,
            2 => .write,
            else => return sys.neg(.INVAL),
        };
        if (idx >= self.n or !self.js_held[idx] or fd < 0 or len > self.payload_size) return sys.neg(.INVAL);
        if (self.js_io_pending[idx]) return sys.neg(.BUSY);
        self.js_io_pending[idx] = true;
        self.commands.push(.{ .kind = command_kind, .idx = idx, .fd = fd, .len = len, .off = off });
        return 0;
    }

    // ---- ring thread --------------------------------------------------------------------

    fn run(self: *Ring) void {
        sys.blockSignals();
        var reservation: [ring_reservation]u8 align(64) = undefined;
        assert(uring.fuw_ring_size() <= ring_reservation);
        assert(uring.fuw_ring_align() <= 64);
        const ring: *uring.Ring = @ptrCast(&reservation);

        const sq_entries = std.math.ceilPowerOfTwoAssert(u32, self.n + 8);
        const io_uring_flags = self.setup_flags & ~no_fixed_buffers_flag;
        const init_rc = uring.fuw_init(ring, sq_entries, 2 * sq_entries, uring.setup_sqe128 | io_uring_flags);
        if (init_rc < 0) {
            // EPERM: io_uring disabled/seccomp; ENOSYS: no io_uring; EINVAL: bad flag
            // combination (e.g. DEFER_TASKRUN without SINGLE_ISSUER); ENOMEM: ring memory.
            self.init_result = init_rc;
            self.init_done.set();
            return;
        }
        // Fixed buffers are an optimization for fu_ring_io; without them (RLIMIT_MEMLOCK,
        // ENOMEM, too many) plain READ/WRITE on the same addresses work as well.
        const reg_rc = if (self.setup_flags & no_fixed_buffers_flag != 0) -1 else uring.fuw_register_buffers(ring, self.buf_iovecs.ptr, self.n);
        self.stats.fixed_buffers = if (reg_rc == 0) 1 else 0;
        const wake_rc = self.armWake(ring);
        const submit_rc = if (wake_rc == 0) uring.fuw_submit(ring) else wake_rc;
        if (submit_rc < 0) {
            uring.fuw_exit(ring);
            self.init_result = submit_rc;
            self.init_done.set();
            return;
        }
        self.init_result = 0;
        self.init_done.set();

        const res = self.loop(ring);
        self.drainIo(ring);
        self.completions.push(.{ .kind = .stopped, .idx = 0, .res = res });
        self.notify();
        // Cancels the kernel's remaining commands (held entries are released, idle ones
        // complete); after this no request is copied into our buffers.
        uring.fuw_exit(ring);
    }

    fn notify(self: *Ring) void {
        if (self.bell.ring()) self.stats.wakeups += 1;
    }

    fn flag(ptr: *u32) bool {
        return @atomicLoad(u32, ptr, .seq_cst) != 0;
    }

    /// Returns the STOPPED result: 0 when stopped on request, else the result that killed the
    /// last entry (normally -ENOTCONN after unmount) or a fatal io_uring_enter error.
    fn loop(self: *Ring, ring: *uring.Ring) i64 {
        var registered = false;
        var expect_replies = false;
        while (true) {
            if (flag(&self.stop_requested)) return 0;
            if (!registered and flag(&self.start_requested)) {
                var i: u32 = 0;
                while (i < self.n) : (i += 1) self.prepRegister(ring, i);
                registered = true;
            }
            while (self.commands.pop()) |command| self.prepCommand(ring, command);
            if (expect_replies) {
                expect_replies = false;
                if (self.spinForCommands()) {
                    while (self.commands.pop()) |command| self.prepCommand(ring, command);
                }
            }

            // Sleep only if no command and no stop can be missed (see kick()).
            @atomicStore(u32, &self.sleeping, 1, .seq_cst);
            const idle = self.commands.isEmpty() and !flag(&self.stop_requested) and
                (registered or !flag(&self.start_requested));
            if (!idle) @atomicStore(u32, &self.sleeping, 0, .seq_cst);
            const rc = if (idle) uring.fuw_submit_and_wait(ring, 1) else uring.fuw_submit_and_get_events(ring);
            @atomicStore(u32, &self.sleeping, 0, .seq_cst);
            self.stats.submits += 1;
            if (rc < 0) switch (sys.errnoOfNeg(rc)) {
                // INTR: signal; AGAIN/BUSY: CQ overflow backlog or transient kernel memory
                // shortage — reaping CQEs below resolves both, then retry.
                .INTR, .AGAIN, .BUSY => {},
                else => {
                    self.stats.errors += 1;
                    return rc;
                },
            };

            var pushed = false;
            var cqes: [64]*uring.Cqe = undefined;
            while (true) {
                const got = uring.fuw_peek_batch(ring, &cqes, cqes.len);
                if (got == 0) break;
                for (cqes[0..got]) |cqe| {
                    if (self.handleCqe(ring, cqe.user_data, cqe.res)) pushed = true;
                }
                uring.fuw_cq_advance(ring, got);
                self.stats.cqes += got;
            }
            if (pushed) {
                self.notify();
                expect_replies = true;
            }
            if (self.dead_count == self.n) return self.last_dead_res;
            if (self.wake_broken) {
                self.stats.errors += 1;
                return self.wake_res;
            }
        }
    }

    /// Busy-waits up to spin_ns for a command; true if one arrived.
    fn spinForCommands(self: *Ring) bool {
        const budget = @atomicLoad(u64, &self.spin_ns, .monotonic);
        if (budget == 0) return false;
        const began = std.time.Instant.now() catch return false;
        while (self.commands.isEmpty()) {
            if (flag(&self.stop_requested)) return false;
            std.atomic.spinLoopHint();
            const now = std.time.Instant.now() catch return false;
            if (now.since(began) >= budget) return false;
        }
        return true;
    }

    pub fn setSpin(self: *Ring, ns: u64) void {
        @atomicStore(u64, &self.spin_ns, ns, .monotonic);
    }

    /// Returns true if it pushed a completion.
    fn handleCqe(self: *Ring, ring: *uring.Ring, user_data: u64, res: i32) bool {
        if (user_data == ud_wake) {
            if (res >= 0 or res == sys.neg(.INTR) or res == sys.neg(.AGAIN) or res == sys.neg(.CANCELED)) {
                const rc = self.armWake(ring);
                if (rc < 0) {
                    self.wake_broken = true;
                    self.wake_res = rc;
                }
            } else {
                // Without the wake-up read JS could never wake us again: stop instead of
                // hanging (JS sees STOPPED with this error).
                self.wake_broken = true;
                self.wake_res = res;
            }
            return false;
        }
        if (user_data == ud_cancel) return false;
        if (user_data & ud_io_tag != 0) {
            const idx: u32 = @truncate(user_data);
            assert(idx < self.n);
            assert(self.state[idx] == .held);
            assert(self.io_inflight > 0);
            self.io_inflight -= 1;
            self.completions.push(.{ .kind = .io_done, .idx = idx, .res = res });
            return true;
        }
        assert(user_data < self.n);
        const idx: u32 = @intCast(user_data);
        const st = self.state[idx];
        assert(st == .registering or st == .committing);
        if (res == 0) {
            const commit_id = layout.readCommitId(self.header(idx).?);
            if (commit_id == 0) {
                // The kernel never issues unique 0; committing it would leave the caller
                // hanging, so the entry is given up instead.
                self.killEntry(idx, sys.neg(.PROTO), true);
                return false;
            }
            self.commit_ids[idx] = commit_id;
            self.state[idx] = .held;
            self.stats.requests += 1;
            self.completions.push(.{ .kind = .request, .idx = idx, .res = 0 });
            return true;
        }
        switch (sys.errnoOfNeg(res)) {
            // REGISTER before the INIT reply was processed, or an interrupted command: the
            // same command again.
            .AGAIN, .INTR => {
                if (st == .registering) self.prepRegister(ring, idx) else self.prepCommitSqe(ring, idx);
            },
            // Normal end: unmount/abort (ENOTCONN, ECONNABORTED) or ring task exiting.
            .NOTCONN, .CONNABORTED, .CANCELED => self.killEntry(idx, res, false),
            // EINVAL (bad iovec/qid, ring without SQE128), ENOENT (unknown commit_id), EIO,
            // EFAULT, ENOMEM, EOPNOTSUPP (enable_uring off)…: the entry is gone.
            else => self.killEntry(idx, res, true),
        }
        return false;
    }

    /// Stopping with READ/WRITEs in flight: without fixed buffers an io-wq worker writes through
    /// the payload's virtual addresses, and closing the ring fd tears the ring down
    /// asynchronously, so a worker could write after destroy unmapped the payloads. Cancel
    /// them and reap, bounded (teardown must not hang on a read from a pipe); whatever is left
    /// marks the payloads unsafe to unmap.
    fn drainIo(self: *Ring, ring: *uring.Ring) void {
        if (self.io_inflight == 0) return;
        if (self.getSqe(ring)) |sqe| uring.fuw_prep_cancel_all(sqe, ud_cancel);
        var waited: u32 = 0;
        while (self.io_inflight > 0 and waited < io_drain_budget_ms) : (waited += 100) {
            // ETIME (100 ms without a CQE), INTR and any other error: reap what is there and
            // try again until the budget is spent.
            _ = uring.fuw_submit_and_wait_ms(ring, 100);
            var cqes: [64]*uring.Cqe = undefined;
            while (true) {
                const got = uring.fuw_peek_batch(ring, &cqes, cqes.len);
                if (got == 0) break;
                for (cqes[0..got]) |cqe| {
                    if (cqe.user_data == ud_wake or cqe.user_data == ud_cancel) continue;
                    if (cqe.user_data & ud_io_tag == 0) continue; // entries: the ring is going away
                    const idx: u32 = @truncate(cqe.user_data);
                    assert(idx < self.n);
                    self.io_inflight -= 1;
                    self.completions.push(.{ .kind = .io_done, .idx = idx, .res = cqe.res });
                }
                uring.fuw_cq_advance(ring, got);
                self.stats.cqes += got;
            }
        }
        if (self.io_inflight > 0) {
            self.payloads_unsafe = true;
            self.stats.errors += 1;
        }
    }

    fn killEntry(self: *Ring, idx: u32, res: i32, is_error: bool) void {
        assert(self.state[idx] != .dead);
        self.state[idx] = .dead;
        self.dead_count += 1;
        self.last_dead_res = res;
        self.stats.dead += 1;
        if (is_error) self.stats.errors += 1;
    }

    fn armWake(self: *Ring, ring: *uring.Ring) i32 {
        const sqe = self.getSqe(ring) orelse return sys.neg(.BUSY);
        uring.fuw_prep_read(sqe, self.wake_fd, &self.wake_buf, 8, 0, ud_wake);
        return 0;
    }

    /// An SQE, submitting queued ones first if the SQ is full. null only if the kernel does not
    /// take SQEs at all (then the loop's next io_uring_enter reports the error).
    fn getSqe(self: *Ring, ring: *uring.Ring) ?*uring.Sqe {
        if (uring.fuw_get_sqe(ring)) |sqe| return sqe;
        _ = uring.fuw_submit(ring);
        self.stats.submits += 1;
        return uring.fuw_get_sqe(ring);
    }

    fn prepRegister(self: *Ring, ring: *uring.Ring, idx: u32) void {
        assert(self.state[idx] == .idle or self.state[idx] == .registering);
        const sqe = self.getSqe(ring) orelse return self.killEntry(idx, sys.neg(.BUSY), true);
        const qid: u16 = @intCast(idx / self.depth);
        uring.fuw_prep_fuse_cmd(sqe, self.fd, uring.fuse_cmd_register, @intFromPtr(&self.reg_iovecs[2 * idx]), 2, 0, qid, idx);
        self.state[idx] = .registering;
    }

    fn prepCommitSqe(self: *Ring, ring: *uring.Ring, idx: u32) void {
        const sqe = self.getSqe(ring) orelse return self.killEntry(idx, sys.neg(.BUSY), true);
        const qid: u16 = @intCast(idx / self.depth);
        uring.fuw_prep_fuse_cmd(sqe, self.fd, uring.fuse_cmd_commit_and_fetch, 0, 0, self.commit_ids[idx], qid, idx);
        self.state[idx] = .committing;
        self.stats.commits += 1;
    }

    fn prepCommand(self: *Ring, ring: *uring.Ring, command: Command) void {
        assert(command.idx < self.n);
        const idx = command.idx;
        // JS only commits/does I/O on entries it holds, and entries die only from a CQE of an
        // in-flight command, which a held entry does not have.
        assert(self.state[idx] == .held);
        switch (command.kind) {
            .commit => self.prepCommitSqe(ring, idx),
            .read, .write => {
                const sqe = self.getSqe(ring) orelse {
                    self.stats.errors += 1;
                    self.completions.push(.{ .kind = .io_done, .idx = idx, .res = sys.neg(.BUSY) });
                    return self.notify();
                };
                uring.fuw_prep_rw(
                    sqe,
                    @intFromBool(command.kind == .write),
                    @intCast(self.stats.fixed_buffers),
                    command.fd,
                    self.payload(idx).?,
                    command.len,
                    command.off,
                    idx,
                    ud_io_tag | idx,
                );
                self.stats.io_ops += 1;
                self.io_inflight += 1;
            },
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
