/**
 * The migration runner's files (store-common/migrations.ts): a folder of NNN-name.sql read in
 * order, each file's header parsed, and a folder that does not hold exactly versions 1 to the
 * release's schema refused by name; the built package (dist/) holds the same files as src/, and
 * SQLite's schema script.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import {
  parseMigration,
  readMigrations,
  readSchemaScript,
} from "../../src/adapters/store-common/migrations.js";

const scratch = mkdtempSync(join(tmpdir(), "dagbot-migration-files-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let folders = 0;
/** A folder of migration files (name → text), as a URL ending in "/" as the stores give theirs. */
function folder(files: Record<string, string>): URL {
  const dir = join(scratch, `f${++folders}`);
  mkdirSync(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return pathToFileURL(`${dir}/`);
}

const file = (summary: string, sql: string, extra = ""): string =>
  `-- summary: ${summary}\n${extra}--\n-- why it exists\n\n${sql}\n`;

describe("migration files", () => {
  it("are read in version order, with their summary, fence and SQL (the text after the header)", () => {
    const read = readMigrations(
      folder({
        "002-second.sql": file("the second one", "CREATE TABLE b (x INTEGER);", "-- fleet-protocol: 2\n"),
        "001-first.sql": file("the first one", "CREATE TABLE a (x INTEGER);"),
        "notes.txt": "not a migration",
      }),
      2,
    );
    expect(read).toEqual([
      { version: 1, summary: "the first one", sql: "\nCREATE TABLE a (x INTEGER);\n" },
      { version: 2, summary: "the second one", fleetProtocol: 2, sql: "\nCREATE TABLE b (x INTEGER);\n" },
    ]);
  });

  it("refuse a gap, a version past the release's schema, or a folder short of it, naming what was found", () => {
    const one = file("a migration", "SELECT 1;");
    expect(() => readMigrations(folder({ "001-a.sql": one, "003-c.sql": one }), 3)).toThrow(
      /needs migrations 1 to 3 there, one file each; found 1, 3/,
    );
    expect(() => readMigrations(folder({ "001-a.sql": one, "002-b.sql": one }), 1)).toThrow(
      /schema is version 1, so it needs migrations 1 to 1 there, one file each; found 1, 2/,
    );
    expect(() => readMigrations(folder({}), 19)).toThrow(/found none/);
    expect(() => readMigrations(new URL("no-such-folder/", pathToFileURL(`${scratch}/`)), 1)).toThrow(
      /dagbot's migrations are missing .*no-such-folder.*reinstall dagbot/,
    );
  });

  it("refuse two files of one version, a name not of the NNN-name.sql form, and a header without a summary", () => {
    const one = file("a migration", "SELECT 1;");
    expect(() => readMigrations(folder({ "001-a.sql": one, "001-b.sql": one }), 1)).toThrow(/found 1, 1/);
    expect(() => readMigrations(folder({ "1-a.sql": one }), 1)).toThrow(
      /"1-a.sql" is not named as a migration/,
    );
    expect(() => parseMigration(1, "001-a.sql", "-- just a comment\n\nSELECT 1;\n")).toThrow(
      /001-a.sql: its header has no "-- summary:" line/,
    );
    expect(() => parseMigration(1, "001-a.sql", file("x", "SELECT 1;", "-- fleet-protocol: two\n"))).toThrow(
      /fleet-protocol must be a whole number, got "two"/,
    );
  });

  it("and a schema script: its version from its header, its SQL after it; a missing one or a version past the release's refused", () => {
    const dir = folder({
      "schema.sql": "-- schema: 2\n-- what migrations 1 to 2 leave\n\nCREATE TABLE a (x INTEGER);\n",
      "ahead.sql": "-- schema: 3\n\nSELECT 1;\n",
      "nameless.sql": "-- no version here\n\nSELECT 1;\n",
    });
    expect(readSchemaScript(new URL("schema.sql", dir), 2)).toEqual({
      version: 2,
      sql: "\nCREATE TABLE a (x INTEGER);\n",
    });
    expect(() => readSchemaScript(new URL("ahead.sql", dir), 2)).toThrow(
      /its header must say "-- schema: N" with N from 1 to dagbot's schema \(2\), got "3"/,
    );
    expect(() => readSchemaScript(new URL("nameless.sql", dir), 2)).toThrow(/got ""/);
    expect(() => readSchemaScript(new URL("missing.sql", dir), 2)).toThrow(
      /dagbot's schema script is missing .*missing.sql.*reinstall dagbot/,
    );
  });

  it("reach dist/ as they are in src/ (npm run build copies them)", () => {
    const root = new URL("../../", import.meta.url);
    for (const dialect of ["sqlite", "postgres"]) {
      const src = new URL(`src/adapters/${dialect}/migrations/`, root);
      const dist = new URL(`dist/adapters/${dialect}/migrations/`, root);
      const names = readdirSync(src).sort();
      expect(names.length).toBeGreaterThan(0);
      expect(readdirSync(dist).sort(), "dist/ is built from src/ (npm run build)").toEqual(names);
      for (const n of names)
        expect(readFileSync(new URL(n, dist), "utf8")).toBe(readFileSync(new URL(n, src), "utf8"));
    }
    // SQLite's schema script, which an empty store is created from, beside them.
    expect(readFileSync(new URL("dist/adapters/sqlite/schema.sql", root), "utf8")).toBe(
      readFileSync(new URL("src/adapters/sqlite/schema.sql", root), "utf8"),
    );
  });
});
