//! Classic transport: one reader thread that reads requests from /dev/fuse into slots laid out
//! exactly like io_uring entries (header 288 B + payload), so TypeScript decodes one format.
//!
//! Ownership of a slot moves strictly: reader (reading) → completion queue → JS (held, after
//! pop) → free queue (reply/release) → reader. Each slot is in exactly one place, so both
//! queues are sized by `nslots` and never overflow.
//!
//! Threads: the reader owns `fd` reads, the completion queue's producer side, the free queue's
//! consumer side and `stats.reads/wakeups`. The JS thread owns pop/reply/release, `held` and
//! `stats.replies`. `stats.errors` is shared (atomic add).

const std = @import("std");
const linux = std.os.linux;
const assert = std.debug.assert;

const sys = @import("sys.zig");
const queue = @import("queue.zig");
const bell_mod = @import("bell.zig");
const layout = @import("layout.zig");
const dataplane = @import("dataplane.zig");

const Completion = queue.Completion;

pub const Stats = extern struct {
    reads: u64 = 0,
    wakeups: u64 = 0,
    replies: u64 = 0,
    errors: u64 = 0,
    /// Requests answered by the native data plane on the reader thread (no JS).
    native_requests: u64 = 0,
    native_read_bytes: u64 = 0,
    native_write_bytes: u64 = 0,
    native_errors: u64 = 0,
    /// Direct reads/writes refused for alignment (EINVAL) and done on the buffered fallback.
    direct_fallbacks: u64 = 0,
    /// Native requests on O_DIRECT handles.
    native_direct: u64 = 0,
    /// FLUSHes answered natively (mode_flush handles: close(dup(fd)), no JS).
    native_flushes: u64 = 0,
    /// GETATTRs answered natively from the node table (ABI 7).
    native_getattrs: u64 = 0,
};

/// Payload regions get this much slack beyond `payload_size`: normalization moves up to 40
/// bytes of the readv's second segment into the payload when an opcode's header is shorter
/// than 40 B, and the readv may have filled all `payload_size` bytes (NOTIFY_REPLY at
/// max_write is the only real case). The slack keeps that memmove inside our memory.
pub const payload_slack: u32 = 4096;

/// FORGET and BATCH_FORGET need no answer and no hurry. The reader holds back the doorbell for
/// up to `forget_batch` of them in a row, or until the device has been quiet for
/// `forget_linger_ms`, so they reach JS with the next request's wake-up instead of waking the
/// JS thread once each (create+stat+unlink: one FORGET per removed file, ~10 % of the daemon's
/// CPU when each woke JS on its own). Nothing waits on a FORGET, so the delay costs no caller.
const forget_batch: u32 = 64;
const forget_linger_ms: i32 = 2;
const op_forget: u32 = 2;
const op_batch_forget: u32 = 42;

/// readv's second segment: the first 40 bytes after fuse_in_header land in op_in, because 40
/// is the most common per-op header size (read_in, write_in…), so most requests need no move.
const op_split: u32 = 40;

