// `fuse-uring mount --watch ./fs.ts MNT`: watch a filesystem script and the local files it
// imports, and hot-reload the mount when one of them changes (swap.ts does the swap).
//
// Watching: the directories that hold the script's modules are watched (not the files: editors
// save by writing a new file and renaming it over the old one, which a watch on the old inode
// never sees). A change to a known module (or, after a failed load, to any source file there),
// schedules a reload after `debounceMs` of quiet (editors write in several steps); a save that
// left every module's content as it was (as loaded, or as it last failed) reloads nothing.
// Reloads never overlap; changes during one schedule another. Nothing here touches the mount:
// the script lives outside it, and the daemon reading its own mount would deadlock.
//
// Module cache: the script's local modules (it and everything it imports outside node_modules)
// are evicted from Bun's module cache before each load, so edits to imported files take effect
// too. Packages in node_modules are not reloaded (they keep their state and identity).

import { watch, type FSWatcher } from "node:fs";
import { dirname, join } from "node:path";
import { mount, type Mount, type MountOptions } from "../mount.ts";
import { hashFiles, loadScriptVersion, ScriptError, show, type LoadScriptOptions, type ScriptVersion } from "../script.ts";
import { summarize } from "./swap.ts";

export interface WatchOptions extends LoadScriptOptions {
  /** Quiet time after the last change before reloading (ms, default 100). */
  debounceMs?: number;
  log?: (line: string) => void;
}

/** Source files an import may point at (data files like .json are written by programs too often). */
const SOURCE_FILE = /\.(?:[cm]?[jt]sx?)$/;

export class ScriptWatcher {
  private readonly watchers = new Map<string, FSWatcher>();
  private readonly files = new Set<string>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private running: Promise<boolean> | null = null;
  private again = false;
  private forceAgain = false;
  private closed = false;
  /** Version number serving now (1 = the one mounted). */
  version = 1;
  /** The last load failed: the next change to a known module, or to any source file, retries. */
  private failed = false;
  /** Content of the known modules at the last failure (the same content fails the same way). */
  private failedWith: Map<string, number | bigint> | null = null;
  /** A source file outside the known modules changed since the last attempt. */
  private unknownChanged = false;
  private loaded: Map<string, number | bigint>;

  constructor(
    private readonly m: Mount,
    private current: ScriptVersion,
    private readonly options: WatchOptions = {},
  ) {
    this.track(current.modules);
    this.loaded = current.hashes;
    m.closed.then(() => this.close(), () => this.close());
    // Edited between loading and now (e.g. while mounting): nobody saw that event.
    if (!this.unchanged(this.loaded)) this.schedule();
  }

  private log(line: string): void {
    (this.options.log ?? ((l: string) => process.stderr.write(l + "\n")))(line);
  }

  /** Files being watched (the script and its local imports). */
  get watchedFiles(): string[] {
    return [...this.files];
  }

