/** The command table and inbox step against a real SQLite store file. */
import { sqliteTestDb } from "../support/sqlite-harness.js";
import { describeCommandSuite } from "./commands.suite.js";

describeCommandSuite({
  name: "sqlite",
  open: async () => {
    const db = sqliteTestDb("commands");
    const store = await db.open();
    const count = (table: string): number =>
      (db.raw().prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
    return {
      store,
      counts: async () => ({ runs: count("runs"), tasks: count("tasks"), outbox: count("outbox") }),
      close: async (failed) => {
        await store.close();
        db.cleanup(failed);
      },
    };
  },
});
