/**
 * The migration runner both stores share (docs/architecture.md §11): a dialect's
 * migrations are numbered SQL files in its own folder (src/adapters/<dialect>/migrations/), read
 * here, and applied in order by a script the dialect's driver carries out inside its one migration
 * transaction — synchronously on SQLite, awaited on PostgreSQL — as store scripts are
 * (store-common/script.ts). The runner decides what to apply and what to refuse; the dialect says
 * how to read the recorded version, prepare the schema and apply one file. A dialect may also ship
 * its schema as one script (SQLite's schema.sql): an empty store is created from it, then any
 * migration newer than it is applied on top.
 */
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { SchemaTooNewError, SchemaTooOldError } from "../../ports/errors.js";
import type { Migration } from "./schema.js";

/** `019-lost-reruns.sql`: three digits, the version, then a name in kebab-case. */
const FILE = /^(\d{3})-[a-z0-9]+(?:-[a-z0-9]+)*\.sql$/;
const SUMMARY = "-- summary: ";
const FLEET_PROTOCOL = "-- fleet-protocol: ";

/**
 * One migration file: a header of `--` lines — `-- summary: …` (one line for `dagbot migrate`'s
 * plan), `-- fleet-protocol: N` when the migration fences older nodes (docs/architecture.md §11),
 * then why the migration exists — and the SQL after it, run as one script.
 */
export function parseMigration(version: number, name: string, text: string): Migration {
  const lines = text.split("\n");
  let end = 0;
  while (end < lines.length && lines[end]!.startsWith("--")) end++;
  const header = lines.slice(0, end);
  const summary = header
    .find((l) => l.startsWith(SUMMARY))
    ?.slice(SUMMARY.length)
    .trim();
  if (summary === undefined || summary === "")
    throw new Error(`migration ${name}: its header has no "${SUMMARY.trim()}" line`);
  const fence = header
    .find((l) => l.startsWith(FLEET_PROTOCOL))
    ?.slice(FLEET_PROTOCOL.length)
    .trim();
  if (fence !== undefined && !/^\d+$/.test(fence))
    throw new Error(`migration ${name}: fleet-protocol must be a whole number, got "${fence}"`);
  // The SQL keeps its first (blank) line: the text each migration ran before it moved to a file.
  const sql = lines.slice(end).join("\n");
  return { version, summary, ...(fence === undefined ? {} : { fleetProtocol: Number(fence) }), sql };
}

const loaded = new Map<string, readonly Migration[]>();

/**
 * The migrations in `folder`, in order: exactly versions 1 to `latest`, the schema this release
 * knows (src/domain/release.ts). Read once, when a store first needs them (not to open a store
 * already at `latest`); a folder missing a file, or with one too many, is an incomplete install or
 * a migration added without raising the release's schema, and is refused here by name.
 */
export function readMigrations(folder: URL, latest: number): readonly Migration[] {
  const cached = loaded.get(folder.href);
  if (cached !== undefined) return cached;
  const path = fileURLToPath(folder);
  let files: string[];
  try {
    files = readdirSync(path).filter((f) => f.endsWith(".sql"));
  } catch (e) {
    throw new Error(`dagbot's migrations are missing (${path}): ${(e as Error).message}; reinstall dagbot`, {
      cause: e,
    });
  }
  const migrations = files
    .map((f) => {
      const m = FILE.exec(f);
      if (m === null)
        throw new Error(`${path}: "${f}" is not named as a migration (e.g. 019-lost-reruns.sql)`);
      return { version: Number(m[1]), file: f };
    })
    .sort((a, b) => a.version - b.version)
    .map(({ version, file }) => parseMigration(version, file, readFileSync(`${path}/${file}`, "utf8")));
  const versions = migrations.map((m) => m.version);
  const expected = Array.from({ length: latest }, (_, i) => i + 1);
  if (versions.join() !== expected.join())
    throw new Error(
      `${path}: dagbot's schema is version ${latest}, so it needs migrations 1 to ${latest} there, ` +
        `one file each; found ${versions.length === 0 ? "none" : versions.join(", ")}`,
    );
  loaded.set(folder.href, migrations);
  return migrations;
}

