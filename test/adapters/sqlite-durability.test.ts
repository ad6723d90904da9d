/**
 * A SQLite store's durability is the node config's choice: synchronous FULL unless the
 * config says normal. The pragma is per connection, so it is read from the store's own connection.
 */
import { afterEach, describe, expect, it } from "vitest";
import { SqliteConnection } from "../../src/adapters/sqlite/connection.js";
import { parseConfig } from "../../src/config/load-config.js";
import type { SqliteTestDb } from "../support/sqlite-harness.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";

let db: SqliteTestDb | null = null;
const opened: SqliteConnection[] = [];

afterEach((ctx) => {
  for (const c of opened.splice(0)) c.close();
  db?.cleanup(ctx.task.result?.state === "fail");
  db = null;
});

async function synchronousOf(setting?: "full" | "normal"): Promise<unknown> {
  db ??= sqliteTestDb("durability");
  const c = await SqliteConnection.open(db.path, 5_000, Date.now, () => {}, setting);
  opened.push(c);
  return c.db.pragma("synchronous", { simple: true });
}

describe("sqlite durability", () => {
  it("is synchronous=FULL (2) by default and NORMAL (1) when asked", async () => {
    expect(await synchronousOf()).toBe(2);
    expect(await synchronousOf("full")).toBe(2);
    expect(await synchronousOf("normal")).toBe(1);
  });

  it("comes from the node config's sqlite_synchronous, full unless stated", () => {
    const read = (doc: Record<string, unknown>) => {
      const r = parseConfig({ node_id: "n1", ...doc }, { env: {} });
      if (!r.ok) throw new Error(JSON.stringify(r.issues));
      return r.config.sqliteSynchronous;
    };
    expect(read({})).toBe("full");
    expect(read({ sqlite_synchronous: "normal" })).toBe("normal");
  });
});
