// The CLI's `import … from "fuse-uring"` for scripts: lib/self-module.ts (worker threads
// register it too, from lib/worker-main.ts).
export { registerSelfModule } from "../lib/self-module.ts";
