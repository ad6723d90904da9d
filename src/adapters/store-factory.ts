/**
 * Opens the Store a node config names: `sqlite:PATH` (creating the file's folder) or a PostgreSQL
 * URL. Each adapter is imported only when chosen, so a SQLite-only user never loads pg.
 */
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { StoreLocation } from "../config/store-location.js";
import type { Store, StoreOptions } from "../ports/store.js";

export interface OpenStoreOptions extends StoreOptions {
  /** A PostgreSQL store's pool size (ignored for SQLite). */
  poolSize?: number;
}

export async function openStore(location: StoreLocation, options: OpenStoreOptions = {}): Promise<Store> {
  if (location.kind === "sqlite") {
    const path = resolve(location.path);
    mkdirSync(dirname(path), { recursive: true });
    const { openSqliteStore } = await import("./sqlite/index.js");
    return openSqliteStore(path, options);
  }
  const { openPostgresStore } = await import("./postgres/index.js");
  return openPostgresStore(location.url, options);
}
