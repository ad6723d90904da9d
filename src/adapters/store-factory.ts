/**
 * Opens the Store a node config names: `sqlite:PATH` (creating the file's folder) or a PostgreSQL
 * URL. Each adapter is imported only when chosen, so a SQLite-only user never loads pg.
 */
import { closeSync, existsSync, mkdirSync, openSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { StoreLocation } from "../config/store-location.js";
import { StoreMissingError } from "../ports/errors.js";
import type { Store, StoreOptions } from "../ports/store.js";

export interface OpenStoreOptions extends StoreOptions {
  /** A PostgreSQL store's pool size (ignored for SQLite). */
  poolSize?: number;
  /** A SQLite store's synchronous pragma (ignored for PostgreSQL); default full. */
  sqliteSynchronous?: "full" | "normal";
}

export async function openStore(location: StoreLocation, options: OpenStoreOptions = {}): Promise<Store> {
  if (location.kind === "sqlite") {
    const path = resolve(location.path);
    if (options.existing === true && !existsSync(path)) throw new StoreMissingError(`${path} does not exist`);
    // Owner-only (issue 10, finding 3): the file holds commands, arguments and task output. Folders
    // and the file are created so; SQLite gives its -wal and -shm files the database file's mode.
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    try {
      closeSync(openSync(path, "wx", 0o600));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const { openSqliteStore } = await import("./sqlite/index.js");
    const { sqliteSynchronous, ...rest } = options;
    return openSqliteStore(path, {
      ...rest,
      ...(sqliteSynchronous === undefined ? {} : { synchronous: sqliteSynchronous }),
    });
  }
  const { openPostgresStore } = await import("./postgres/index.js");
  return openPostgresStore(location.url, options);
}
