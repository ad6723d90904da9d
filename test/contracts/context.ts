/**
 * What a store contract section gets to work with: connections to ONE shared database, a clock the
 * test moves by hand, and the per-adapter hooks that reach into the database (fault injection,
 * schema version). Each adapter's test file builds these; sections never know which store they test.
 *
 * A section is a module under test/contracts/sections/ that exports one function named
 * `<file>Section` (leasesSection, inboxSection, runsSection, claimsSection, schedulerSection,
 * outboxSection, nodesSection, idempotencySection, eventlogSection, migrationsSection, retentionSection) of type
 * ContractSection; store.contract.ts registers it inside a describe block named after the file.
 */
import type { ParsedDag, RunStatus } from "../../src/domain/model.js";
import type { Store, StoreOptions } from "../../src/ports/store.js";

/** A runs row as an older dagbot wrote it (the columns of the first schema). */
export interface LegacyRun {
  runId: string;
  roomId: string;
  dagId: string;
  hash: string;
  status: RunStatus;
  publisher: string;
  confirmedBy: string | null;
  createdAt: number;
  dag: ParsedDag;
}

/** A clock the test moves by hand; every store opened through the context reads it. */
export interface TestClock {
  /** The current time in epoch ms (pass `clock.now` as StoreOptions.clock). */
  now(): number;
  advance(ms: number): void;
  set(ms: number): void;
}

export function createTestClock(start = Date.UTC(2030, 0, 1)): TestClock {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
    set: (ms) => {
      t = ms;
    },
  };
}

/** Hooks each adapter's test file implements by talking to its database directly (never a switch in src/). */
export interface ContractCapabilities {
  /**
   * Make every later insert of a task row with this task id fail inside the database (a trigger),
   * until the returned function removes the trap. Proves createRun is all-or-nothing.
   */
  injectTaskInsertFailure(taskId: string): Promise<() => Promise<void>>;
  /** The highest migration version recorded in the database. */
  schemaVersion(): Promise<number>;
  /**
   * Run SQL (no parameters) on a connection of the shared store as a release before 0.2.0 makes
   * one: without declaring a fleet protocol (docs/architecture.md §11); with `protocol`, as a release
   * of that older protocol makes one (2: 0.2.0 to 0.4.0).
   */
  asOlderRelease(sql: string, protocol?: number): Promise<void>;
  /** Overwrite the recorded schema version (e.g. to a version newer than the code knows). */
  forceSchemaVersion(version: number): Promise<void>;
  /** The plan the store's claim query gets, as text lines (EXPLAIN QUERY PLAN / EXPLAIN). */
  explainClaim(): Promise<string[]>;
  /**
   * A second store, apart from the shared one, whose schema stops at `version` and holds these runs
   * rows as written by the dagbot of that version; `open` brings it up to date (the migration under test).
   */
  legacyStore(
    version: number,
    runs: readonly LegacyRun[],
  ): Promise<{ open(options?: StoreOptions): Promise<Store> }>;
  /**
   * `count` succeeded runs (no tasks) of definition `dagId` in `roomId`, named `<dagId>.2` on,
   * created at `createdAt`, with the definition row: in one statement, for a long history in little time.
   */
  insertFinishedRuns(roomId: string, dagId: string, count: number, createdAt: number): Promise<void>;
  /**
   * Set one task's status behind every store call's back: a writer the leader's scheduling view
   * does not follow (it proves the view cannot be fooled into starting a task early).
   */
  setTaskStatus(runId: string, taskId: string, status: string): Promise<void>;
}

/** What the adapter's test file hands to describeStoreContract: how to reach its database. */
export interface StoreHarness {
  /** A NEW connection (Store instance) to the same database; the caller closes it. */
  open(options?: StoreOptions): Promise<Store>;
  /** Wipe the data, or point at a new database/schema; called once per test file before the sections. */
  fresh(): Promise<void>;
  /** Drop what fresh() made; `failed` true means keep it and print where it is. */
  teardown(failed: boolean): Promise<void>;
}

export interface ContractContext {
  /** "sqlite" or "postgres", for messages only: sections must not branch on it. */
  readonly name: string;
  readonly clock: TestClock;
  readonly capabilities: ContractCapabilities;
  /**
   * A new connection to the shared database reading `clock` unless options say otherwise; closed
   * after the current test.
   */
  open(options?: StoreOptions): Promise<Store>;
  /** One connection per test, opened on first use and closed after the test. */
  store(): Promise<Store>;
  /** A fresh id with a readable prefix, unique within the run (rooms, dag ids, event ids, nodes). */
  uid(prefix: string): string;
}

export type ContractSection = (ctx: ContractContext) => void;
