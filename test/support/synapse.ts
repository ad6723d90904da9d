/** The Synapse harness for tests; it lives in src/ so that `dagbot demo` runs the same one. */
import { installChildReaper } from "../../src/adapters/matrix/child-reaper.js";

export * from "../../src/adapters/matrix/local-synapse.js";

// The test process kills the homeservers it started if it exits without stopping them.
installChildReaper();
