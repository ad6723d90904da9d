/**
 * What both stores' migrations share: their shape, read from a numbered SQL file
 * (store-common/migrations.ts), and the plan `dagbot migrate` prints. A file's SQL is literal
 * text, the CHECK constraints' status lists too, not built from the domain's enums: a released
 * migration must never change, even when a later version adds a status (that needs a new migration
 * in each store).
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
