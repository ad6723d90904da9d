/** The small parsers under the node config: durations, byte sizes, store locations, key paths, host names. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseByteSize } from "../../src/config/byte-size.js";
import { formatKeyPath, nodeIdFromHostname } from "../../src/config/load-config.js";
import {
  describeStoreLocation,
  parseStoreLocation,
  redactPostgresUrl,
} from "../../src/config/store-location.js";
import { formatDuration, parseDuration } from "../../src/domain/duration.js";

describe("parseDuration", () => {
  it.each([
    ["500ms", 500],
    ["30s", 30_000],
    ["10m", 600_000],
    ["1h", 3_600_000],
    ["2d", 172_800_000],
    ["1h30m", 5_400_000],
    ["1.5s", 1_500],
    ["0s", 0],
    ["90s", 90_000],
  ])("%s is %i ms", (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each([
    "",
    "10",
    "10 m",
    " 10m",
    "10m ",
    "-5s",
    "+5s",
    "1e3s",
    "5 minutes",
    "s",
    "1.s",
    "10M",
    "1h 30m",
    "9".repeat(30) + "d",
  ])("refuses %j", (text) => {
    expect(parseDuration(text)).toBeNull();
  });

  it("round-trips whole milliseconds", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10 ** 12 }), (ms) => {
        expect(parseDuration(`${ms}ms`)).toBe(ms);
      }),
    );
  });
});

describe("formatDuration", () => {
  it.each([
    [850, "850ms"],
    [1_500, "1.5s"],
    [42_000, "42s"],
    [125_000, "2m05s"],
    [3_720_000, "1h02m"],
    [90_000_000, "1d01h"],
  ])("%i ms is %s", (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});

describe("parseByteSize", () => {
  it.each<[string | number, number]>([
    [65_536, 65_536],
    ["512", 512],
    ["512B", 512],
    ["64KiB", 65_536],
    ["64 KiB", 65_536],
    ["10KB", 10_000],
    ["1MiB", 1_048_576],
    ["1.5MiB", 1_572_864],
    ["2GB", 2_000_000_000],
  ])("%j is %i bytes", (text, bytes) => {
    expect(parseByteSize(text)).toBe(bytes);
  });

  it.each<string | number>([-1, 1.5, Number.NaN, "", "lots", "64 kib", "64KiBs", "KiB", "-1KiB"])(
    "refuses %j",
    (value) => {
      expect(parseByteSize(value)).toBeNull();
    },
  );
});

describe("store locations", () => {
  it("parses sqlite paths and postgres URLs", () => {
    expect(parseStoreLocation("sqlite:./data/dagbot.db")).toEqual({
      ok: true,
      store: { kind: "sqlite", path: "./data/dagbot.db" },
    });
    expect(parseStoreLocation("sqlite:/abs/x.db")).toEqual({
      ok: true,
      store: { kind: "sqlite", path: "/abs/x.db" },
    });
    for (const url of ["postgres://u@h/db", "postgresql://u:p@h:5432/db?sslmode=require"]) {
      expect(parseStoreLocation(url)).toEqual({ ok: true, store: { kind: "postgres", url } });
    }
  });

  it.each([
    "",
    "sqlite:",
    "sqlite:  ",
    "mysql://h/db",
    "./data/dagbot.db",
    "postgres://",
    "postgres://u:p@/db",
  ])("refuses %j", (text) => {
    expect(parseStoreLocation(text).ok).toBe(false);
  });

  it("never repeats a refused store string, which may hold a password", () => {
    for (const text of [
      "mysql://u:hunter2@h/db",
      "postgres://u:hunter2@/db",
      "postgres://u:hunter2@[x/db",
      "hunter2",
    ]) {
      const parsed = parseStoreLocation(text);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.message).not.toContain("hunter2");
    }
  });

  it("redacts passwords in userinfo and query, and nothing else", () => {
    expect(redactPostgresUrl("postgres://dagbot:pw@db:5432/app?sslmode=require&sslpassword=x")).toBe(
      "postgres://dagbot:[redacted]@db:5432/app?sslmode=require&sslpassword=[redacted]",
    );
    expect(redactPostgresUrl("postgres://dagbot@db/app")).toBe("postgres://dagbot@db/app");
    expect(describeStoreLocation({ kind: "sqlite", path: "x.db" })).toBe("sqlite:x.db");
  });
});

describe("key paths and node ids", () => {
  it("formats paths the way people write keys", () => {
    expect(formatKeyPath(["actions", "pg_dump", "argv", 0])).toBe("actions.pg_dump.argv[0]");
    expect(formatKeyPath(["actions", "pg.dump", "timeout"])).toBe('actions["pg.dump"].timeout');
    expect(formatKeyPath([])).toBe("");
  });

  it("derives a valid node id from any host name", () => {
    expect(nodeIdFromHostname("Build Host_01.example")).toBe("build-host_01.example");
    expect(nodeIdFromHostname("---")).toBe("node");
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (name) => {
        expect(nodeIdFromHostname(name)).toMatch(/^[a-z0-9_][a-z0-9_.-]{0,63}$/);
      }),
    );
  });
});
