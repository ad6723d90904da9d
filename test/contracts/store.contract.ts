/**
 * The one Store contract suite (DESIGN.md §3, §4, §8), written once and run against every adapter:
 * test/adapters/sqlite.store.test.ts and test/adapters/postgres.store.test.ts call
 * describeStoreContract with a harness that reaches their database. Each section lives in
 * test/contracts/sections/ and is registered from the list below.
 */
import { afterAll, afterEach, beforeAll, describe } from "vitest";
import type { Store, StoreOptions } from "../../src/ports/store.js";
import type { ContractCapabilities, ContractContext, ContractSection, StoreHarness } from "./context.js";
import { createTestClock } from "./context.js";
import { claimsSection } from "./sections/claims.js";
import { inboxSection } from "./sections/inbox.js";
import { leasesSection } from "./sections/leases.js";
import { eventlogSection } from "./sections/eventlog.js";
import { idempotencySection } from "./sections/idempotency.js";
import { migrationsSection } from "./sections/migrations.js";
import { nodesSection } from "./sections/nodes.js";
import { outboxSection } from "./sections/outbox.js";
import { policiesSection } from "./sections/policies.js";
import { retentionSection } from "./sections/retention.js";
import { runsSection } from "./sections/runs.js";
import { schedulerSection } from "./sections/scheduler.js";

const sections: ReadonlyArray<readonly [string, ContractSection]> = [
  ["leases", leasesSection],
  ["inbox", inboxSection],
  ["runs", runsSection],
  ["claims", claimsSection],
  ["scheduler", schedulerSection],
  ["outbox", outboxSection],
  ["nodes", nodesSection],
  ["policies", policiesSection],
  ["idempotency", idempotencySection],
  ["eventlog", eventlogSection],
  ["migrations", migrationsSection],
  ["retention", retentionSection],
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
      uid: (prefix) => `${prefix}-${runTag}-${++counter}`,
    };

    beforeAll(async () => {
      harness = await create();
      await harness.fresh();
    });

    afterEach(async (test) => {
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