  private track(modules: string[]): void {
    for (const f of modules) {
      this.files.add(f);
      const dir = dirname(f);
      if (this.watchers.has(dir) || this.closed) continue;
      try {
        const w = watch(dir, (_event, name) => this.onChange(dir, name));
        w.on("error", () => {}); // a directory that goes away: keep the others
        this.watchers.set(dir, w);
      } catch (e) {
        this.log(`fuse-uring: cannot watch ${show(dir)}: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
  }

  private onChange(dir: string, name: string | Buffer | null): void {
    if (this.closed) return;
    const file = name ? join(dir, String(name)) : null;
    // After a failed load, any source file may be the (new, missing or broken) import being fixed.
    if (file && !this.files.has(file)) {
      if (!(this.failed && SOURCE_FILE.test(file))) return;
      this.unknownChanged = true;
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.reload();
    }, this.options.debounceMs ?? 100);
  }

  /**
   * Reload now. `force` (SIGHUP) reloads even if no module's content changed. Resolves to
   * whether a new version is serving (or nothing needed to change).
   */
  reload(force = false): Promise<boolean> {
    if (this.running) {
      this.again = true;
      this.forceAgain ||= force;
      return this.running;
    }
    this.running = this.reloadOnce(force).finally(() => {
      this.running = null;
      if (this.again && !this.closed) {
        this.again = false;
        const f = this.forceAgain;
        this.forceAgain = false;
        void this.reload(f);
      }
    });
    return this.running;
  }

  /** Whether the files in `hashes` still have that content. */
  private unchanged(hashes: Map<string, number | bigint>): boolean {
    for (const [f, h] of hashFiles(hashes.keys())) if (hashes.get(f) !== h) return false;
    return hashes.size > 0;
  }

  private async reloadOnce(force: boolean): Promise<boolean> {
    const name = show(this.current.file);
    // Saved without changes (or a file beside the script changed): nothing to do.
    if (!force && !this.failed && this.unchanged(this.loaded)) return true;
    if (!force && this.failed && !this.unknownChanged && this.failedWith && this.unchanged(this.failedWith)) return false;
    this.unknownChanged = false;
    const t0 = performance.now();
    const attempt = hashFiles(this.files); // before loading: an edit racing with the load retries
    const failedWith = () => {
      for (const [f, h] of hashFiles([...this.files].filter((f) => !attempt.has(f)))) attempt.set(f, h);
      return attempt;
    };
    let next: ScriptVersion;
    try {
      next = await loadScriptVersion(this.current.file, this.options, this.current, this.files);
    } catch (e) {
      this.m.reloadCounters.reloadErrors++;
      this.failed = true;
      if (e instanceof ScriptError) this.track(e.modules);
      this.failedWith = failedWith();
      this.log(`fuse-uring: reload of ${name} failed, still serving version ${this.version}: ${e instanceof Error ? e.message : String(e)}`);
      return false;
    }
    this.track(next.modules);
    const loadMs = performance.now() - t0;
    if (this.closed) return false;
    let report;
    try {
      // The hook (if any) already ran with the serving version; hand its result over as a hook so
      // the inode API's "needs a hook" rule is satisfied.
      report = await this.m.reload(next.viaHook ? () => next.fs : next.fs);
    } catch (e) {
      next.controller.abort();
      this.failed = true;
      this.failedWith = failedWith();
      this.log(`fuse-uring: reload of ${name} failed, still serving version ${this.version}: ${e instanceof Error ? e.message : String(e)}`);
      return false;
    }
    this.current.controller.abort();
    this.current = next;
    this.loaded = next.hashes;
    this.failed = false;
    this.failedWith = null;
    this.version++;
    this.log(
      `fuse-uring: reloaded ${name} (version ${this.version}): ${summarize(report)}; ` +
        `load ${loadMs.toFixed(1)} ms, swap ${report.swapMs.toFixed(2)} ms, ${report.inflight} request${report.inflight === 1 ? "" : "s"} in flight, ` +
        `${report.notifications} cache invalidation${report.notifications === 1 ? "" : "s"}` +
        (report.warning ? `; warning: ${report.warning}` : ""),
    );
    return true;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
  }
}

/**
 * Hot-reload `m` whenever `version`'s script or a local file it imports changes. With
 * `--workers N`, m.reload() has every worker load its own copy before any thread swaps.
 */
export function watchScript(m: Mount, version: ScriptVersion, options: WatchOptions = {}): ScriptWatcher {
  return new ScriptWatcher(m, version, options);
}

export interface MountScriptOptions extends MountOptions, WatchOptions {
  /** Hot-reload when the script or a local file it imports changes. */
  watch?: boolean;
}

/**
 * Load a filesystem script and mount it: the API form of `fuse-uring mount [--watch] ./fs.ts MNT`.
 * With `watch`, `watcher` reloads it on every change until the mount goes away.
 */
export async function mountScript(path: string, mountpoint: string, options: MountScriptOptions = {}): Promise<{ mount: Mount; watcher: ScriptWatcher | null }> {
  const loadOptions = { args: options.args, mountpoint };
  const version = await loadScriptVersion(path, loadOptions);
  const m = await mount(mountpoint, version.fs, options);
  return { mount: m, watcher: options.watch ? watchScript(m, version, { ...loadOptions, debounceMs: options.debounceMs, log: options.log }) : null };
}
