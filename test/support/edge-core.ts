/**
 * A core's HTTP API in this process over a real store, for the edge tests: the edge routes with the
 * tokens given, and nothing behind the read, command and status routes (docs/operations.md, "Edge nodes").
 */
import { afterEach, beforeEach } from "vitest";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { startHttpApi } from "../../src/adapters/http/server.js";
import type { HttpApi } from "../../src/adapters/http/server.js";
import type { HttpConfig } from "../../src/config/node-config.js";
import type { Clock } from "../../src/ports/clock.js";
import type { Store } from "../../src/ports/store.js";
import type { SqliteTestDb } from "./sqlite-harness.js";
import { sqliteTestDb } from "./sqlite-harness.js";

/**
 * `clock`: the time of the window that gathers edges' heartbeats and of a claim's wait for its turn
 * (default: the system clock); `storePoolSize`: what the claims' admission is sized from (default 2).
 */
export function startEdgeCore(
  store: Store,
  config: HttpConfig,
  room: string,
  clock?: Clock,
  storePoolSize?: number,
): Promise<HttpApi> {
  return startHttpApi({
    config,
    session: "core/boot",
    rooms: [room],
    store,
    logger: silentLogger(),
    ...(clock === undefined ? {} : { clock }),
    ...(storePoolSize === undefined ? {} : { storePoolSize }),
    read: async () => {
      throw new Error("no reads here");
    },
    awaitCommand: async () => null,
    leaderTerm: () => null,
    outboxPending: async () => null,
    readiness: async () => ({}),
    snapshot: async () => ({}),
  });
}

/**
 * A test's SQLite store and the core API it starts over it, closed after each test (the store's
 * folder kept when the test failed, to look at): `open` makes the store, `serve` takes the API to
 * close. For the edge tests that each open one of both per test.
 */
export function edgeCoreTestbed(label: string): {
  open(): Promise<Store>;
  serve(api: HttpApi): HttpApi;
} {
  let db: SqliteTestDb | undefined;
  let store: Store | undefined;
  let api: HttpApi | undefined;
  let failed = false;
  beforeEach(({ onTestFailed }) => {
    failed = false;
    onTestFailed(() => {
      failed = true;
    });
  });
  afterEach(async () => {
    await api?.close();
    await store?.close();
    db?.cleanup(failed);
    api = undefined;
    store = undefined;
    db = undefined;
  });
  return {
    open: async () => {
      db = sqliteTestDb(label);
      store = await db.open();
      return store;
    },
    serve: (started) => {
      api = started;
      return started;
    },
  };
}
