/**
 * What both stores' migrations share: their shape, and the status lists of the CHECK constraints.
 * The lists are literal text, not built from the domain's enums: a released migration must never
 * change, even when a later version adds a status (that needs a new migration in each store).
 */

export interface Migration {
  version: number;
  sql: string;
}

export const TASK_STATUS_LIST = `('blocked','queued','running','canceling','succeeded','failed','timed_out','canceled','skipped')`;
export const RUN_STATUS_LIST = `('pending','running','canceling','succeeded','failed','canceled','rejected','expired')`;

export const latestVersion = (migrations: readonly Migration[]): number =>
  migrations[migrations.length - 1]?.version ?? 0;
