// Loads the Zig shim (shim/ABI.md) through bun:ffi. Lookup order: $FUSE_URING_SHIM, a path set
// by setShimPath()/setShimResolver() (the standalone binary extracts its embedded copy), the
// checkout's build output (zig-out/lib), the prebuilt copy shipped in the npm package
// (prebuilt/<platform>-<arch>/).

import { knobs } from "./knobs.ts";
import { dlopen, FFIType } from "bun:ffi";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";

// String type names (not FFIType members) so TypeScript infers exact argument/return types.
const i32 = "i32", u32 = "u32", u64 = "u64", ptr = "ptr", fn = "function", vd = "void";
const i64_fast = FFIType.i64_fast; // not in the string map; an i64 that fits a number comes back as one

export const symbols = {
  fu_dev_open: { args: [], returns: i32 },
  fu_close: { args: [i32], returns: i32 },
  fu_mount: { args: [ptr, ptr, ptr, u32, ptr], returns: i32 },
  fu_umount: { args: [ptr, i32], returns: i32 },
  fu_write: { args: [i32, ptr, u32], returns: i64_fast },
  fu_backing_open: { args: [i32, i32], returns: i32 },
  fu_backing_close: { args: [i32, i32], returns: i32 },
  fu_recv_fd: { args: [i32], returns: i32 },
  fu_socketpair: { args: [ptr], returns: i32 },
  fu_last_error: { args: [], returns: i32 },

  fu_classic_create: { args: [i32, u32, u32, fn], returns: ptr },
  fu_classic_set_op_sizes: { args: [ptr, ptr], returns: vd },
  fu_classic_start: { args: [ptr], returns: i32 },
  fu_classic_header: { args: [ptr, u32], returns: ptr },
  fu_classic_payload: { args: [ptr, u32], returns: ptr },
  fu_classic_pop: { args: [ptr, ptr, u32], returns: u32 },
  fu_classic_reply: { args: [ptr, u32, u32], returns: i64_fast },
  fu_classic_release: { args: [ptr, u32], returns: vd },
  fu_classic_stop: { args: [ptr], returns: vd },
  fu_classic_destroy: { args: [ptr], returns: vd },
  fu_classic_stats: { args: [ptr], returns: ptr },

  fu_classic_set_dataplane: { args: [ptr, ptr], returns: i32 },

  fu_ring_create: { args: [i32, ptr, u32, u32, u32, u32, u32, u32, fn, ptr, ptr], returns: ptr },
  fu_ring_create_pooled: { args: [i32, ptr, u32, u32, u32, u32, u32, u32, fn, ptr, u64, u32, u32, ptr], returns: ptr },
  fu_ring_start: { args: [ptr], returns: i32 },
  fu_ring_enter: { args: [ptr, ptr, u32, u32], returns: u32 },
  fu_ring_set_idle: { args: [ptr, u32], returns: i32 },
  fu_ring_set_native_sync: { args: [ptr, u32], returns: vd },
  fu_ring_set_direct_sync: { args: [ptr, u32], returns: vd },
  fu_ring_header: { args: [ptr, u32], returns: ptr },
  fu_ring_payload: { args: [ptr, u32], returns: ptr },
  fu_ring_commit: { args: [ptr, u32], returns: i32 },
  fu_ring_io: { args: [ptr, u32, u32, i32, u64, u32], returns: i32 },
  fu_ring_destroy: { args: [ptr], returns: vd },
  fu_ring_stats: { args: [ptr], returns: ptr },
  fu_ring_released: { args: [ptr], returns: ptr },

  fu_dataplane_create: { args: [u32, ptr], returns: ptr },
  fu_dataplane_set: { args: [ptr, u32, i32, u32], returns: i32 },
  fu_dataplane_destroy: { args: [ptr], returns: vd },
  fu_dataplane_enable_nodes: { args: [ptr, u32, u64, u32], returns: i32 },
  fu_dataplane_enable_missing: { args: [ptr, u64, u32], returns: i32 },
  fu_dataplane_node_set: { args: [ptr, u64, i32], returns: i32 },
  fu_dataplane_node_clear: { args: [ptr, u64, u32], returns: vd },
  fu_dataplane_node_drain: { args: [ptr, u64], returns: vd },
  fu_abi_version: { args: [], returns: u32 },
} as const;


