//! Entry memory layout shared by both transports (ABI.md "Entry memory layout"):
//! struct fuse_uring_req_header (288 B) per entry, entries 512 B apart.

const std = @import("std");
const assert = std.debug.assert;

/// Distance between two entries' headers: 288 rounded up to keep cache lines unshared.
pub const header_stride = 512;
/// sizeof(struct fuse_uring_req_header): what REGISTER's first iovec must cover.
pub const header_size = 288;

pub const in_header_size = 40; // fuse_in_header
pub const nodeid_offset = 16; // fuse_in_header.nodeid
pub const out_header_size = 16; // fuse_out_header
pub const op_in_offset = 128; // fuse_uring_req_header.op_in
pub const op_in_size = 128;
pub const ent_in_out_offset = 256; // fuse_uring_req_header.ring_ent_in_out
pub const commit_id_offset = ent_in_out_offset + 8;
pub const payload_sz_offset = ent_in_out_offset + 16;
/// FUSE 7.46 ent_in_out.offset (6.18: padding): the request's buffer inside the queue's pool.
pub const pool_offset_offset = ent_in_out_offset + 20;

comptime {
    assert(header_size <= header_stride);
    assert(ent_in_out_offset + 32 == header_size);
}

/// Fills struct fuse_uring_ent_in_out the way the kernel does for a ring request.
pub fn writeEntInOut(hdr: [*]u8, commit_id: u64, payload_sz: u32) void {
    const e = hdr[ent_in_out_offset..][0..32];
    std.mem.writeInt(u64, e[0..8], 0, .little); // flags
    std.mem.writeInt(u64, e[8..16], commit_id, .little);
    std.mem.writeInt(u32, e[16..20], payload_sz, .little);
    std.mem.writeInt(u32, e[20..24], 0, .little); // padding
    std.mem.writeInt(u64, e[24..32], 0, .little); // reserved
}

pub fn readCommitId(hdr: [*]const u8) u64 {
    return std.mem.readInt(u64, hdr[commit_id_offset..][0..8], .little);
}
