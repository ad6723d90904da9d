// Upgrade day on the CLI (docs/architecture.md §11, docs/operations.md, Upgrading): a store of an older schema,
// as the previous release left it (its own migrations, a node of that release heartbeating), is
// never changed by a read-only command nor by a node that is not alone; `dagbot migrate --dry-run`
// shows the plan and changes nothing; `dagbot migrate` backs a SQLite file up and migrates; then the
// mixed fleet shows in `dagbot nodes`. The previous release itself runs in `npm run upgrade-test`.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrations as pgMigrations } from "../../src/adapters/postgres/migrations.js";
import { migrations as sqliteMigrations } from "../../src/adapters/sqlite/migrations.js";
import { FLEET_PROTOCOL, RELEASE, STORE_SCHEMA } from "../../src/domain/release.js";
import type { NodeProcess, StoreKind, Target } from "../support/engine-cluster.js";
import {
  cli,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";

beforeAll(() => requireBuild());

/** The schema the previous release (0.1.0) left: PostgreSQL 7, SQLite 8. */
const PREVIOUS = { postgres: 7, sqlite: 8 } as const;

/** Builds the previous release's schema with its own (released, never edited) migrations, and one of its nodes heartbeating. */
async function previousStore(target: Target): Promise<void> {
  const kind = target.kind;
  const upTo = PREVIOUS[kind];
  const now = Date.now();
  if (kind === "sqlite") {
    const db = new Database(target.store.slice("sqlite:".length));
    db.pragma("journal_mode = WAL");
    db.exec("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT");
    for (const m of sqliteMigrations().filter((x) => x.version <= upTo)) {
      db.exec(m.sql);
      db.prepare("INSERT INTO schema_version VALUES (?, ?)").run(m.version, now);
    }
    db.prepare(
      `INSERT INTO nodes (node_id, boot_id, labels, capacity, actions, room_ids, heartbeat_at, started_at)
       VALUES ('old-1', 'b1', '[]', 2, '["echo"]', '["local"]', ?, ?)`,
    ).run(now, now);
    db.close();
    return;
  }
  const url = new URL(target.store);
  url.searchParams.delete("options");
  const c = new pg.Client({ connectionString: url.toString() });
  await c.connect();
  try {
    await c.query(
      "CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    );
    for (const m of pgMigrations().filter((x) => x.version <= upTo)) {
      await c.query(m.sql);
      await c.query("INSERT INTO schema_version (version) VALUES ($1)", [m.version]);
    }
    await c.query(
      `INSERT INTO nodes (node_id, boot_id, labels, capacity, actions, room_ids, heartbeat_at, started_at)
       VALUES ('old-1', 'b1', '{}', 2, '{echo}', '{local}', $1, $1)`,
      [now],
    );
  } finally {
    await c.end();
  }
}

/** Keeps the old node's heartbeat fresh, as the running node of the previous release does. */
async function beatOldNode(target: Target): Promise<void> {
  const now = Date.now();
  if (target.kind === "sqlite") {
    const db = new Database(target.store.slice("sqlite:".length));
    try {
      db.prepare("UPDATE nodes SET heartbeat_at = ? WHERE node_id = 'old-1'").run(now);
    } finally {
      db.close();
    }
    return;
  }
  const c = new pg.Client({ connectionString: target.store });
  await c.connect();
  try {
    await c.query("UPDATE nodes SET heartbeat_at = $1 WHERE node_id = 'old-1'", [now]);
  } finally {
    await c.end();
  }
}

/** What must not change: the SQLite file's bytes and its folder's files; PostgreSQL's schema, tables and rows. */
async function fingerprint(target: Target): Promise<string> {
  if (target.kind === "sqlite") {
    const path = target.store.slice("sqlite:".length);
    const files = readdirSync(dirname(path))
      .filter((f) => f.startsWith("store.db"))
      .sort();
    return `${createHash("sha256").update(readFileSync(path)).digest("hex")} ${files.join(",")}`;
  }
  const c = new pg.Client({ connectionString: target.store });
  await c.connect();
  try {
    const tables = await c.query<{ t: string }>(
      "SELECT string_agg(table_name || ':' || column_name, ',' ORDER BY table_name, column_name) AS t FROM information_schema.columns WHERE table_schema = 'public'",
    );
    const versions = await c.query<{ v: string }>(
      "SELECT string_agg(version::text, ',' ORDER BY version) AS v FROM schema_version",
    );
    const triggers = await c.query<{ n: string }>(
      "SELECT count(*)::text AS n FROM pg_trigger WHERE NOT tgisinternal",
    );
    const nodes = await c.query<{ n: string }>("SELECT string_agg(node_id, ',') AS n FROM nodes");
    return [tables.rows[0]?.t, versions.rows[0]?.v, triggers.rows[0]?.n, nodes.rows[0]?.n].join(" | ");
  } finally {
    await c.end();
  }
}

describe.each<StoreKind>(["sqlite", "postgres"])("upgrading a %s store from the previous release", (kind) => {
  let target: Target;
  const nodes: NodeProcess[] = [];
  let failed = true;

  beforeAll(async () => {
    target = await createTarget(kind, `upgrade-${kind}`);
    await previousStore(target);
  });
  afterAll(async () => {
    await killAll(nodes);
    await target.cleanup(failed);
  });

  it("read-only commands, a node beside a live older node and a dry run leave the store as it was", async () => {
    const before = await fingerprint(target);
    const store = ["--store", target.store];
    for (const args of [
      ["list"],
      ["status", "x"],
      ["nodes"],
      ["logs", "x", "a"],
      ["graph", "x"],
      ["list", "--json"],
    ]) {
      const r = await cli([...args, ...store], { cwd: target.dir });
      expect(r.code, `${args.join(" ")}: ${r.stdout}${r.stderr}`).toBe(1);
      expect(r.stderr).toContain(
        `schema is version ${PREVIOUS[kind]}, older than this dagbot's (${STORE_SCHEMA})`,
      );
      expect(r.stderr).toContain("dagbot migrate");
      expect(await fingerprint(target), args.join(" ")).toBe(before);
    }

    // The older node heartbeats (the one write the test makes), then nothing of this release writes.
    await beatOldNode(target);
    const beating = await fingerprint(target);
    const config = writeNodeConfig(target, { nodeId: "new-1" });
    const refused = await cli(["node", "--config", config], { cwd: target.dir });
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toContain("other nodes are live (old-1: dagbot before 0.2.0, protocol 1)");
    expect(refused.stderr).toContain("dagbot migrate --dry-run");
    expect(await fingerprint(target)).toBe(beating);

    const dry = await cli(["migrate", "--dry-run", ...store], { cwd: target.dir });
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain(`schema ${PREVIOUS[kind]} -> ${STORE_SCHEMA} (dagbot ${RELEASE}`);
    expect(dry.stdout).toMatch(/old-1 +dagbot before 0\.2\.0, protocol 1 +live, .*may not run beside it/);
    expect(dry.stdout).toMatch(/ 17 {2}nodes record release and protocol/);
    expect(dry.stdout).toMatch(/ 19 {2}a lost node's attempt is run again/);
    expect(dry.stdout).toMatch(/ 18 {2}nodes record their last decryption failure/);
    expect(dry.stdout).toContain("dry run: nothing was changed");
    expect(await fingerprint(target)).toBe(beating);
    failed = false;
  });

  it("dagbot migrate backs a SQLite file up and migrates; the mixed fleet shows in dagbot nodes", async () => {
    failed = true;
    const sqlitePath = target.store.slice("sqlite:".length);
    const original = kind === "sqlite" ? readFileSync(sqlitePath) : null;
    const done = await cli(["migrate", "--store", target.store], { cwd: target.dir });
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toContain(`migrated: schema ${PREVIOUS[kind]} -> ${STORE_SCHEMA}`);
    if (original !== null) {
      const backup = /backed up to (\S+)/.exec(done.stdout)?.[1];
      expect(backup, done.stdout).toBeDefined();
      expect(existsSync(backup!)).toBe(true);
      const copy = new Database(backup!, { readonly: true });
      try {
        expect(copy.prepare("SELECT max(version) AS v FROM schema_version").get()).toEqual({
          v: PREVIOUS.sqlite,
        });
      } finally {
        copy.close();
      }
    } else expect(done.stdout).toContain("pg_dump");
    const again = await cli(["migrate", "--store", target.store], { cwd: target.dir });
    expect(again.stdout).toContain("nothing to migrate");

    await beatOldNode(target);
    const config = writeNodeConfig(target, { nodeId: "new-1" });
    nodes.push(startNode(target, config, "new-1"));
    const store = await target.open();
    try {
      await waitFor(
        "the new node's heartbeat",
        () => store.listNodes(),
        (list) => list.some((n) => n.session.nodeId === "new-1"),
        { timeoutMs: 20_000, intervalMs: 100 },
      );
    } finally {
      await store.close();
    }
    await beatOldNode(target);
    const shown = await cli(["nodes", "--store", target.store], { cwd: target.dir });
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(
      new RegExp(`new-1 .*dagbot ${RELEASE.replaceAll(".", "\\.")}, protocol ${FLEET_PROTOCOL}`),
    );
    expect(shown.stdout).toMatch(/old-1 .*dagbot before 0\.2\.0, protocol 1/);
    expect(shown.stdout).toContain("mixed releases: ");
    const json = JSON.parse(
      (await cli(["nodes", "--json", "--store", target.store], { cwd: target.dir })).stdout,
    ) as {
      nodes: { nodeId: string; release: string | null; protocol: number }[];
    };
    expect(json.nodes.map((n) => [n.nodeId, n.release, n.protocol])).toEqual([
      ["new-1", RELEASE, FLEET_PROTOCOL],
      ["old-1", null, 1],
    ]);
    failed = false;
  });
});

describe("a node alone on an older store", () => {
  it("migrates it on its own, backing a SQLite file up first, and says so", async () => {
    const target = await createTarget("sqlite", "upgrade-alone");
    let failed = true;
    const nodes: NodeProcess[] = [];
    try {
      await previousStore(target);
      // The previous release's node stopped long ago: its heartbeat is old.
      const db = new Database(target.store.slice("sqlite:".length));
      db.prepare("UPDATE nodes SET heartbeat_at = 0").run();
      db.close();
      const config = writeNodeConfig(target, { nodeId: "new-1" });
      const node = startNode(target, config, "new-1");
      nodes.push(node);
      await waitFor(
        "the node's log line saying it migrated",
        async () => (existsSync(node.logPath) ? readFileSync(node.logPath, "utf8") : ""),
        (log) => log.includes("store migrated to this release's schema"),
        { timeoutMs: 20_000, intervalMs: 100 },
      );
      const line = readFileSync(node.logPath, "utf8")
        .split("\n")
        .find((l) => l.includes("store migrated"));
      expect(JSON.parse(line!)).toMatchObject({ from: PREVIOUS.sqlite, to: STORE_SCHEMA, alone: true });
      expect(readdirSync(target.dir).some((f) => f.startsWith(`store.db.schema${PREVIOUS.sqlite}-`))).toBe(
        true,
      );
      failed = false;
    } finally {
      await killAll(nodes);
      await target.cleanup(failed);
    }
  });
});
