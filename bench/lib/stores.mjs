/** A fresh store location per section and store kind: a scratch PostgreSQL database or a SQLite file in a temp dir. */
import { join } from "node:path";
import { load } from "./dist.mjs";

export const STORE_KINDS = ["sqlite", "postgres"];

/** Returns the location string node configs use, the bench's own Store on it, and the temp dir. */
export async function freshStore(scratch, kind, part) {
  const dir = scratch.dir(`${part}-${kind}`);
  if (kind === "sqlite") {
    const path = join(dir, "store.db");
    const { openSqliteStore } = await load("adapters/sqlite/index.js");
    return { dir, location: `sqlite:${path}`, store: await openSqliteStore(path) };
  }
  const url = await scratch.database(`${part}_pg`);
  const { openPostgresStore } = await load("adapters/postgres/index.js");
  return { dir, location: url, store: await openPostgresStore(url, { poolSize: 4 }) };
}
