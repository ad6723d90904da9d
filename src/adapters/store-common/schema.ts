/**
 * What both stores' migrations share: their shape, and the status lists of the CHECK constraints.
 * The lists are literal text, not built from the domain's enums: a released migration must never
 * change, even when a later version adds a status (that needs a new migration in each store).
 */

export interface Migration {
  version: number;
  /** One line for `dagbot migrate`'s plan. */
  summary: string;
  /**
   * Set on a migration after which the store refuses the writes of nodes speaking an older fleet
   * protocol (docs/architecture.md §11): they finish what they run and take no new work.
   */
  fleetProtocol?: number;
  sql: string;
}

/** One step of a migration plan, as `dagbot migrate` prints it. */
export interface MigrationStep {
  version: number;
  summary: string;
  fleetProtocol: number | null;
}

/** The steps from `from` to the last migration. */
export function planSteps(migrations: readonly Migration[], from: number): MigrationStep[] {
  return migrations
    .filter((m) => m.version > from)
    .map((m) => ({ version: m.version, summary: m.summary, fleetProtocol: m.fleetProtocol ?? null }));
}

export const TASK_STATUS_LIST = `('blocked','queued','running','canceling','succeeded','failed','timed_out','canceled','skipped')`;
export const RUN_STATUS_LIST = `('pending','running','canceling','succeeded','failed','canceled','rejected','expired')`;

export const latestVersion = (migrations: readonly Migration[]): number =>
  migrations[migrations.length - 1]?.version ?? 0;
