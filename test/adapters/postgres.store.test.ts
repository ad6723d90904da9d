/** The Store contract against a real PostgreSQL server (one database per test file, kept if a test fails). */
import { describeStoreContract } from "../contracts/store.contract.js";
import { postgresHarness } from "../support/postgres-harness.js";

const { create, capabilities } = postgresHarness();

describeStoreContract({ name: "postgres", create, capabilities });
