// The node table of the path layer (PathFS): node ids for the paths the kernel knows, kept while
// the kernel holds lookup references (LOOKUP, CREATE, READDIRPLUS … add, FORGET gives back) or a
// file is open, and moved on rename/unlink so ids stay attached to the right file.
//
// Two implementations behind one interface:
// - LocalNodes (here): plain objects for one thread, node ids counted 2, 3, 4 …;
// - SharedNodes (nodes-shared.ts): the same table in SharedArrayBuffers, so several threads each
//   running their own PathFS over it (`threads: "stateless"`) hand out and resolve the same ids.
//
// Every method is synchronous and complete on its own (the shared table takes its lock inside
// one call), so a step that must not be split — find-or-create plus a hold, detach plus move —
// is one method.

import { FuseError } from "../protocol/errors.ts";

export const ROOT = 1;

/** Per-node facts PathFS keeps (bits of NodeTable.flags). */
export const DYNAMIC = 1; // last getattr found no size and computed it from readFile
export const SIZE_AT_OPEN = 2; // getattr said sizeAtOpen: size = what the last open produced

export interface KnownNode {
  ino: number;
  path: string;
  parent: number;
  name: string;
}

/** What a handle record keeps where every thread sees it (shared tables only). */
export interface HandleRecord {
  dir: boolean;
  ino: number;
  flags: number;
  snapshot: boolean;
  /** backed(): the descriptor (-1: none), whether the layer closes it, opened for writing. */
  fd: number;
  owned: boolean;
  writable: boolean;
  /** JSON of the handler's handle value (undefined: none). */
  value: string | undefined;
  /** The thread that opened it (its local objects: snapshot data, directory listing). */
  owner: number;
}

export interface NodeTable {
  /** The SharedArrayBuffers of a shared table (what other threads join with), else null. */
  readonly share: unknown | null;
  readonly count: number;
  has(ino: number): boolean;
  /** The node's path (an unlinked node: the path it had); undefined if unknown. */
  pathOf(ino: number): string | undefined;
  /** Parent's node id (0: the root, or detached). */
  parentOf(ino: number): number;
  /** Node id of `name` in `parent` if the kernel knows it. */
  childOf(parent: number, name: string): number | undefined;
  /** Find or create the node of `name` in `parent` and hold it (an open count) until unhold. */
  hold(parent: number, name: string): number;
  /** Give back a hold (or an open): the node is freed if nothing refers to it any more. */
  unhold(ino: number): void;
  /** Add an open (a hold without creating). */
  addOpen(ino: number): void;
  addLookup(ino: number, n: number): void;
  forget(ino: number, n: number): void;
  /** Remove `name` from `parent` (unlink, rmdir, replaced by rename, vanished in a reload). */
  detach(parent: number, name: string): void;
  /** Rename in the table: `to` is detached, the node of `from` (if known) moves there. */
  move(parent: number, name: string, newParent: number, newName: string): void;
  flags(ino: number): number;
  setFlags(ino: number, mask: number, value: number): void;
  openedSize(ino: number): number;
  setOpenedSize(ino: number, size: number): void;
  /** Shared tables: the descriptor of a backed open of this node (its size), -1 if none. */
  backedFd(ino: number): number;
  setBackedFd(ino: number, fd: number, ifFd?: number): void;
  /** Nodes the kernel holds under their current paths (hot reload compares these). */
  known(): KnownNode[];

  // ---- file handles ----
  /** A new fh; shared tables keep `rec` where every thread finds it. */
  newHandle(rec: HandleRecord | null): number;
  /** Shared tables: the record of an fh another thread opened (null: unknown or released). */
  handle(fh: number): HandleRecord | null;
  freeHandle(fh: number): void;
}

export function joinPath(dir: string, name: string): string {
  return dir === "/" ? "/" + name : dir + "/" + name;
}

class Node {
  nlookup = 0;
  opens = 0;
  readonly children = new Map<string, Node>();
  flags = 0;
  openedSize = 0;
  /** Set once unlinked or replaced: the path it had. */
  stalePath: string | null = null;
  constructor(readonly ino: number, public name: string, public parent: Node | null) {}

  get path(): string {
    if (this.stalePath !== null) return this.stalePath;
    if (!this.parent) return "/";
    const parts: string[] = [];
    let n: Node | null = this;
    for (; n && n.parent; n = n.parent) parts.push(n.name);
    // Under a detached directory (one a hot reload removed while a process has its cwd there):
    // paths continue from where it was, never from the root.
    const base = n && n.stalePath !== null && n.stalePath !== "/" ? n.stalePath : "";
    return base + "/" + parts.reverse().join("/");
  }
}

