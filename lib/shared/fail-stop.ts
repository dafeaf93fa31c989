// Fail-stop: the one way any thread of a daemon reports that the mount can no longer be served
// correctly (a worker died, a shared lock was held past its bound, an invariant broke).
// A half-working mount is worse than a dead one: the engine aborts the connection (callers get
// ENOTCONN, never a hang), prints one line that says why and exits non-zero.
//
// Lower layers (shared primitives, filesystems) call failStop(); the engine installs the handler
// on every thread it runs handlers on (onFailStop). Without a handler (a unit test, a tool that
// uses a primitive alone) the reason is thrown as a FailStopError.

export class FailStopError extends Error {
  override name = "FailStopError";
}

export type FailStopHandler = (reason: string) => void;

let handler: FailStopHandler | null = null;

/** The engine's hook: called once per thread with what to do on a fail-stop. */
export function onFailStop(h: FailStopHandler | null): void {
  handler = h;
}

/** Stop the daemon because `reason` makes correct service impossible. Never returns. */
export function failStop(reason: string): never {
  const h = handler;
  if (h) h(reason);
  // The handler started the stop (abort + exit); this thread must not go on serving meanwhile.
  throw new FailStopError(reason);
}
