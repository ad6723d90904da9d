/**
 * Typed errors that cross the port boundary. A lost compare-and-set is a normal outcome
 * (ConflictError, logged at debug, never retried blindly); a missing row is NotFoundError; anything
 * else from a store (connection refused, SQL error, disk full) is StoreError and is the only kind
 * that loops back off on (docs/architecture.md §3).
 */

/** Someone else moved first: the row was not in the state the caller expected. */
export class ConflictError extends Error {
  override readonly name = "ConflictError";
  constructor(
    /** What was attempted, e.g. "renew task lease". */
    readonly operation: string,
    /** What the caller expected, e.g. { status: "running", version: 3, executor: "n1/boot" }. */
    readonly expected: Record<string, unknown>,
    /** What the store found instead (null when the row could not be read back). */
    readonly found: Record<string, unknown> | null,
  ) {
    super(`${operation}: conflict (expected ${JSON.stringify(expected)}, found ${JSON.stringify(found)})`);
  }
}

/** The row the operation names does not exist. */
export class NotFoundError extends Error {
  override readonly name = "NotFoundError";
  constructor(
    readonly operation: string,
    readonly key: Record<string, unknown>,
  ) {
    super(`${operation}: not found ${JSON.stringify(key)}`);
  }
}

/** The store itself failed (connection, SQL, I/O). Retry with backoff. */
export class StoreError extends Error {
  override readonly name = "StoreError";
  constructor(
    readonly operation: string,
    options: { cause: unknown },
  ) {
    const cause = options.cause instanceof Error ? options.cause.message : String(options.cause);
    super(`${operation}: store error: ${cause}`, options);
  }
}

/** The store was written by a newer dagbot than this one: refuse to touch it. */
export class SchemaTooNewError extends Error {
  override readonly name = "SchemaTooNewError";
  constructor(
    readonly found: number,
    readonly supported: number,
  ) {
    super(
      `the store's schema is version ${found}, newer than this dagbot supports (${supported}); upgrade dagbot`,
    );
  }
}

/**
 * The store holds an older schema than this dagbot's, and this open may not migrate it: only
 * `dagbot migrate`, or a node that finds itself alone, does (docs/architecture.md §11).
 */
export class SchemaTooOldError extends Error {
  override readonly name = "SchemaTooOldError";
  constructor(
    readonly found: number,
    readonly wanted: number,
  ) {
    super(
      `the store's schema is version ${found}, older than this dagbot's (${wanted}); nothing was changed. ` +
        "Run 'dagbot migrate --dry-run' to see the migration and 'dagbot migrate' to apply it (docs/operations.md, Upgrading)",
    );
  }
}

/**
 * A store opened as existing holds no dagbot store (no such file, an empty database, another
 * program's file): nothing was created. Read-only commands open so, so a typo never makes a store.
 */
export class StoreMissingError extends Error {
  override readonly name = "StoreMissingError";
  constructor(readonly why: string) {
    super(`no dagbot store here: ${why}`);
  }
}

/**
 * A SQLite store's folder does not exist and the caller may not create it: only a node (`dagbot
 * node`, `start`, `run`) creates a store's folder, so a typo in any other
 * command's `--store` leaves no folders behind.
 */
export class StoreFolderMissingError extends Error {
  override readonly name = "StoreFolderMissingError";
  constructor(readonly folder: string) {
    super(`the folder ${folder} does not exist`);
  }
}

export const isConflict = (e: unknown): e is ConflictError => e instanceof ConflictError;
export const isNotFound = (e: unknown): e is NotFoundError => e instanceof NotFoundError;
