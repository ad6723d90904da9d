/**
 * Opens the Store a node config names: `sqlite:PATH` (creating the file's folder) or a PostgreSQL
 * URL. Each adapter is imported only when chosen, so a SQLite-only user never loads pg.
 */
import { closeSync, existsSync, mkdirSync, openSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { StoreLocation } from "../config/store-location.js";
import { StoreFolderMissingError, StoreMissingError } from "../ports/errors.js";
import type { Store, StoreInspection, StoreOptions } from "../ports/store.js";

export interface OpenStoreOptions extends StoreOptions {
  /** A PostgreSQL store's pool size (ignored for SQLite). */
  poolSize?: number;
  /** A PostgreSQL store reached through a transaction-mode pooler (ignored for SQLite); default "none". */
  pooler?: "none" | "transaction";
  /** A SQLite store's synchronous pragma (ignored for PostgreSQL); default full. */
  sqliteSynchronous?: "full" | "normal";
  /**
   * Create a SQLite store's missing folder: a node's open only (and migrating, which a node does). Without it a
   * missing folder is a StoreFolderMissingError and nothing is created.
   */
  createFolder?: boolean;
}

export async function openStore(location: StoreLocation, options: OpenStoreOptions = {}): Promise<Store> {
  if (location.kind === "sqlite") {
    const path = resolve(location.path);
    if (options.existing === true && !existsSync(path)) throw new StoreMissingError(`${path} does not exist`);
    // Owner-only: the file holds commands, arguments and task output. Folders
    // and the file are created so; SQLite gives its -wal and -shm files the database file's mode.
    if (!existsSync(dirname(path))) {
      if (options.createFolder !== true) throw new StoreFolderMissingError(dirname(path));
      mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    }
    try {
      closeSync(openSync(path, "wx", 0o600));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const { openSqliteStore } = await import("./sqlite/index.js");
    const { sqliteSynchronous, createFolder: _createFolder, pooler: _pooler, ...rest } = options;
    return openSqliteStore(path, {
      ...rest,
      ...(sqliteSynchronous === undefined ? {} : { synchronous: sqliteSynchronous }),
    });
  }
  const { openPostgresStore } = await import("./postgres/index.js");
  return openPostgresStore(location.url, options);
}

/**
 * What the store holds before anything changes it: its schema, the steps to this release's and the
 * nodes it has heard of (docs/architecture.md §11). A SQLite file that does not exist is an empty store.
 */
export async function inspectStore(
  location: StoreLocation,
  options: Pick<OpenStoreOptions, "pooler"> = {},
): Promise<StoreInspection> {
  if (location.kind === "sqlite") {
    const path = resolve(location.path);
    const { inspectSqliteStore } = await import("./sqlite/upgrade.js");
    if (!existsSync(path)) {
      const { LATEST_SCHEMA_VERSION } = await import("./sqlite/migrations.js");
      return { schema: 0, latest: LATEST_SCHEMA_VERSION, steps: [], nodes: [] };
    }
    return inspectSqliteStore(path);
  }
  const { inspectPostgresStore } = await import("./postgres/upgrade.js");
  return inspectPostgresStore(location.url, "public", options.pooler);
}

/** Where a SQLite store's backup before migrating from `from` goes: beside it, named by schema and time. */
export function sqliteBackupPath(path: string, from: number, now: Date): string {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d+Z$/, "Z");
  return `${resolve(path)}.schema${from}-${stamp}.bak`;
}

/**
 * Migrates the store to this release's schema. A SQLite store of an older schema is copied first
 * (online, owner-only) to `backup`; PostgreSQL is backed up by its operator (README "Upgrading").
 */
export async function migrateStore(
  location: StoreLocation,
  options: OpenStoreOptions & { backup?: string },
): Promise<{ from: number; to: number; backup: string | null }> {
  const before = await inspectStore(location, options);
  let backup: string | null = null;
  if (
    location.kind === "sqlite" &&
    options.backup !== undefined &&
    before.schema > 0 &&
    before.steps.length > 0
  ) {
    const { backupSqliteStore } = await import("./sqlite/upgrade.js");
    await backupSqliteStore(resolve(location.path), options.backup);
    backup = options.backup;
  }
  const { backup: _unused, ...open } = options;
  const store = await openStore(location, { ...open, migrate: true, createFolder: true });
  await store.close();
  return { from: before.schema, to: before.latest, backup };
}