export const SHIM_NAME = "libfuse_uring_shim.so";

/**
 * The shim ABI this TypeScript speaks (shim/root.zig fu_abi_version; bump both together on
 * incompatible changes). A shim built from another checkout or an older prebuilt copy would
 * otherwise load and misbehave in ways that look like kernel bugs.
 */
export const EXPECTED_SHIM_ABI = 9;

const REBUILD_HINT = "rebuild it from this checkout with `bash scripts/setup.sh` (or point FUSE_URING_SHIM at a matching build)";

function candidates(): string[] {
  const here = dirname(new URL(import.meta.url).pathname);
  const root = join(here, "..");
  return [join(root, "zig-out", "lib", SHIM_NAME), join(root, "prebuilt", `${process.platform}-${process.arch}`, SHIM_NAME)];
}

export type Native = ReturnType<typeof dlopen<typeof symbols>>["symbols"];

let loaded: Native | null = null;
let loadedFrom: string | null = null;
let overridePath: string | null = null;
let resolver: (() => string) | null = null;

/** Load the shim from exactly this path (FUSE_URING_SHIM still wins). */
export function setShimPath(path: string): void {
  overridePath = path;
}

/**
 * Used by the standalone binary: called once, on the first native() call, to produce a
 * loadable path (it extracts the embedded shim). It may throw an explanation.
 */
export function setShimResolver(fn: () => string): void {
  resolver = fn;
}

/** Where the shim was loaded from (null before the first native() call). */
export function loadedShimPath(): string | null {
  return loadedFrom;
}

function open(path: string): Native {
  // The version first, on its own: a stale shim may lack symbols this version needs, and
  // "symbol not found" would not say what to do.
  let version: number;
  try {
    const probe = dlopen(path, { fu_abi_version: symbols.fu_abi_version });
    version = probe.symbols.fu_abi_version();
    probe.close();
  } catch (e) {
    throw new Error(
      `fuse-uring: cannot load native shim ${path}: ${e instanceof Error ? e.message : String(e)}` +
        (/fu_abi_version/.test(String(e)) ? ` (a shim without fu_abi_version is too old; ${REBUILD_HINT})` : ""),
    );
  }
  checkAbi(path, version);
  try {
    return dlopen(path, symbols).symbols;
  } catch (e) {
    throw new Error(`fuse-uring: cannot load native shim ${path}: ${e instanceof Error ? e.message : String(e)} (${REBUILD_HINT})`);
  }
}

/** Throws a message saying how to rebuild when the shim at `path` speaks another ABI. */
export function checkAbi(path: string, version: number): void {
  if (version !== EXPECTED_SHIM_ABI) {
    throw new Error(`fuse-uring: native shim ${path} has ABI version ${version}, this fuse-uring needs ${EXPECTED_SHIM_ABI}: ${REBUILD_HINT}`);
  }
}

export function native(): Native {
  if (loaded) return loaded;
  let found: string | undefined;
  const env = knobs.shimPath();
  if (env) {
    if (!existsSync(env)) throw new Error(`fuse-uring: FUSE_URING_SHIM=${env} does not exist`);
    found = env;
  } else if (overridePath) {
    found = overridePath;
  } else if (resolver) {
    found = resolver();
  } else {
    const paths = candidates();
    found = paths.find((p) => existsSync(p));
    if (!found) {
      throw new Error(
        `fuse-uring: native shim ${SHIM_NAME} not found (looked in ${paths.join(", ")}). ` +
          `No prebuilt shim for ${process.platform}-${process.arch}: build it from a checkout with ` +
          `\`bash scripts/setup.sh\` (needs Zig and liburing-dev), then set FUSE_URING_SHIM=/path/to/${SHIM_NAME}`,
      );
    }
  }
  loaded = open(found);
  loadedFrom = found;
  return loaded;
}

/** C string for an FFI call (the Buffer must stay referenced during the call). */
export function cstr(s: string): Buffer {
  return Buffer.from(s + "\0", "utf8");
}
