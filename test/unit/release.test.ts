/** The release's identity (src/domain/release.ts) agrees with package.json and with both stores' migrations. */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  LATEST_SCHEMA_VERSION as PG_LATEST,
  MIGRATIONS as PG,
} from "../../src/adapters/postgres/migrations.js";
import {
  LATEST_SCHEMA_VERSION as SQLITE_LATEST,
  MIGRATIONS as SQLITE,
} from "../../src/adapters/sqlite/migrations.js";
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
    expect(STORE_SCHEMA).toBe(SQLITE_LATEST);
    expect(STORE_SCHEMA).toBe(PG_LATEST);
    expect(releaseLine()).toBe(
      `dagbot ${RELEASE} (store schema ${STORE_SCHEMA}, fleet protocol ${FLEET_PROTOCOL})`,
    );
  });

  it("the newest migration that fences older nodes fences at this protocol, in both stores", () => {
    for (const migrations of [SQLITE, PG]) {
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