pub const Classic = struct {
    fd: i32,
    wake_fd: i32,
    nslots: u32,
    payload_size: u32,
    payload_stride: u32,
    headers: []align(std.heap.page_size_min) u8,
    payloads: []align(std.heap.page_size_min) u8,
    /// table[opcode] = per-op header size; written by JS, read per request by the reader.
    op_sizes: [64]u8 = @splat(0),

    completions: queue.Spsc(Completion),
    free: queue.Spsc(u32),
    completion_cells: []Completion,
    free_cells: []u32,
    /// JS-thread only: slot was popped as REQUEST and not yet replied/released.
    held: []bool,

    bell: bell_mod.Bell,
    stop_requested: u32 = 0,
    /// Reader sets it before sleeping for a free slot; release wakes it only when set.
    reader_waiting: u32 = 0,
    thread: ?std.Thread = null,
    /// Native data plane table (set once before start; read by the reader thread).
    dp: ?*dataplane.DataPlane = null,
    stats: Stats = .{},

    pub fn create(fd: i32, nslots: u32, payload_size: u32, doorbell: bell_mod.Fn, err: *i32) ?*Classic {
        if (fd < 0) return fail(err, .BADF);
        if (nslots == 0 or nslots > 65536) return fail(err, .INVAL);
        // The kernel refuses reads into buffers smaller than 8192 B (FUSE_MIN_READ_BUFFER).
        if (payload_size < 8192 or payload_size % 4096 != 0) return fail(err, .INVAL);
        if (@as(u64, payload_size) + payload_slack > std.math.maxInt(u32)) return fail(err, .INVAL);

        const allocator = std.heap.page_allocator;
        const self = allocator.create(Classic) catch return fail(err, .NOMEM);
        const cap = queue.capacityFor(nslots + 1); // + STOPPED
        const completion_cells = allocator.alloc(Completion, cap) catch {
            allocator.destroy(self);
            return fail(err, .NOMEM);
        };
        const free_cells = allocator.alloc(u32, queue.capacityFor(nslots)) catch {
            allocator.free(completion_cells);
            allocator.destroy(self);
            return fail(err, .NOMEM);
        };
        const held = allocator.alloc(bool, nslots) catch {
            allocator.free(free_cells);
            allocator.free(completion_cells);
            allocator.destroy(self);
            return fail(err, .NOMEM);
        };
        @memset(held, false);
        const stride = payload_size + payload_slack;
        const headers = sys.mapAnon(sys.roundUp(@as(usize, nslots) * layout.header_stride, std.heap.page_size_min), true, err) orelse {
            allocator.free(held);
            allocator.free(free_cells);
            allocator.free(completion_cells);
            allocator.destroy(self);
            return null;
        };
        const payloads = sys.mapAnon(@as(usize, nslots) * stride, false, err) orelse {
            sys.unmap(headers);
            allocator.free(held);
            allocator.free(free_cells);
            allocator.free(completion_cells);
            allocator.destroy(self);
            return null;
        };
        const wake_fd = sys.eventfdOpen(true);
        const nonblock = if (wake_fd >= 0) setNonblock(fd) else 0;
        if (wake_fd < 0 or nonblock < 0) {
            err.* = if (wake_fd < 0) wake_fd else nonblock;
            if (wake_fd >= 0) sys.closeFd(wake_fd);
            sys.unmap(payloads);
            sys.unmap(headers);
            allocator.free(held);
            allocator.free(free_cells);
            allocator.free(completion_cells);
            allocator.destroy(self);
            return null;
        }

        self.* = .{
            .fd = fd,
            .wake_fd = wake_fd,
            .nslots = nslots,
            .payload_size = payload_size,
            .payload_stride = stride,
            .headers = headers,
            .payloads = payloads,
            .completions = queue.Spsc(Completion).init(completion_cells),
            .free = queue.Spsc(u32).init(free_cells),
            .completion_cells = completion_cells,
            .free_cells = free_cells,
            .held = held,
            .bell = .{ .func = doorbell, .source = .classic },
        };
        var slot: u32 = 0;
        while (slot < nslots) : (slot += 1) self.free.push(slot);
        return self;
    }

    pub fn destroy(self: *Classic) void {
        if (self.thread) |thread| {
            self.stop();
            thread.join();
            self.thread = null;
        }
        sys.closeFd(self.wake_fd);
        sys.unmap(self.payloads);
        sys.unmap(self.headers);
        const allocator = std.heap.page_allocator;
        allocator.free(self.held);
        allocator.free(self.free_cells);
        allocator.free(self.completion_cells);
        allocator.destroy(self);
    }

    pub fn setOpSizes(self: *Classic, table: *const [64]u8) i32 {
        for (table) |size| if (size > layout.op_in_size) return sys.neg(.INVAL);
        for (table, 0..) |size, i| @atomicStore(u8, &self.op_sizes[i], size, .monotonic);
        return 0;
    }

    pub fn setDataPlane(self: *Classic, dp: ?*dataplane.DataPlane) i32 {
        if (self.thread != null) return sys.neg(.BUSY);
        self.dp = dp;
        return 0;
    }

    pub fn start(self: *Classic) i32 {
        if (self.thread != null) return sys.neg(.ALREADY);
        if (@atomicLoad(u32, &self.stop_requested, .seq_cst) != 0) return sys.neg(.INVAL);
        self.thread = std.Thread.spawn(.{}, run, .{self}) catch |e| return switch (e) {
            error.SystemResources, error.ThreadQuotaExceeded, error.LockedMemoryLimitExceeded => sys.neg(.AGAIN),
            error.OutOfMemory => sys.neg(.NOMEM),
            error.Unexpected => sys.neg(.INVAL),
        };
        self.thread.?.setName("fu-classic") catch {}; // cosmetic (ps/top); failure is harmless
        return 0;
    }

    pub fn stop(self: *Classic) void {
        @atomicStore(u32, &self.stop_requested, 1, .seq_cst);
        sys.eventfdSignal(self.wake_fd);
    }

    pub fn header(self: *Classic, slot: u32) ?[*]u8 {
        if (slot >= self.nslots) return null;
        return self.headers.ptr + @as(usize, slot) * layout.header_stride;
    }

    pub fn payload(self: *Classic, slot: u32) ?[*]u8 {
        if (slot >= self.nslots) return null;
        return self.payloads.ptr + @as(usize, slot) * self.payload_stride;
    }

    pub fn pop(self: *Classic, out: [*]Completion, max: u32) u32 {
        self.bell.disarm();
        var n: u32 = 0;
        while (n < max) {
            const c = self.completions.pop() orelse break;
            if (c.kind == .request) {
                assert(c.idx < self.nslots);
                assert(!self.held[c.idx]);
                self.held[c.idx] = true;
            }
            out[n] = c;
            n += 1;
        }
        return n;
    }

    /// writev(out_header 16 B, payload[0..payload_len]). The slot goes back to the reader
    /// whatever the write did: a failed reply (ENOENT = interrupted/aborted request) cannot be
    /// retried with the same request anyway.
    pub fn reply(self: *Classic, slot: u32, payload_len: u32) i64 {
        if (slot >= self.nslots or !self.held[slot]) return sys.neg(.INVAL);
        if (payload_len > self.payload_size) return sys.neg(.INVAL);
        const iov = [2]std.posix.iovec_const{
            .{ .base = self.header(slot).?, .len = layout.out_header_size },
            .{ .base = self.payload(slot).?, .len = payload_len },
        };
        const iovcnt: usize = if (payload_len == 0) 1 else 2;
        const rc = while (true) {
            const rc = linux.writev(self.fd, &iov, iovcnt);
            switch (sys.errnoOf(rc)) {
                .INTR => continue,
                else => break rc,
            }
        };
        switch (sys.errnoOf(rc)) {
            .SUCCESS => self.stats.replies += 1,
            else => _ = @atomicRmw(u64, &self.stats.errors, .Add, 1, .monotonic),
        }
        const released = self.release(slot);
        assert(released == 0);
        return sys.result(rc);
    }

    pub fn release(self: *Classic, slot: u32) i32 {
        if (slot >= self.nslots or !self.held[slot]) return sys.neg(.INVAL);
        self.held[slot] = false;
        self.free.push(slot);
        // Pairs with the reader's store of reader_waiting then re-check of the free queue
        // (both seq_cst): either it sees this slot or we see it waiting.
        if (@atomicRmw(u32, &self.reader_waiting, .Xchg, 0, .seq_cst) == 1) {
            sys.eventfdSignal(self.wake_fd);
        }
        return 0;
    }

    // ---- reader thread ------------------------------------------------------------------

    fn run(self: *Classic) void {
        sys.blockSignals();
        const res = self.readLoop();
        self.completions.push(.{ .kind = .stopped, .idx = 0, .res = res });
        self.notify();
    }

    fn notify(self: *Classic) void {
        if (self.bell.ring()) self.stats.wakeups += 1;
    }

    fn stopping(self: *Classic) bool {
        return @atomicLoad(u32, &self.stop_requested, .seq_cst) != 0;
    }

    /// Returns the STOPPED result: 0 when asked to stop, else -errno that ended the device.
    fn readLoop(self: *Classic) i64 {
        var slot: ?u32 = null;
        // Completions pushed without ringing the doorbell (held-back FORGETs); every path that
        // may sleep rings first unless it sleeps with the linger timeout.
        var deferred: u32 = 0;
        while (true) {
            if (self.stopping()) return 0;
            if (slot == null) slot = self.free.pop();
            const s = slot orelse {
                // JS must see the held-back FORGETs to give their slots back.
                if (deferred > 0) {
                    deferred = 0;
                    self.notify();
                }
                // Every slot is with JS: sleep until a release (or stop) signals the eventfd.
                @atomicStore(u32, &self.reader_waiting, 1, .seq_cst);
                if (self.free.isEmpty() and !self.stopping()) {
                    const rc = self.poll(false, -1);
                    if (rc < 0) return rc;
                }
                @atomicStore(u32, &self.reader_waiting, 0, .seq_cst);
                sys.eventfdDrain(self.wake_fd);
                continue;
            };
            const hdr = self.header(s).?;
            const pay = self.payload(s).?;
            const iov = [3]std.posix.iovec{
                .{ .base = hdr, .len = layout.in_header_size },
                .{ .base = hdr + layout.op_in_offset, .len = op_split },
                .{ .base = pay, .len = self.payload_size },
            };
            const rc = linux.readv(self.fd, &iov, iov.len);
            switch (sys.errnoOf(rc)) {
                .SUCCESS => {},
                .AGAIN => {
                    const prc = self.poll(true, if (deferred > 0) forget_linger_ms else -1);
                    if (prc < 0) return prc;
                    if (prc == poll_timed_out) {
                        assert(deferred > 0);
                        deferred = 0;
                        self.notify();
                    }
                    continue;
                },
                // INTR: signal (we block them, but be safe); NOENT: the request was aborted
                // while being copied, the kernel moves on to the next one.
                .INTR, .NOENT => continue,
                // NODEV: unmounted/aborted; CONNABORTED: aborted with FUSE_ABORT_ERROR;
                // PERM: fd not attached to a mount; INVAL: buffer smaller than the negotiated
                // max_write needs; BADF: fd closed under us; anything else is equally fatal for
                // the reader. JS learns which from STOPPED.
                else => |e| {
                    if (e != .NODEV) _ = @atomicRmw(u64, &self.stats.errors, .Add, 1, .monotonic);
                    return sys.neg(e);
                },
            }
            self.stats.reads += 1;
            if (rc < layout.in_header_size) {
                // The kernel always writes a whole fuse_in_header; a shorter read is not a
                // request. Count it and reuse the slot.
                _ = @atomicRmw(u64, &self.stats.errors, .Add, 1, .monotonic);
                continue;
            }
            self.normalizeSlot(hdr, pay, @intCast(rc));
            // The data plane answers I/O on backing-fd handles right here: the slot is ours
            // again as soon as the reply is written, and JS is not woken.
            if (self.serveNative(hdr, pay)) continue;
            slot = null;
            self.completions.push(.{ .kind = .request, .idx = s, .res = @intCast(rc) });
            const opcode = std.mem.readInt(u32, hdr[4..8], .little);
            if ((opcode == op_forget or opcode == op_batch_forget) and deferred < forget_batch) {
                deferred += 1;
                continue;
            }
            deferred = 0;
            // Cheap when JS has not popped yet (armed already set): one atomic, no call.
            self.notify();
        }
    }

    const poll_timed_out: i64 = 1;

    /// Waits for the device (when `device`) or only for the eventfd, at most `timeout_ms`
    /// (-1: no limit). Returns 0, poll_timed_out or -errno.
    fn poll(self: *Classic, device: bool, timeout_ms: i32) i64 {
        var fds = [2]linux.pollfd{
            .{ .fd = self.wake_fd, .events = linux.POLL.IN, .revents = 0 },
            .{ .fd = self.fd, .events = linux.POLL.IN, .revents = 0 },
        };
        while (true) {
            const rc = linux.poll(&fds, if (device) 2 else 1, timeout_ms);
            switch (sys.errnoOf(rc)) {
                .SUCCESS => if (rc == 0) return poll_timed_out else break,
                .INTR => continue,
                // ENOMEM: the kernel could not allocate poll tables — fatal for the reader.
                // EFAULT/EINVAL would be programming errors; report them the same way.
                else => |e| {
                    _ = @atomicRmw(u64, &self.stats.errors, .Add, 1, .monotonic);
                    return sys.neg(e);
                },
            }
        }
        // Device errors (POLLERR/POLLHUP/POLLNVAL) surface from the next readv with an errno.
        if (fds[0].revents != 0) sys.eventfdDrain(self.wake_fd);
        return 0;
    }

    /// pread/pwrite/fsync between a native handle's backing fd and the slot, then one writev.
    fn serveNative(self: *Classic, hdr: [*]u8, pay: [*]u8) bool {
        const dp = self.dp orelse return false;
        const opcode = std.mem.readInt(u32, hdr[4..8], .little);
        if (opcode == dataplane.op_getattr) return self.getattrNative(dp, hdr, pay);
        const flushing = opcode == dataplane.op_flush;
        if (!flushing and !dataplane.servedOp(opcode)) return false;
        const op_in = hdr + layout.op_in_offset;
        const h = dp.lookup(std.mem.readInt(u64, op_in[0..8], .little)) orelse return false;
        // A FLUSH that needs JS (not a mode_flush handle, no descriptor free) goes before any count.
        const flushed: ?i64 = if (flushing) (if (h.flush_fd < 0) null else dataplane.flush(h.flush_fd)) else null;
        if (flushing and flushed == null) return false;
        const fd = h.fd;
        if (h.direct and !flushing) self.stats.native_direct += 1;
        const offset = std.mem.readInt(u64, op_in[8..16], .little);
        const size = std.mem.readInt(u32, op_in[16..20], .little);
        const payload_sz = std.mem.readInt(u32, hdr[layout.payload_sz_offset..][0..4], .little);
        var res: i64 = undefined;
        if (flushed) |r| {
            res = r;
            self.stats.native_flushes += 1;
        } else if (opcode == dataplane.op_fsync) {
            const datasync = std.mem.readInt(u32, op_in[8..12], .little) & 1 != 0;
            // fsync is not restarted after a signal (we block them anyway): report what it said.
            res = sys.result(if (datasync) linux.fdatasync(fd) else linux.fsync(fd));
        } else if (size > self.payload_size or (opcode == dataplane.op_write and size > payload_sz)) {
            res = sys.neg(.IO); // the kernel never sends more than max_write
        } else {
            res = dataplane.transfer(fd, opcode, pay, size, offset);
            if (dataplane.wantsFallback(h, opcode, res)) {
                res = dataplane.transfer(h.fallback, opcode, pay, size, offset);
                self.stats.direct_fallbacks += 1;
            }
        }
        self.answerNative(hdr, pay, opcode, res);
        return true;
    }

    /// GETATTR from the data plane's node table (one statx). False: JS answers it.
    fn getattrNative(self: *Classic, dp: *const dataplane.DataPlane, hdr: [*]u8, pay: [*]u8) bool {
        const t = dp.nodeTable() orelse return false;
        const res = t.getattr(std.mem.readInt(u64, hdr[layout.nodeid_offset..][0..8], .little), pay) orelse return false;
        self.stats.native_getattrs += 1;
        self.answerNative(hdr, pay, dataplane.op_getattr, res);
        return true;
    }

    /// Encode and write the answer of a natively served request (one writev).
    fn answerNative(self: *Classic, hdr: [*]u8, pay: [*]u8, opcode: u32, res: i64) void {
        var tally: dataplane.Tally = .{};
        const out_len = dataplane.encodeAnswer(hdr, pay, opcode, res, &tally);
        self.stats.native_errors += tally.errors;
        self.stats.native_read_bytes += tally.read_bytes;
        self.stats.native_write_bytes += tally.write_bytes;
        const iov = [2]std.posix.iovec_const{
            .{ .base = hdr, .len = layout.out_header_size },
            .{ .base = pay, .len = out_len },
        };
        const wrc = while (true) {
            const rc = linux.writev(self.fd, &iov, if (out_len == 0) 1 else 2);
            if (sys.errnoOf(rc) != .INTR) break rc;
        };
        // ENOENT: the request was interrupted/aborted meanwhile; nothing else to do.
        if (sys.errnoOf(wrc) != .SUCCESS) _ = @atomicRmw(u64, &self.stats.errors, .Add, 1, .monotonic);
        self.stats.native_requests += 1;
    }

    fn normalizeSlot(self: *Classic, hdr: [*]u8, pay: [*]u8, len: u32) void {
        const opcode = std.mem.readInt(u32, hdr[4..8], .little);
        const unique = std.mem.readInt(u64, hdr[8..16], .little);
        const h: u32 = if (opcode < 64) @atomicLoad(u8, &self.op_sizes[opcode], .monotonic) else 0;
        const rest = len - layout.in_header_size;
        const op_in: *[layout.op_in_size]u8 = (hdr + layout.op_in_offset)[0..layout.op_in_size];
        const payload_sz = normalize(op_in, pay[0 .. self.payload_size + payload_slack], rest, h);
        layout.writeEntInOut(hdr, unique, payload_sz);
    }
};

