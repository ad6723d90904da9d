/**
 * vitest glue for the Synapse harness: one homeserver per test file, started in beforeAll, its data
 * dir kept (and its path printed) when any test of the file failed.
 */
import { afterAll, afterEach, beforeAll } from "vitest";
import { startSynapse, type StartSynapseOptions, type SynapseHandle } from "./synapse.js";

export interface SynapseFixture {
  /** The running homeserver; only valid inside tests and hooks that run after beforeAll. */
  readonly hs: SynapseHandle;
}

export function useSynapse(opts: StartSynapseOptions = {}): SynapseFixture {
  let handle: SynapseHandle | undefined;
  beforeAll(async () => {
    handle = await startSynapse(opts);
  });
  afterEach((ctx) => {
    if (ctx.task.result?.state === "fail") handle?.keepDataDir();
  });
  afterAll(async () => {
    await handle?.dispose();
  });
  return {
    get hs(): SynapseHandle {
      if (!handle) throw new Error("Synapse is not started: use fixture.hs inside tests or later hooks");
      return handle;
    },
  };
}
