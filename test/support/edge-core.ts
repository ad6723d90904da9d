/**
 * A core's HTTP API in this process over a real store, for the edge tests: the edge routes with the
 * tokens given, and nothing behind the read, command and status routes (docs/operations.md, "Edge nodes").
 */
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { startHttpApi } from "../../src/adapters/http/server.js";
import type { HttpApi } from "../../src/adapters/http/server.js";
import type { HttpConfig } from "../../src/config/node-config.js";
import type { Clock } from "../../src/ports/clock.js";
import type { Store } from "../../src/ports/store.js";

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
