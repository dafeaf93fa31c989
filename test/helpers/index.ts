export * from "./env.ts";
export * from "./run.ts";
export * from "./mounts.ts";
export * from "./daemon.ts";
export * from "./fixtures.ts";
