// Computed content: every open of a file evaluates its function (never ls or stat), and `cat`
// sees all bytes of that evaluation (served with direct I/O; stat reports the size of the last
// open's content).
//
//   fuse-uring mount examples/clock.ts /mnt/clock
//   cat /mnt/clock/now.txt; ls /mnt/clock/ticks
import { dir, tree } from "fuse-uring";

const started = Date.now();

export default tree({
  "README.txt": "Files in this directory are computed each time they are opened.\n",
  "now.txt": () => new Date().toISOString() + "\n",
  "unix.txt": () => `${Math.floor(Date.now() / 1000)}\n`,
  "uptime.txt": () => `${((Date.now() - started) / 1000).toFixed(3)} s\n`,
  // Async producers work too; a larger file (about 8 KiB) to show that every byte arrives.
  "year.txt": async () => {
    const year = new Date().getFullYear();
    const lines: string[] = [];
    for (let d = new Date(Date.UTC(year, 0, 1)); d.getUTCFullYear() === year; d.setUTCDate(d.getUTCDate() + 1)) {
      lines.push(`${d.toISOString().slice(0, 10)} ${d.toLocaleDateString("en-US", { weekday: "long", timeZone: "UTC" })}`);
    }
    return lines.join("\n") + "\n";
  },
  zones: {
    "utc.txt": () => new Date().toUTCString() + "\n",
    "local.txt": () => new Date().toString() + "\n",
  },
  // A directory computed per access: tick-0 … tick-N, N = seconds of the minute / 10.
  ticks: dir(() => {
    const n = Math.floor(new Date().getSeconds() / 10) + 1;
    return Object.fromEntries(Array.from({ length: n }, (_, i) => [`tick-${i}`, `${i}\n`]));
  }),
});
