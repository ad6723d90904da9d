/** The test Synapse config renderer; it lives in src/ so that `dagbot demo` renders the same one. */
export * from "../../src/harness/synapse-config.js";
