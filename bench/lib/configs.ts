// Benchmark configurations and how each one is checked for availability.

export interface ConfigDef {
  id: string;
  label: string;
  /** short label for charts */
  short: string;
  kind: "raw" | "memfs" | "passthrough";
  transport?: "uring" | "classic";
  extraArgs?: string[];
  /** optional configurations are probed first and skipped (with the reason) when they fail */
  optional: boolean;
  description: string;
  colour: string;
}

export interface ConfigState extends ConfigDef {
  available: boolean;
  reason?: string;
  notes: string[];
}

export function configDefs(noFixedFlag: string | null): ConfigDef[] {
  const defs: ConfigDef[] = [
    {
      id: "raw", label: "raw tmpfs", short: "raw", kind: "raw", optional: false, colour: "#7f7f7f",
      description: "fio / the helper directly on a tmpfs directory: no FUSE at all, the physical limit of this machine",
    },
    {
      id: "memfs-classic", label: "memfs classic", short: "memfs cl", kind: "memfs", transport: "classic", optional: false, colour: "#9ecae1",
      description: "in-memory filesystem (lib/fs/memfs.ts) in the Bun daemon, requests read from /dev/fuse by the shim's reader threads",
    },
    {
      id: "memfs-uring", label: "memfs uring", short: "memfs ur", kind: "memfs", transport: "uring", optional: false, colour: "#08519c",
      description: "same filesystem, requests and replies through FUSE-over-io_uring (one queue per CPU)",
    },
    {
      id: "pt-classic", label: "passthrough classic", short: "pt cl", kind: "passthrough", transport: "classic", optional: true, colour: "#fdae6b",
      description: "passthrough of a tmpfs directory (lib/fs/passthrough.ts); data through the daemon (pread/pwrite on the request's buffer), /dev/fuse",
    },
    {
      id: "pt-uring", label: noFixedFlag ? "passthrough uring + fixed bufs" : "passthrough uring (fixed bufs)", short: "pt ur",
      kind: "passthrough", transport: "uring", optional: true, colour: "#d94801",
      description: "passthrough over FUSE-over-io_uring; READ/WRITE are READ_FIXED/WRITE_FIXED between the backing file and the ring's registered payload buffer (fixedIo > 0)",
    },
  ];
  if (noFixedFlag) {
    defs.push({
      id: "pt-uring-nofixed", label: "passthrough uring, no fixed bufs", short: "pt ur nofx", kind: "passthrough", transport: "uring",
      extraArgs: [noFixedFlag], optional: true, colour: "#7f2704",
      description: `passthrough over io_uring with ${noFixedFlag} (plain reads/writes instead of registered buffers)`,
    });
  }
  defs.push({
    id: "kpt", label: "kernel passthrough (uring)", short: "kernel pt", kind: "passthrough", transport: "uring",
    extraArgs: ["--kernel-passthrough"], optional: true, colour: "#31a354",
    description: "passthrough with --kernel-passthrough (FUSE_PASSTHROUGH): the kernel serves file data from the backing file; the daemon only sees metadata (over io_uring)",
  });
  return defs;
}
