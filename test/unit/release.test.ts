/** The release's identity (src/domain/release.ts) agrees with package.json and with both stores' migrations. */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { migrations as pgMigrations } from "../../src/adapters/postgres/migrations.js";
import { migrations as sqliteMigrations } from "../../src/adapters/sqlite/migrations.js";
import {
  describeRelease,
  FLEET_PROTOCOL,
  RELEASE,
  releaseLine,
  STORE_SCHEMA,
} from "../../src/domain/release.js";

describe("the release", () => {
  it("is package.json's version, and the store schema is both stores' last migration", () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      version: string;
    };
    expect(RELEASE).toBe(pkg.version);
    expect(RELEASE).toMatch(/^\d+\.\d+\.\d+$/);
    expect(sqliteMigrations().at(-1)?.version).toBe(STORE_SCHEMA);
    expect(pgMigrations().at(-1)?.version).toBe(STORE_SCHEMA);
    expect(releaseLine()).toBe(
      `dagbot ${RELEASE} (store schema ${STORE_SCHEMA}, fleet protocol ${FLEET_PROTOCOL})`,
    );
  });

  it("the newest migration that fences older nodes fences at this protocol, in both stores", () => {
    for (const migrations of [sqliteMigrations(), pgMigrations()]) {
      const fences = migrations.map((m) => m.fleetProtocol ?? 0);
      expect(Math.max(...fences)).toBe(FLEET_PROTOCOL);
      for (const m of migrations) expect(m.summary.length).toBeGreaterThan(10);
    }
  });

  it("names a node's release, one before 0.2.0 included", () => {
    expect(describeRelease("0.2.0", 2)).toBe("dagbot 0.2.0, protocol 2");
    expect(describeRelease(null, null)).toBe("dagbot before 0.2.0, protocol 1");
  });
});