const SCHEMA = "-- schema: ";

/** A dialect's schema as one script: what migrations 1 to `version` leave, made at once. */
export interface SchemaScript {
  readonly version: number;
  readonly sql: string;
}

const loadedSchemas = new Map<string, SchemaScript>();

/**
 * The schema script at `file`: a header of `--` lines, one of them `-- schema: N` (the migrations
 * it stands for are 1 to N, N at most `latest`), then the SQL. Read once, when an empty store is
 * first created; a missing file is an incomplete install, refused like a missing migration.
 */
export function readSchemaScript(file: URL, latest: number): SchemaScript {
  const cached = loadedSchemas.get(file.href);
  if (cached !== undefined) return cached;
  const path = fileURLToPath(file);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new Error(
      `dagbot's schema script is missing (${path}): ${(e as Error).message}; reinstall dagbot`,
      {
        cause: e,
      },
    );
  }
  const lines = text.split("\n");
  let end = 0;
  while (end < lines.length && lines[end]!.startsWith("--")) end++;
  const stated = lines
    .slice(0, end)
    .find((l) => l.startsWith(SCHEMA))
    ?.slice(SCHEMA.length)
    .trim();
  const version = stated !== undefined && /^\d+$/.test(stated) ? Number(stated) : Number.NaN;
  if (!(version >= 1 && version <= latest))
    throw new Error(
      `${path}: its header must say "${SCHEMA}N" with N from 1 to dagbot's schema (${latest}), got "${stated ?? ""}"`,
    );
  const script = { version, sql: lines.slice(end).join("\n") };
  loadedSchemas.set(file.href, script);
  return script;
}

/**
 * Whether a store at `found` may be opened by a release whose schema is `latest`: a newer schema
 * never, an older one only when the caller may migrate (`allowUpgrade`); an empty one (0) always.
 */
export function checkSchemaVersion(found: number, latest: number, allowUpgrade: boolean): void {
  if (found > latest) throw new SchemaTooNewError(found, latest);
  if (found > 0 && found < latest && !allowUpgrade) throw new SchemaTooOldError(found, latest);
}

/** One step of the runner, carried out by the dialect inside its migration transaction. */
export type RunnerStep =
  /** The recorded version, 0 for an empty store: the highest row of schema_version. */
  | { readonly step: "version" }
  /** Before the first migration: what the files need in place (the schema_version table). */
  | { readonly step: "prepare" }
  /** Run one migration's SQL and record its version in schema_version. */
  | { readonly step: "apply"; readonly migration: Migration }
  /**
   * An empty store only: run the schema script and record versions 1 to its version in
   * schema_version, the rows those migrations would have left.
   */
  | { readonly step: "create"; readonly schema: SchemaScript };

export type MigrationScript = Generator<RunnerStep, { from: number; to: number }, unknown>;

/**
 * Bring a store to `latest`: refuse a newer schema (and an older one unless `allowUpgrade`), then
 * apply each pending migration in order; an empty store, when the dialect has a schema script, is
 * created from it instead and gets only the migrations newer than it (none while the script is
 * kept at `latest`: the migration files are then not even read). The whole script runs in one
 * transaction held by the dialect under its lock, so of several nodes starting at once one
 * migrates and the others find it done, and a failing migration leaves the store as it was.
 */
export function* migrationScript(
  migrations: () => readonly Migration[],
  latest: number,
  allowUpgrade: boolean,
  schema?: () => SchemaScript,
): MigrationScript {
  const from = (yield { step: "version" }) as number;
  checkSchemaVersion(from, latest, allowUpgrade);
  if (from === latest) return { from, to: latest };
  yield { step: "prepare" };
  let at = from;
  if (from === 0 && schema !== undefined) {
    const created = schema();
    yield { step: "create", schema: created };
    at = created.version;
  }
  if (at < latest)
    for (const migration of migrations()) if (migration.version > at) yield { step: "apply", migration };
  return { from, to: latest };
}
