/**
 * The one Store contract suite (docs/architecture.md §3, §4, §8), written once and run against every adapter:
 * test/adapters/sqlite.store.test.ts and test/adapters/postgres.store.test.ts call
 * describeStoreContract with a harness that reaches their database. Each section lives in
 * test/contracts/sections/ and is registered from the list below.
 */
import { afterAll, afterEach, beforeAll, describe, expect } from "vitest";
import type { Store, StoreOptions } from "../../src/ports/store.js";
import type { ContractCapabilities, ContractContext, ContractSection, StoreHarness } from "./context.js";
import { createTestClock } from "./context.js";
import { illegalMoves, readWholeLog } from "./event-log-oracle.js";
import { claimsSection } from "./sections/claims.js";
import { definitionsSection } from "./sections/definitions.js";
import { finishClaimSection } from "./sections/finish-claim.js";
import { fleetSection } from "./sections/fleet.js";
import { fanOutSection } from "./sections/fan-out.js";
import { gatesSection } from "./sections/gates.js";
import { inboxSection } from "./sections/inbox.js";
import { leasesSection } from "./sections/leases.js";
import { marksSection } from "./sections/marks.js";
import { eventlogSection } from "./sections/eventlog.js";
import { idempotencySection } from "./sections/idempotency.js";
import { migrationsSection } from "./sections/migrations.js";
import { nodesSection } from "./sections/nodes.js";
import { outboxSection } from "./sections/outbox.js";
import { outputsSection } from "./sections/outputs.js";
import { policiesSection } from "./sections/policies.js";
import { retentionSection } from "./sections/retention.js";
import { runConditionsSection } from "./sections/run-conditions.js";
import { runsSection } from "./sections/runs.js";
import { scaleSection } from "./sections/scale.js";
import { scheduleLoopSection } from "./sections/schedule-loop.js";
import { schedulerSection } from "./sections/scheduler.js";
import { schedulesSection } from "./sections/schedules.js";
import { triggersSection } from "./sections/triggers.js";

const sections: ReadonlyArray<readonly [string, ContractSection]> = [
  ["leases", leasesSection],
  ["inbox", inboxSection],
  ["runs", runsSection],
  ["definitions", definitionsSection],
  ["schedules", schedulesSection],
  ["schedule-loop", scheduleLoopSection],
  ["triggers", triggersSection],
  ["claims", claimsSection],
  ["finish-claim", finishClaimSection],
  ["fleet", fleetSection],
  ["outputs", outputsSection],
  ["scheduler", schedulerSection],
  ["gates", gatesSection],
  ["fan-out", fanOutSection],
  ["run-conditions", runConditionsSection],
  ["marks", marksSection],
  ["outbox", outboxSection],
  ["nodes", nodesSection],
  ["policies", policiesSection],
  ["idempotency", idempotencySection],
  ["eventlog", eventlogSection],
  ["migrations", migrationsSection],
  ["retention", retentionSection],
  ["scale", scaleSection],
];

export interface StoreContractOptions {
  name: string;
  create: () => Promise<StoreHarness>;
  capabilities: ContractCapabilities;
}

export function describeStoreContract({ name, create, capabilities }: StoreContractOptions): void {
  describe(`Store contract: ${name}`, () => {
    let harness: StoreHarness | undefined;
    let failed = false;
    let opened: Store[] = [];
    let perTest: Promise<Store> | undefined;
    let counter = 0;
    /** Rooms (ids starting with "!") this test made: the oracle reads their logs after it. */
    let rooms: string[] = [];
    const runTag = Math.random().toString(36).slice(2, 8);
    const clock = createTestClock();

    const open = async (options?: StoreOptions): Promise<Store> => {
      if (harness === undefined)
        throw new Error(`${name}: the store harness is not ready (create() failed?)`);
      const store = await harness.open({ clock: clock.now, ...options });
      opened.push(store);
      return store;
    };

    const ctx: ContractContext = {
      name,
      clock,
      capabilities,
      open,
      store: () => (perTest ??= open()),
      uid: (prefix) => {
        const id = `${prefix}-${runTag}-${++counter}`;
        if (prefix.startsWith("!")) rooms.push(id);
        return id;
      },
    };

    beforeAll(async () => {
      harness = await create();
      await harness.fresh();
    });

    afterEach(async (test) => {
      const made = rooms;
      rooms = [];
      if (test.task.result?.state !== "fail" && harness !== undefined && made.length > 0) {
        // The oracle: every task/run line this test's rooms logged is a legal move of the tables.
        const reader = await open();
        const problems: string[] = [];
        for (const room of made) problems.push(...illegalMoves(await readWholeLog(reader, room)));
        if (problems.length > 0) failed = true;
        expect(problems, "event log lines that are not legal moves of the domain's tables").toEqual([]);
      }
      if (test.task.result?.state === "fail") failed = true;
      const closing = opened;
      opened = [];
      perTest = undefined;
      await Promise.all(closing.map((s) => s.close()));
    });

    afterAll(async () => {
      await harness?.teardown(failed);
    });

    for (const [sectionName, section] of sections) describe(sectionName, () => section(ctx));
  });
}
