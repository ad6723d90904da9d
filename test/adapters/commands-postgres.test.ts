/** The command table and inbox step against a real PostgreSQL store (a fresh database for this file). */
import { openPostgresStore } from "../../src/adapters/postgres/index.js";
import { createTestDatabase, dropOrKeep } from "../support/postgres.js";
import { describeCommandSuite } from "./commands.suite.js";

describeCommandSuite({
  name: "postgres",
  open: async () => {
    const db = await createTestDatabase();
    const store = await openPostgresStore(db.url, { poolSize: 4 });
    const count = async (table: string): Promise<number> =>
      Number((await db.query<{ n: string }>(`SELECT COUNT(*) AS n FROM ${table}`))[0]?.n ?? 0);
    return {
      store,
      counts: async () => ({
        runs: await count("runs"),
        tasks: await count("tasks"),
        outbox: await count("outbox"),
      }),
      close: async (failed) => {
        await store.close();
        await dropOrKeep(db, failed);
      },
    };
  },
});
