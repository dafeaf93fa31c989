// Benchmark configurations and how each one is checked for availability.

export type ConfigKind = "raw" | "memfs" | "passthrough" | "libfuse" | "script";

export interface ConfigDef {
  id: string;
  label: string;
  /** short label for charts */
  short: string;
  kind: ConfigKind;
  transport?: "uring" | "classic";
  extraArgs?: string[];
  /** libfuse: passthrough_hp arguments before SRC MNT (after --foreground) */
  libfuseArgs?: string[];
  /** script: the filesystem module (relative to the repository) */
  script?: string;
  /**
   * Only these workloads run on this configuration (e.g. the long-TTL variants exist only for
   * the metadata rows of the libfuse comparison). Unset: every workload that is not exclusive.
   */
  workloads?: string[];
  /** a variant of this configuration (same daemon, other options): available iff it is; no own probe */
  variantOf?: string;
  /** optional configurations are probed first and skipped (with the reason) when they fail */
  optional: boolean;
  /** left out of --quick unless selected with --only/--configs */
  fullOnly?: boolean;
  description: string;
  colour: string;
}

export interface ConfigState extends ConfigDef {
  available: boolean;
  reason?: string;
  notes: string[];
}

/** What the harness found out about the environment before choosing configurations. */
export interface ConfigEnv {
  /** the CLI's switch to turn fixed buffers off, if it has one */
  noFixedFlag: string | null;
  /** the CLI lists --workers in its help */
  hasWorkers: boolean;
  /** the CLI lists --data-plane native|js (native data plane for backing-fd handles) */
  hasDataPlane: boolean;
}

/**
 * passthrough_hp keeps entries, attributes and negative lookups for 86400 s (its `fs.timeout`):
 * the fuse-uring side of the metadata comparison gets the same lifetimes.
 */
export const LONG_TTL_ARGS = ["--entry-ttl", "86400", "--attr-ttl", "86400", "--negative-ttl", "86400"];
/** The workloads whose rows are compared against libfuse with the long-TTL variants. */
export const META_WORKLOADS = ["csu", "meta"];
/** Burn filesystem (CPU-heavy READ handler) workloads: exclusive to the burn configurations. */
export const BURN_WORKLOADS = ["burn-read-4k-qd1"];

