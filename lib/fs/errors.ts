// The errno error type, as users import it (lib/index.ts re-exports it; scripts import this file
// directly). Defined in the protocol layer (lib/protocol/errors.ts), where the engine answers the
// kernel with it; one class either way, so `instanceof FuseError` holds whichever path imported it.
export { Errno, errnoName, errnoOf, FuseError, type ErrnoName } from "../protocol/errors.ts";
