/** The Synapse harness for tests; it lives in src/ so that `dagbot demo` runs the same one. */
export * from "../../src/adapters/matrix/local-synapse.js";