export function configDefs(env: ConfigEnv): ConfigDef[] {
  const { noFixedFlag } = env;
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
      description: "same filesystem, requests and replies through FUSE-over-io_uring (one queue per CPU); the default --workers auto: a copy of memfs per CPU over one shared state, each answering its CPU's requests",
    },
    {
      id: "pt-classic", label: env.hasDataPlane ? "passthrough classic, native data plane" : "passthrough classic", short: "pt cl", kind: "passthrough", transport: "classic", optional: true, colour: "#fdae6b",
      description: "passthrough of a tmpfs directory (lib/fs/passthrough.ts); data through the daemon (pread/pwrite on the request's buffer), /dev/fuse",
    },
    {
      id: "pt-uring", short: "pt ur",
      label: env.hasDataPlane ? "passthrough uring, native data plane" : noFixedFlag ? "passthrough uring + fixed bufs" : "passthrough uring (fixed bufs)",
      kind: "passthrough", transport: "uring", optional: true, colour: "#d94801",
      description: "passthrough over FUSE-over-io_uring, the default --workers auto: a copy of the passthrough per CPU over one shared node table (lib/fs/passthrough/shared.ts), each answering its CPU's requests; READ/WRITE answered natively by pread/pwrite on that thread",
    },
  ];
  if (noFixedFlag) {
    defs.push({
      id: "pt-uring-nofixed", label: "passthrough uring, no fixed bufs", short: "pt ur nofx", kind: "passthrough", transport: "uring",
      extraArgs: ["--workers", "1", noFixedFlag], optional: true, fullOnly: true, colour: "#7f2704",
      description: `passthrough over io_uring with --workers 1 ${noFixedFlag} (plain reads/writes instead of registered buffers; compare with pt-uring-1t)`,
    });
  }
  if (env.hasDataPlane) {
    // the default passthrough answers READ/WRITE of backing-fd handles in the shim; these keep them in JS
    defs.push(
      {
        id: "pt-classic-js", label: "passthrough classic, JS data plane", short: "pt cl js", kind: "passthrough", transport: "classic",
        extraArgs: ["--data-plane", "js"], optional: true, fullOnly: true, colour: "#fdd0a2",
        description: "passthrough over /dev/fuse with --data-plane js: every READ/WRITE goes to JavaScript (the comparison for the native data plane)",
      },
      {
        id: "pt-uring-js", label: "passthrough uring, JS data plane", short: "pt ur js", kind: "passthrough", transport: "uring",
        extraArgs: ["--data-plane", "js"], optional: true, fullOnly: true, colour: "#f16913",
        description: "passthrough over io_uring with --data-plane js: every READ/WRITE goes to JavaScript (the comparison for the native data plane)",
      },
    );
  }
  if (env.hasWorkers) {
    // The defaults above run a copy per CPU; these are one thread, and forwarding, to compare.
    defs.push(
      {
        id: "memfs-uring-1t", label: "memfs uring, one thread", short: "memfs ur 1t", kind: "memfs", transport: "uring",
        extraArgs: ["--workers", "1"], optional: true, colour: "#6baed6",
        description: "memfs over io_uring with --workers 1: one JS thread owns every queue's ring (requests from the other CPUs cross to it)",
      },
      {
        id: "pt-uring-1t", label: "passthrough uring, one thread", short: "pt ur 1t", kind: "passthrough", transport: "uring",
        extraArgs: ["--workers", "1"], optional: true, colour: "#8c2d04",
        description: "passthrough over io_uring with --workers 1: one JS thread owns every queue's ring; READ/WRITE above 64 KiB are READ_FIXED/WRITE_FIXED through that ring (fixedIo > 0)",
      },
      {
        id: "pt-uring-fwd", label: "passthrough uring, 2 workers (forwarding)", short: "pt ur fwd", kind: "passthrough", transport: "uring",
        extraArgs: ["--workers", "2", "--no-file-handles"], optional: true, fullOnly: true, colour: "#a63603",
        description: "passthrough over io_uring with --workers 2 --no-file-handles, which keeps it in forwarding mode (re-open by path is not shared; the bench's files stay within the descriptor budget, so the switch changes nothing else): workers answer READ/WRITE/FSYNC natively and forward every other request to the main thread (2 hand-offs each)",
      },
    );
  }
  defs.push({
    id: "kpt", label: "kernel passthrough (uring)", short: "kernel pt", kind: "passthrough", transport: "uring",
    extraArgs: ["--kernel-passthrough"], optional: true, colour: "#31a354",
    description: "passthrough with --kernel-passthrough (FUSE_PASSTHROUGH): the kernel serves file data from the backing file; the daemon only sees metadata (over io_uring)",
  });

  // libfuse's passthrough_hp and, for its metadata rows, fuse-uring with the same cache lifetimes
  // (listed always; run.ts skips them with the reason when no passthrough_hp is given)
  {
    defs.push(
      {
        id: "lf-classic", label: "libfuse classic", short: "lf cl", kind: "libfuse", transport: "classic", optional: true, colour: "#bcbddc",
        libfuseArgs: ["--nopassthrough"],
        description: "libfuse passthrough_hp --nopassthrough: C server, multi-threaded /dev/fuse loop (splice on), data through the daemon",
      },
      {
        id: "lf-uring", label: "libfuse uring", short: "lf ur", kind: "libfuse", transport: "uring", optional: true, colour: "#6a51a3",
        libfuseArgs: ["--nopassthrough", "-o", "io_uring"],
        description: "libfuse passthrough_hp --nopassthrough -o io_uring: FUSE-over-io_uring (default depth 8), each request served on the ring thread that fetched it",
      },
      {
        id: "lf-kpt", label: "libfuse kernel passthrough", short: "lf kpt", kind: "libfuse", transport: "uring", optional: true, colour: "#3f007d",
        libfuseArgs: ["-o", "io_uring"],
        description: "libfuse passthrough_hp -o io_uring: FUSE_PASSTHROUGH for file data, metadata over io_uring",
      },
    );
    const ttl = (base: ConfigDef, colour: string): ConfigDef => ({
      ...base,
      id: `${base.id}-ttl`, label: `${base.label} ttl86400`, short: `${base.short} ttl`,
      extraArgs: [...(base.extraArgs ?? []), ...LONG_TTL_ARGS], workloads: META_WORKLOADS, variantOf: base.id, colour,
      description: `${base.description}; with ${LONG_TTL_ARGS.join(" ")} like passthrough_hp (metadata workloads only)`,
    });
    const byId = (id: string) => defs.find((d) => d.id === id)!;
    defs.push(
      ttl(byId("memfs-uring"), "#2171b5"),
      ttl(byId("pt-classic"), "#fd8d3c"),
      ttl(byId("pt-uring"), "#a63603"),
      ttl(byId("kpt"), "#006d2c"),
    );
    if (env.hasWorkers) defs.push(ttl(byId("pt-uring-1t"), "#7f2704"));
  }

  // multi-core handlers: a READ handler that burns ~50 µs of CPU, one JS thread vs two
  defs.push(
    {
      id: "burn-w1", label: "burn fs uring, 1 worker", short: "burn w1", kind: "script", transport: "uring", optional: true, colour: "#c994c7",
      script: "bench/fs/burn.ts", extraArgs: env.hasWorkers ? ["--workers", "1"] : [], workloads: BURN_WORKLOADS,
      description: `bench/fs/burn.ts (READ handler busy for ~50 µs per request) over io_uring${env.hasWorkers ? " with --workers 1" : " (one JS thread: the CLI has no --workers)"}`,
    },
    {
      id: "burn-w2", label: "burn fs uring, 2 workers", short: "burn w2", kind: "script", transport: "uring", optional: true, colour: "#ce1256",
      script: "bench/fs/burn.ts", extraArgs: ["--workers", "2"], workloads: BURN_WORKLOADS,
      description: "bench/fs/burn.ts over io_uring with --workers 2 (handlers on two threads)",
    },
    // the same handler as a paths() script: one thread vs threads: "stateless" (a PathFS per
    // worker over one shared node table)
    {
      id: "burn-paths-w1", label: "burn paths() uring, 1 worker", short: "burn paths w1", kind: "script", transport: "uring", optional: true, colour: "#d4b9da",
      script: "bench/fs/burn-paths.ts", extraArgs: env.hasWorkers ? ["--workers", "1"] : [], workloads: BURN_WORKLOADS,
      description: "bench/fs/burn-paths.ts (paths() script, READ handler busy for ~50 µs) over io_uring with --workers 1",
    },
    {
      id: "burn-paths-w2", label: "burn paths() uring, stateless ×2", short: "burn paths w2", kind: "script", transport: "uring", optional: true, colour: "#980043",
      script: "bench/fs/burn-paths.ts", extraArgs: ["--workers", "2"], workloads: BURN_WORKLOADS,
      description: 'bench/fs/burn-paths.ts over io_uring with --workers 2: threads: "stateless", a PathFS per worker over one shared node table',
    },
  );
  return defs;
}

/** Does workload `w` run on configuration `c`? Exclusive workloads run only where listed. */
export function runsOn(c: ConfigDef, w: string): boolean {
  if (c.workloads) return c.workloads.includes(w);
  if (BURN_WORKLOADS.includes(w)) return false;
  return true;
}

/**
 * The fuse-uring ÷ libfuse pairs. For the metadata rows the long-TTL variant of the fuse-uring
 * side is used when it ran (passthrough_hp caches for 86400 s).
 */
export const LIBFUSE_PAIRS: Array<{ label: string; a: string; b: string }> = [
  { label: "passthrough classic ÷ libfuse classic", a: "pt-classic", b: "lf-classic" },
  { label: "passthrough uring ÷ libfuse uring", a: "pt-uring", b: "lf-uring" },
  { label: "memfs uring ÷ libfuse uring", a: "memfs-uring", b: "lf-uring" },
  { label: "passthrough uring one thread ÷ libfuse uring", a: "pt-uring-1t", b: "lf-uring" },
  { label: "memfs uring one thread ÷ libfuse uring", a: "memfs-uring-1t", b: "lf-uring" },
  { label: "kernel passthrough ÷ libfuse kernel passthrough", a: "kpt", b: "lf-kpt" },
];