fn fail(err: *i32, e: sys.E) ?*Classic {
    err.* = sys.neg(e);
    return null;
}

fn setNonblock(fd: i32) i32 {
    const flags = linux.fcntl(fd, linux.F.GETFL, 0);
    switch (sys.errnoOf(flags)) {
        .SUCCESS => {},
        else => |e| return sys.neg(e),
    }
    const o_nonblock: usize = @as(u32, @bitCast(linux.O{ .NONBLOCK = true }));
    const rc = linux.fcntl(fd, linux.F.SETFL, flags | o_nonblock);
    return @intCast(sys.result(rc));
}

/// Rearranges a classic read so it matches the io_uring layout: op_in holds the first `h`
/// bytes after fuse_in_header, the payload holds the rest from offset 0.
/// On entry: op_in[0..min(rest,40)] and payload[0..rest-min(rest,40)] hold the `rest` bytes
/// that followed fuse_in_header. Returns payload_sz = rest - min(h, rest).
pub fn normalize(op_in: *[layout.op_in_size]u8, payload: []u8, rest: u32, h: u32) u32 {
    assert(h <= layout.op_in_size);
    const in_op = @min(rest, op_split);
    const in_pay = rest - in_op;
    assert(in_pay <= payload.len);
    const payload_sz: u32 = if (h < op_split) blk: {
        // Too much landed in op_in: op_in[h..in_op] belongs at the front of the payload.
        const k = if (in_op > h) in_op - h else 0;
        assert(in_pay + k <= payload.len);
        if (k > 0) {
            std.mem.copyBackwards(u8, payload[k .. k + in_pay], payload[0..in_pay]);
            @memcpy(payload[0..k], op_in[h .. h + k]);
        }
        break :blk in_pay + k;
    } else if (h > op_split) blk: {
        // Too little landed in op_in: pull payload[0..m] up behind it.
        const m = @min(in_pay, h - op_split);
        @memcpy(op_in[op_split .. op_split + m], payload[0..m]);
        std.mem.copyForwards(u8, payload[0 .. in_pay - m], payload[m..in_pay]);
        break :blk in_pay - m;
    } else in_pay;
    assert(payload_sz == rest - @min(h, rest));
    return payload_sz;
}