/** One thread's node table (the default: no declaration, one thread). */
export class LocalNodes implements NodeTable {
  readonly share = null;
  private readonly nodes = new Map<number, Node>();
  private readonly root: Node;
  private nextIno = 2;
  private nextFh = 1;

  constructor() {
    this.root = new Node(ROOT, "", null);
    this.root.nlookup = 1; // the kernel's reference to the root is never given back
    this.nodes.set(ROOT, this.root);
  }

  get count(): number {
    return this.nodes.size;
  }

  private node(ino: number): Node {
    const n = this.nodes.get(ino);
    if (!n) throw new FuseError("ESTALE", `unknown node id ${ino}`);
    return n;
  }

  has(ino: number): boolean {
    return this.nodes.has(ino);
  }

  pathOf(ino: number): string | undefined {
    return this.nodes.get(ino)?.path;
  }

  parentOf(ino: number): number {
    return this.nodes.get(ino)?.parent?.ino ?? 0;
  }

  childOf(parent: number, name: string): number | undefined {
    return this.nodes.get(parent)?.children.get(name)?.ino;
  }

  hold(parent: number, name: string): number {
    const p = this.node(parent);
    let n = p.children.get(name);
    if (!n) {
      n = new Node(this.nextIno++, name, p);
      p.children.set(name, n);
      this.nodes.set(n.ino, n);
    }
    n.opens++;
    return n.ino;
  }

  unhold(ino: number): void {
    const n = this.nodes.get(ino);
    if (!n) return;
    n.opens--;
    this.maybeDrop(n);
  }

  addOpen(ino: number): void {
    this.node(ino).opens++;
  }

  addLookup(ino: number, k: number): void {
    this.node(ino).nlookup += k;
  }

  forget(ino: number, k: number): void {
    const n = this.nodes.get(ino);
    if (!n || n === this.root) return;
    n.nlookup -= k;
    if (n.nlookup < 0) n.nlookup = 0;
    this.maybeDrop(n);
  }

  /** Free a node nobody refers to any more (and, in turn, parents kept only for it). */
  private maybeDrop(n: Node | null): void {
    while (n && n !== this.root && n.nlookup <= 0 && n.opens <= 0 && n.children.size === 0) {
      this.nodes.delete(n.ino);
      const p: Node | null = n.parent;
      if (p && p.children.get(n.name) === n) p.children.delete(n.name);
      n.parent = null;
      n = p;
    }
  }

  detach(parent: number, name: string): void {
    const p = this.nodes.get(parent);
    const n = p?.children.get(name);
    if (!p || !n) return;
    // Kept (by id) while the kernel holds it or a file is open; its old path is what handlers
    // see for it from now on (an open, unlinked file).
    n.stalePath = n.path;
    p.children.delete(name);
    n.parent = null;
    this.maybeDrop(n);
  }

  move(parent: number, name: string, newParent: number, newName: string): void {
    const p = this.node(parent);
    const np = this.node(newParent);
    const moving = p.children.get(name);
    this.detach(newParent, newName);
    if (moving) {
      p.children.delete(name);
      moving.name = newName;
      moving.parent = np;
      np.children.set(newName, moving);
    }
  }

  flags(ino: number): number {
    return this.nodes.get(ino)?.flags ?? 0;
  }

  setFlags(ino: number, mask: number, value: number): void {
    const n = this.nodes.get(ino);
    if (n) n.flags = (n.flags & ~mask) | (value & mask);
  }

  openedSize(ino: number): number {
    return this.nodes.get(ino)?.openedSize ?? 0;
  }

  setOpenedSize(ino: number, size: number): void {
    const n = this.nodes.get(ino);
    if (n) n.openedSize = size;
  }

  backedFd(_ino: number): number {
    return -1; // one thread: PathFS's own list of backed handles answers
  }

  setBackedFd(): void {}

  known(): KnownNode[] {
    const out: KnownNode[] = [];
    for (const n of this.nodes.values()) {
      if (n.stalePath === null && (n === this.root || n.parent)) out.push({ ino: n.ino, path: n.path, parent: n.parent?.ino ?? 0, name: n.name });
    }
    return out;
  }

  newHandle(): number {
    return this.nextFh++;
  }

  handle(): HandleRecord | null {
    return null;
  }

  freeHandle(): void {}
}
