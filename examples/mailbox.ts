// A mailbox with poll(2) and ioctl(2): path handlers for a file that behaves like a device.
//
//   fuse-uring mount examples/mailbox.ts /mnt/mbox
//   echo hello > /mnt/mbox/inbox            # post a message (one per write)
//   cat /mnt/mbox/inbox                     # take every waiting message (each open takes them)
//   python3 -c 'import select; p = select.poll(); p.register(open("/mnt/mbox/inbox"), select.POLLIN); print(p.poll())'
//
// - poll: /inbox is readable (POLLIN) while messages wait. A poller that finds nothing waits;
//   the handler keeps its `wakeup` and calls it when a message arrives (FUSE_NOTIFY_POLL), and
//   the kernel polls again.
// - ioctl on /inbox: MBOX_COUNT (_IOR('m', 1, u32)) answers the number of waiting messages,
//   MBOX_POST (_IOW('m', 3, char[64])) posts the NUL-padded text it is given, MBOX_CLEAR
//   (_IO('m', 2)) drops them all; other commands: ENOTTY.
import { FuseError, opened, paths } from "../lib/index.ts";

/** _IOC(dir, type, nr, size) of <asm-generic/ioctl.h>: dir 1 = write (to the driver), 2 = read. */
function ioc(dir: number, type: string, nr: number, size: number): number {
  return ((dir << 30) | (size << 16) | (type.charCodeAt(0) << 8) | nr) >>> 0;
}
export const MBOX_COUNT = ioc(2, "m", 1, 4);
export const MBOX_CLEAR = ioc(0, "m", 2, 0);
export const MBOX_POST = ioc(1, "m", 3, 64);

const POLLIN = 0x001, POLLOUT = 0x004, POLLRDNORM = 0x040, POLLWRNORM = 0x100;

const messages: string[] = [];
/** Pollers waiting for a message: each wakeup is called once. */
const waiting = new Set<() => void>();

function post(text: string): void {
  messages.push(text.endsWith("\n") ? text : text + "\n");
  for (const wake of waiting) wake();
  waiting.clear();
}

export default paths<{ text: string }>({
  getattr(path) {
    if (path === "/") return { type: "dir" };
    if (path === "/inbox") return { type: "file", mode: 0o666, sizeAtOpen: true };
    return null;
  },
  readdir: () => ["inbox"],
  // Every open takes the waiting messages; reads go to the handler (direct I/O).
  open(_path, _flags) {
    const text = messages.join("");
    messages.length = 0;
    return opened({ text }, { directIo: true });
  },
  read(_path, offset, size, fh) {
    return Buffer.from(fh.text).subarray(offset, offset + size);
  },
  write(_path, data) {
    post(data.toString());
    return data.length;
  },
  truncate() {},
  poll(path, events, wakeup) {
    if (path !== "/inbox") return events & (POLLIN | POLLOUT);
    const ready = POLLOUT | POLLWRNORM | (messages.length ? POLLIN | POLLRDNORM : 0);
    if (!(ready & events & (POLLIN | POLLRDNORM)) && wakeup) waiting.add(wakeup);
    return ready & events;
  },
  ioctl(path, cmd, data, outSize) {
    if (path !== "/inbox") throw new FuseError("ENOTTY");
    switch (cmd) {
      case MBOX_COUNT: {
        const out = Buffer.alloc(Math.min(4, outSize));
        out.writeUInt32LE(messages.length);
        return out;
      }
      case MBOX_CLEAR:
        messages.length = 0;
        return 0;
      case MBOX_POST: {
        const end = data.indexOf(0);
        post(data.subarray(0, end < 0 ? data.length : end).toString());
        return messages.length;
      }
      default:
        throw new FuseError("ENOTTY");
    }
  },
});
