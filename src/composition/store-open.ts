/**
 * Opening the store a node config names, for a one-shot command (fails at once, exit 1) or a node
 * (retried until it opens, exit 2 when it never can); the messages hold no password.
 */
import type { OpenStoreOptions } from "../adapters/store-factory.js";
import { openStore } from "../adapters/store-factory.js";
import type { NodeConfig } from "../config/node-config.js";
import { describeStoreLocation } from "../config/store-location.js";
import { StoreMissingError } from "../ports/errors.js";
import type { Logger } from "../ports/logger.js";
import type { Store } from "../ports/store.js";
import { SetupError, EXIT_CONFIG } from "./setup-error.js";
import { openWithRetry } from "./store-retry.js";

/** What the config says about how to open its store. */
function storeOptions(config: NodeConfig): OpenStoreOptions {
  return { poolSize: config.storePoolSize, sqliteSynchronous: config.sqliteSynchronous };
}

/**
 * Opens the config's store; a failure is a SetupError (exit 1) whose message holds no password.
 * `existing`: a read-only command's open, which never creates a store (no file, no tables).
 */
export async function openConfiguredStore(
  config: NodeConfig,
  { existing = false }: { existing?: boolean } = {},
): Promise<Store> {
  try {
    return await openStore(config.store, { ...storeOptions(config), existing });
  } catch (err) {
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
      () => openStore(config.store, storeOptions(config)),
      logger.child({ store: describeStoreLocation(config.store) }),
      storeErrorText,
      stopped,
    );
  } catch (err) {
    throw new SetupError(
      `cannot open the store ${describeStoreLocation(config.store)}: ${storeErrorText(err)}`,
      EXIT_CONFIG,
    );
  }
}

function scrub(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)[^@/?#\s]+@/gi, "$1[redacted]@");
}