test "normalize: header shorter, equal, longer than 40" {
    const testing = std.testing;
    var op_in: [128]u8 = undefined;
    var payload: [256]u8 = undefined;
    var wire: [120]u8 = undefined;
    for (&wire, 0..) |*b, i| b.* = @intCast(i);

    const cases = [_]struct { rest: u32, h: u32 }{
        .{ .rest = 120, .h = 0 },  .{ .rest = 120, .h = 8 },  .{ .rest = 120, .h = 40 },
        .{ .rest = 120, .h = 88 }, .{ .rest = 30, .h = 8 },   .{ .rest = 30, .h = 88 },
        .{ .rest = 6, .h = 0 },    .{ .rest = 0, .h = 16 },   .{ .rest = 60, .h = 88 },
        .{ .rest = 40, .h = 40 },  .{ .rest = 50, .h = 128 },
    };
    for (cases) |case| {
        @memset(&op_in, 0xAA);
        @memset(&payload, 0xBB);
        const in_op = @min(case.rest, 40);
        @memcpy(op_in[0..in_op], wire[0..in_op]);
        @memcpy(payload[0 .. case.rest - in_op], wire[in_op..case.rest]);
        const sz = normalize(&op_in, &payload, case.rest, case.h);
        const hh = @min(case.h, case.rest);
        try testing.expectEqual(case.rest - hh, sz);
        try testing.expectEqualSlices(u8, wire[0..hh], op_in[0..hh]);
        try testing.expectEqualSlices(u8, wire[hh..case.rest], payload[0..sz]);
    }
}
