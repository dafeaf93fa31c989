//! The doorbell: how a native thread tells the JS thread "completions are waiting".
//!
//! The callback is a bun:ffi `JSCallback` with `threadsafe: true`; each call costs about a
//! microsecond and goes through Bun's event loop, so it must happen at most once per batch.
//! `armed` makes that so: the producer calls the callback only when it flips `armed` 0 → 1, and
//! the consumer (`fu_*_pop`) stores 0 *before* draining, so a record pushed after the drain
//! started rings again and no record is ever left without a pending doorbell.

const std = @import("std");
const assert = std.debug.assert;

pub const Fn = *const fn (source: u32) callconv(.c) void;

pub const Source = enum(u32) { classic = 0, ring = 1 };

pub const Bell = struct {
    func: Fn,
    source: Source,
    armed: u32 = 0,

    /// Producer side, after pushing at least one record. Returns true if it called JS.
    pub fn ring(self: *Bell) bool {
        if (@atomicRmw(u32, &self.armed, .Xchg, 1, .seq_cst) != 0) return false;
        self.func(@intFromEnum(self.source));
        return true;
    }

    /// Consumer side, before draining.
    pub fn disarm(self: *Bell) void {
        @atomicStore(u32, &self.armed, 0, .seq_cst);
    }
};
