/** The Store contract against a real SQLite file (one per test file, kept if a test fails). */
import { describeStoreContract } from "../contracts/store.contract.js";
import { sqliteHarness } from "../support/sqlite-harness.js";

const { create, capabilities } = sqliteHarness("sqlite-contract");

describeStoreContract({ name: "sqlite", create, capabilities });
