/** The Synapse harness for tests; it lives in src/ so that `dagbot demo` runs the same one. */
import { installChildReaper } from "../../src/harness/child-reaper.js";

export * from "../../src/harness/local-synapse.js";

// The test process kills the homeservers it started if it exits without stopping them.
installChildReaper();
