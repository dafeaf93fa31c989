// Errno values (Linux, x86_64/aarch64 generic) and the typed error handlers throw.
// A handler that throws a FuseError answers with that errno; anything else answers EIO.

export const Errno = {
  EPERM: 1, ENOENT: 2, ESRCH: 3, EINTR: 4, EIO: 5, ENXIO: 6, E2BIG: 7, EBADF: 9, EAGAIN: 11,
  ENOMEM: 12, EACCES: 13, EFAULT: 14, EBUSY: 16, EEXIST: 17, EXDEV: 18, ENODEV: 19,
  ENOTDIR: 20, EISDIR: 21, EINVAL: 22, ENFILE: 23, EMFILE: 24, ENOTTY: 25, ETXTBSY: 26,
  EFBIG: 27, ENOSPC: 28, ESPIPE: 29, EROFS: 30, EMLINK: 31, EPIPE: 32, ERANGE: 34,
  EDEADLK: 35, ENAMETOOLONG: 36, ENOLCK: 37, ENOSYS: 38, ENOTEMPTY: 39, ELOOP: 40,
  ENODATA: 61, EPROTO: 71, EOVERFLOW: 75, EBADFD: 77, EOPNOTSUPP: 95, ENOTSUP: 95, ENOTCONN: 107,
  ETIMEDOUT: 110, ECONNABORTED: 103, ECANCELED: 125, EDQUOT: 122, ESTALE: 116,
} as const;

export type ErrnoName = keyof typeof Errno;

const errnoNames: Record<number, string> = {};
for (const [name, value] of Object.entries(Errno)) errnoNames[value] ??= name;

export function errnoName(errno: number): string {
  return errnoNames[errno] ?? `errno ${errno}`;
}

/** Throw this from any handler to answer the kernel with an errno. */
export class FuseError extends Error {
  readonly errno: number;
  constructor(code: ErrnoName | number, message?: string) {
    const errno = typeof code === "number" ? code : Errno[code];
    if (!Number.isInteger(errno) || errno <= 0 || errno >= 512) {
      throw new RangeError(`FuseError: ${String(code)} is not an errno (1..511)`);
    }
    super(message ?? errnoName(errno));
    this.name = "FuseError";
    this.errno = errno;
  }
}

/** Map an exception to the errno sent to the kernel, or null if it is not an errno error. */
export function errnoOf(err: unknown): number | null {
  if (err instanceof FuseError) return err.errno;
  // Node/Bun system errors ({ code: "ENOENT", errno: -2 }) keep their errno, so a handler
  // that simply lets fs.promises throw reports the real cause.
  if (err && typeof err === "object") {
    const code = (err as { code?: unknown }).code;
    if (typeof code === "string" && code in Errno) return Errno[code as ErrnoName];
    const errno = (err as { errno?: unknown }).errno;
    if (typeof code === "string" && typeof errno === "number" && errno < 0 && errno > -512) return -errno;
  }
  return null;
}
