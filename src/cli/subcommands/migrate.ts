/**
 * `dagbot migrate [--dry-run]`: shows what migrating the store to this release's schema does (from,
 * to, each step, the nodes it has heard of and whether they may run beside it) and applies it, a
 * SQLite store backed up first. The one command that changes a store's schema on purpose
 * (docs/architecture.md §11); nodes do it on their own only when alone.
 */
import type { Command } from "commander";
import { inspectConfiguredStore, migrateConfiguredStore } from "../../composition/store-open.js";
import { formatDuration } from "../../domain/duration.js";
import { describeRelease, FLEET_PROTOCOL, RELEASE } from "../../domain/release.js";
import { describeStoreLocation } from "../../config/store-location.js";
import { CliError, runCli } from "../cli-error.js";
import type { CommonOptions } from "../config-options.js";
import { resolveConfig, withCommonOptions } from "../config-options.js";

interface MigrateOptions extends CommonOptions {
  dryRun?: boolean;
  json?: boolean;
}

export function registerMigrate(program: Command): void {
  withCommonOptions(
    program
      .command("migrate")
      .description(
        "Show the migration of the store to this release's schema (from, to, each step, which live nodes may run beside it) and apply it; a SQLite store is backed up first.",
      )
      .option("--dry-run", "show the plan and change nothing")
      .option("--json", "print the plan and what was done as JSON"),
    "Other commands never migrate a store: read-only ones refuse an older schema and leave it as it\n" +
      "was, and a node migrates on its own only when no other node is live (store_migrate). A store of a\n" +
      "newer schema is refused: downgrades go through the backup taken before the upgrade (docs/operations.md,\n" +
      "Upgrading). Exit status: 0 migrated, already current, or shown (--dry-run); 1 store error or a\n" +
      "newer schema; 2 bad config.",
  ).action((options: MigrateOptions) => runCli("migrate", () => migrate(options)));
}

async function migrate(options: MigrateOptions): Promise<number> {
  const config = resolveConfig(options, {}, { storeOnly: true });
  const where = describeStoreLocation(config.store);
  const seen = await inspectConfiguredStore(config);
  if (seen.schema > seen.latest)
    throw new CliError(
      `the store ${where} is at schema ${seen.schema}, newer than this dagbot ${RELEASE} (${seen.latest}): ` +
        "downgrades are refused; run that newer release, or restore the backup taken before the upgrade",
      1,
    );
  const fences = Math.max(0, ...seen.steps.map((s) => s.fleetProtocol ?? 0));
  const goneAfterMs = config.retention.nodeGoneAfterMs;
  const nodes = seen.nodes.map((n) => ({
    ...n,
    alive: n.heartbeatAgeMs <= goneAfterMs,
    // A node of an older protocol than a step fences is refused by the store after it.
    mayRunBeside: fences === 0 || (n.protocol ?? 1) >= fences,
  }));
  const backupNote =
    config.store.kind === "sqlite"
      ? "the file is copied first (SQLite's online backup) beside it, as <file>.schema<from>-<time>.bak"
      : "back up the database first (pg_dump; docs/operations.md, Upgrading): dagbot migrate does not copy a PostgreSQL database";
  const current = seen.steps.length === 0;
  const applied =
    current || options.dryRun === true ? null : await migrateConfiguredStore(config, seen.schema);

  if (options.json === true) {
    const out = {
      store: where,
      release: RELEASE,
      protocol: FLEET_PROTOCOL,
      from: seen.schema,
      to: seen.latest,
      steps: seen.steps,
      nodes,
      dryRun: options.dryRun === true,
      migrated: applied !== null,
      backup: applied?.backup ?? null,
    };
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    return 0;
  }
  const out: string[] = [];
  if (current) {
    out.push(
      seen.schema === 0
        ? `the store ${where} holds no dagbot tables yet: the first node or command that writes creates schema ${seen.latest}; nothing to migrate`
        : `the store ${where} is at schema ${seen.schema}, this release's (dagbot ${RELEASE}): nothing to migrate`,
    );
    process.stdout.write(`${out.join("\n")}\n`);
    return 0;
  }
  out.push(
    `store ${where}: schema ${seen.schema} -> ${seen.latest} (dagbot ${RELEASE}, fleet protocol ${FLEET_PROTOCOL})`,
  );
  out.push("steps:");
  for (const s of seen.steps) {
    out.push(`  ${String(s.version).padStart(3)}  ${s.summary}`);
    if (s.fleetProtocol !== null)
      out.push(
        `       after it, nodes of a fleet protocol below ${s.fleetProtocol} finish the tasks they run and take no new work`,
      );
  }
  if (nodes.length === 0) out.push("nodes: none has reported a heartbeat");
  else {
    out.push("nodes:");
    for (const n of nodes) {
      const state = n.alive
        ? `live, heartbeat ${formatDuration(n.heartbeatAgeMs)} ago`
        : `gone, last heartbeat ${formatDuration(n.heartbeatAgeMs)} ago`;
      const beside = n.mayRunBeside
        ? "may run beside it"
        : `may not run beside it: replace it with dagbot ${RELEASE} or later`;
      out.push(
        `  ${n.nodeId.padEnd(16)} ${describeRelease(n.release, n.protocol).padEnd(28)} ${state}; ${beside}`,
      );
    }
  }
  out.push(`backup: ${backupNote}`);
  if (applied === null) out.push("dry run: nothing was changed");
  else {
    if (applied.backup !== null) out.push(`backed up to ${applied.backup}`);
    out.push(`migrated: schema ${applied.from} -> ${applied.to}`);
  }
  process.stdout.write(`${out.join("\n")}\n`);
  return 0;
}
