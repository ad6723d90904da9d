/**
 * Opening the store a node config names, for a one-shot command (fails at once, exit 1) or a node
 * (retried until it opens, exit 2 when it never can); the messages hold no password.
 */
import type { OpenStoreOptions } from "../adapters/store-factory.js";
import { inspectStore, migrateStore, openStore, sqliteBackupPath } from "../adapters/store-factory.js";
import { describeRelease } from "../domain/release.js";
import type { NodeConfig } from "../config/node-config.js";
import { describeStoreLocation } from "../config/store-location.js";
import { SchemaTooOldError, StoreFolderMissingError, StoreMissingError } from "../ports/errors.js";
import type { Logger } from "../ports/logger.js";
import type { Store, StoreInspection } from "../ports/store.js";
import { SetupError, EXIT_CONFIG } from "./setup-error.js";
import { openWithRetry } from "./store-retry.js";

/** What the config says about how to open its store. */
function storeOptions(config: NodeConfig): OpenStoreOptions {
  return {
    poolSize: config.storePoolSize,
    pooler: config.storePooler,
    sqliteSynchronous: config.sqliteSynchronous,
  };
}

/**
 * Opens the config's store; a failure is a SetupError (exit 1) whose message holds no password.
 * `existing`: a read-only command's open, which never creates a store (no file, no tables).
 * `node`: the open of a command that runs tasks (`dagbot run`), which migrates an older store as a
 * node does (migrateIfAlone); every other command refuses an older store and leaves it as it was.
 */
export async function openConfiguredStore(
  config: NodeConfig,
  { existing = false, node }: { existing?: boolean; node?: Logger } = {},
): Promise<Store> {
  try {
    // Only a command that runs tasks (a node of its own) creates a missing folder; a node's store.
    const open = (): Promise<Store> =>
      openStore(config.store, { ...storeOptions(config), existing, createFolder: node !== undefined });
    return await (node === undefined ? open() : openMigratingIfAlone(config, node, open));
  } catch (err) {
    if (err instanceof SetupError) throw err;
    if (err instanceof StoreFolderMissingError) {
      throw new SetupError(
        `cannot open the store ${describeStoreLocation(config.store)}: ${err.message}; only a node ` +
          "(dagbot node, start, run) creates a store's folder: check --store, DAGBOT_STORE " +
          "or the config's store, or create the folder",
        1,
      );
    }
    if (err instanceof StoreMissingError) {
      throw new SetupError(
        `no dagbot store at ${describeStoreLocation(config.store)} (${err.why}); this command only reads ` +
          "and creates none: check --store, DAGBOT_STORE or the config's store",
        1,
      );
    }
    throw new SetupError(
      `cannot open the store ${describeStoreLocation(config.store)}: ${storeErrorText(err)}`,
      1,
    );
  }
}

function storeErrorText(err: unknown): string {
  return scrub(err instanceof Error ? err.message : String(err));
}

/**
 * A node's store: a store that cannot be reached yet is retried with backoff (logged per attempt)
 * until it opens or `stopped` resolves (then null); one that refuses this config is a SetupError (exit 2).
 */
export async function openNodeStore(
  config: NodeConfig,
  logger: Logger,
  stopped: Promise<void>,
): Promise<Store | null> {
  try {
    return await openWithRetry(
      () =>
        openMigratingIfAlone(config, logger, () =>
          openStore(config.store, { ...storeOptions(config), createFolder: true }),
        ),
      logger.child({ store: describeStoreLocation(config.store) }),
      storeErrorText,
      stopped,
    );
  } catch (err) {
    if (err instanceof SetupError) throw err;
    throw new SetupError(
      `cannot open the store ${describeStoreLocation(config.store)}: ${storeErrorText(err)}`,
      EXIT_CONFIG,
    );
  }
}

/**
 * Opens the store; only when it is refused for an older schema does a node look at the fleet and
 * migrate (migrateIfAlone), so a store already current costs a start nothing more.
 */
async function openMigratingIfAlone(
  config: NodeConfig,
  logger: Logger,
  open: () => Promise<Store>,
): Promise<Store> {
  try {
    return await open();
  } catch (err) {
    if (!(err instanceof SchemaTooOldError)) throw err;
  }
  await migrateIfAlone(config, logger);
  return open();
}

/**
 * A node that finds its store at an older schema migrates it only where that cannot pull the store
 * from under other nodes (docs/architecture.md §11): `store_migrate = "when_alone"` (the default)
 * when no other node has a live heartbeat, `"always"`, never with `"never"`. Otherwise it refuses to
 * start, naming the live nodes and the command to run. A SQLite store is backed up first.
 */
export async function migrateIfAlone(config: NodeConfig, logger: Logger): Promise<void> {
  const seen = await inspectStore(config.store, storeOptions(config));
  if (seen.schema === 0 || seen.schema >= seen.latest) return;
  const where = describeStoreLocation(config.store);
  const command =
    "run 'dagbot migrate --dry-run' and then 'dagbot migrate' with this config (docs/operations.md, Upgrading)";
  if (config.storeMigrate === "never")
    throw new SetupError(
      `the store ${where} is at schema ${seen.schema} and this dagbot needs ${seen.latest}; store_migrate = "never": ${command}`,
      EXIT_CONFIG,
    );
  const live = seen.nodes.filter(
    (n) => n.nodeId !== config.nodeId && n.heartbeatAgeMs <= config.retention.nodeGoneAfterMs,
  );
  if (config.storeMigrate === "when_alone" && live.length > 0) {
    const names = live.map((n) => `${n.nodeId}: ${describeRelease(n.release, n.protocol)}`).join("; ");
    throw new SetupError(
      `the store ${where} is at schema ${seen.schema} and this dagbot needs ${seen.latest}; other nodes are live ` +
        `(${names}), so this node does not migrate it on its own: ${command}, or set store_migrate = "always"`,
      EXIT_CONFIG,
    );
  }
  const backup =
    config.store.kind === "sqlite" ? sqliteBackupPath(config.store.path, seen.schema, new Date()) : undefined;
  const done = await migrateStore(config.store, {
    ...storeOptions(config),
    ...(backup === undefined ? {} : { backup }),
  });
  logger.warn(
    { from: done.from, to: done.to, backup: done.backup, alone: live.length === 0 },
    "store migrated to this release's schema",
  );
}

function scrub(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)[^@/?#\s]+@/gi, "$1[redacted]@");
}

/** What `dagbot migrate` shows before it changes anything; a failure is a SetupError (exit 1). */
export async function inspectConfiguredStore(config: NodeConfig): Promise<StoreInspection> {
  try {
    return await inspectStore(config.store, storeOptions(config));
  } catch (err) {
    throw new SetupError(
      `cannot read the store ${describeStoreLocation(config.store)}: ${storeErrorText(err)}`,
      1,
    );
  }
}

/** `dagbot migrate`: the store to this release's schema, a SQLite store backed up first (its path returned). */
export async function migrateConfiguredStore(
  config: NodeConfig,
  from: number,
): Promise<{ from: number; to: number; backup: string | null }> {
  const backup =
    config.store.kind === "sqlite" ? sqliteBackupPath(config.store.path, from, new Date()) : undefined;
  try {
    return await migrateStore(config.store, {
      ...storeOptions(config),
      ...(backup === undefined ? {} : { backup }),
    });
  } catch (err) {
    throw new SetupError(
      `cannot migrate the store ${describeStoreLocation(config.store)}: ${storeErrorText(err)}; nothing was changed`,
      1,
    );
  }
}
