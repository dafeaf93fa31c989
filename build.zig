//! Builds zig-out/lib/libfuse_uring_shim.so: shim/*.zig + shim/uring_wrappers.c, liburing.a
//! linked statically (the .so needs only libc), only the fu_* ABI exported, and no undefined
//! symbols allowed (a missing symbol fails here, not at dlopen).
//!
//!   python3 -m ziglang build -Doptimize=ReleaseSafe
//!   python3 -m ziglang build test            (unit tests: queue, normalization)
//!   -Dliburing=/path/to/liburing.a           (default: the distribution's static library)
//!
//! Why a `zig build-lib` command instead of `addLibrary`: Zig 0.15's build API has no switch
//! for the linker's `-z defs` (`linker_allow_shlib_undefined` only concerns symbols of linked
//! shared libraries), and a shared library links happily with undefined symbols otherwise.
//! The compiler itself accepts `-z defs`, so the library is built by invoking it directly.
//! Every file in shim/ is declared as an input, so the step reruns when any of them changes.

const std = @import("std");

pub fn build(b: *std.Build) void {
    // The CPU is the architecture's baseline unless -Dcpu/-Dtarget name one, never the build
    // machine's: a checkout built here may run on an older CPU (a shared home, an image, a CI
    // cache, the baseline-CPU guest of scripts/test-guest.sh), where AVX-512 is SIGILL.
    const target = b.standardTargetOptions(.{ .default_target = .{ .cpu_model = .baseline } });
    const optimize = b.standardOptimizeOption(.{});
    const liburing = b.option([]const u8, "liburing", "path to liburing.a") orelse
        findLiburing(b, target.result) orelse {
        std.debug.print("liburing.a not found: install liburing-dev or pass -Dliburing=/path/liburing.a\n", .{});
        std.process.exit(1);
    };
    const include_dir = b.option([]const u8, "liburing-include", "directory holding liburing.h") orelse "/usr/include";
    const c_flags: []const []const u8 = &.{ "-std=gnu11", "-Wall", "-Wextra", "-Werror" };

    const cmd = b.addSystemCommand(&.{ b.graph.zig_exe, "build-lib", "-dynamic", "-lc" });
    cmd.addArgs(&.{ "-O", @tagName(optimize) });
    cmd.addArgs(&.{ "-target", target.query.zigTriple(b.allocator) catch @panic("OOM") });
    cmd.addArgs(&.{ "-mcpu", target.query.serializeCpuAlloc(b.allocator) catch @panic("OOM") });
    cmd.addArgs(&.{ "-z", "defs" });
    cmd.addArg("--version-script");
    cmd.addFileArg(b.path("shim/exports.map"));
    cmd.addArg("-isystem");
    cmd.addArg(include_dir);
    cmd.addArg("-cflags");
    cmd.addArgs(c_flags);
    cmd.addArg("--");
    cmd.addFileArg(b.path("shim/uring_wrappers.c"));
    cmd.addArg(liburing);
    cmd.addPrefixedFileArg("-Mroot=", b.path("shim/root.zig"));
    cmd.addArgs(&.{ "--name", "fuse_uring_shim" });
    const so = cmd.addPrefixedOutputFileArg("-femit-bin=", "libfuse_uring_shim.so");
    addShimInputs(b, cmd);
    b.getInstallStep().dependOn(&b.addInstallLibFile(so, "libfuse_uring_shim.so").step);

    const test_mod = b.createModule(.{
        .root_source_file = b.path("shim/root.zig"),
        .target = target,
        .optimize = optimize,
        .link_libc = true,
    });
    test_mod.addCSourceFile(.{ .file = b.path("shim/uring_wrappers.c"), .flags = c_flags });
    test_mod.addSystemIncludePath(.{ .cwd_relative = include_dir });
    test_mod.addObjectFile(.{ .cwd_relative = liburing });
    const tests = b.addTest(.{ .root_module = test_mod });
    b.step("test", "run the shim's unit tests").dependOn(&b.addRunArtifact(tests).step);
}

fn addShimInputs(b: *std.Build, cmd: *std.Build.Step.Run) void {
    var dir = b.build_root.handle.openDir("shim", .{ .iterate = true }) catch |e| {
        std.debug.print("cannot list shim/: {s}\n", .{@errorName(e)});
        std.process.exit(1);
    };
    defer dir.close();
    var it = dir.iterate();
    while (it.next() catch @panic("shim/ listing failed")) |entry| {
        if (entry.kind != .file) continue;
        cmd.addFileInput(b.path(b.fmt("shim/{s}", .{entry.name})));
    }
}

fn findLiburing(b: *std.Build, target: std.Target) ?[]const u8 {
    const multiarch = b.fmt("/usr/lib/{s}-linux-gnu/liburing.a", .{@tagName(target.cpu.arch)});
    const candidates = [_][]const u8{ multiarch, "/usr/lib64/liburing.a", "/usr/lib/liburing.a", "/usr/local/lib/liburing.a" };
    for (candidates) |path| {
        std.fs.accessAbsolute(path, .{}) catch continue;
        return path;
    }
    return null;
}
