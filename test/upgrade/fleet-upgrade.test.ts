// Upgrade day: a fleet of the previous release (0.1.0, commit 633923a, built from this
// repository's history) is upgraded to today's one node at a time, on PostgreSQL and on SQLite,
// through the upgrade procedure of docs/operations.md, with runs in flight:
//
//   1. two 0.1.0 nodes run a DAG whose two long tasks (one per node) are running when the upgrade
//      begins, and whose next tasks wait on them;
//   2. a read-only command of today's release refuses the older store and leaves it as it was (a
//      quiet copy of the SQLite file byte-for-byte; the schema of the live store);
//   3. back up; `dagbot migrate --dry-run` prints the plan and changes nothing; `dagbot migrate`;
//   4. the old nodes are replaced one at a time; while one old node still runs (offering an action
//      named `approve`, and the producer's action, with a free slot), a DAG with an approval gate and
//      an output reference is published through today's CLI and approved through it.
//
// Every action execution is counted from the actions' own records (test/upgrade/fixtures/act.mjs),
// never from the store: the runs in flight run each task once, no gate passes without an approval,
// no `{tasks.…}` reference reaches an action as text, every command sent during the mixed phase
// gets its outcome, and `dagbot nodes` shows both releases side by side.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { FLEET_PROTOCOL, STORE_SCHEMA } from "../../src/domain/release.js";
import { createTestDatabase } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";
import { waitFor } from "../support/store-wait.js";
import { Fleet } from "./fleet.js";
import type { NodesView } from "./helpers.js";
import {
  check,
  checkSchemaGolden,
  complaints,
  endUpgradeTest,
  lines,
  parseJson,
  plainUrl,
  softChecks,
  step,
  tail,
  waitForRun,
  withTimeout,
} from "./helpers.js";
import type { CliResult, Release } from "./releases.js";
import { PREVIOUS_RELEASES, currentRelease, previousRelease, runCli, said } from "./releases.js";
import { fileDigest, postgresProbe, sqliteProbe } from "./store-probe.js";
import type { StoreKind, StoreProbe } from "./store-probe.js";

/** The schema each release needs. */
const OLD_SCHEMA: Record<StoreKind, number> = PREVIOUS_RELEASES["0.1.0"].schema;
const NEW_SCHEMA = STORE_SCHEMA;

const VERSION_PATTERN = "[0-9]+\\.[0-9]+\\.[0-9]+";

describe.each(["postgres", "sqlite"] as const)("upgrade day on %s", (kind) => {
  it("0.1.0 → today's through the upgrade procedure of docs/operations.md: runs in flight once, gates wait for approval, outputs are values, commands answered, both releases in `dagbot nodes`", async () => {
    const old = await step("building the previous release 633923a (cached after the first run)", () =>
      previousRelease("0.1.0"),
    );
    const now = currentRelease();
    const NEW_VERSION = now.version;
    const newVersion = NEW_VERSION.replace(/\./g, "\\.");
    const dir = mkdtempSync(join(tmpdir(), `dagbot-upgrade-${kind}-`));
    let db: TestDatabase | null = null;
    let fleet: Fleet | null = null;
    let failed = true;
    const { problems, soft, withProblems } = softChecks();
    try {
      db = kind === "postgres" ? await createTestDatabase() : null;
      const probe: StoreProbe =
        db !== null ? postgresProbe(plainUrl(db.url)) : sqliteProbe(join(dir, "store.db"));
      const f = new Fleet(dir, probe.store);
      fleet = f;
      // Machine a and machine b: each keeps its node id (and so its config) across the upgrade.
      f.config("a", now);
      f.config("b", now);
      const dagbot = (release: Release, args: string[], timeoutMs = 60_000) =>
        runCli(release, [...args, "--config", f.configPath("a", release)], { cwd: dir, timeoutMs });
      const writeDag = (dag: Record<string, unknown>): string => {
        const path = join(dir, `${String(dag["id"])}.json`);
        writeFileSync(path, JSON.stringify(dag, null, 1));
        return path;
      };
      const OLD = `@${old.tag}`;
      const NEW = `@${now.tag}`;

      // ---- The previous release's fleet, with a run in flight.
      const oldA = f.start(old, "a");
      const oldB = f.start(old, "b");
      await step("the two 0.1.0 nodes start and beat", () =>
        waitFor(
          "heartbeats of a and b in the nodes table",
          async () =>
            (await probe.query("SELECT node_id FROM nodes ORDER BY node_id").catch(() => [])).map((r) =>
              String(r["node_id"]),
            ),
          (ids) => ids.includes("a") && ids.includes("b"),
          { timeoutMs: 30_000, intervalMs: 100 },
        ).catch((e: unknown) => {
          throw new Error(`${String(e)}\na (0.1.0) log:\n${tail(oldA)}\nb (0.1.0) log:\n${tail(oldB)}`);
        }),
      );
      check(
        (await probe.schemaVersion()) === OLD_SCHEMA[kind],
        `0.1.0 made a ${kind} store of schema ${await probe.schemaVersion()}, expected ${OLD_SCHEMA[kind]}`,
      );
      await soft(
        `the store 0.1.0 made with its own migrations is the golden schema ${OLD_SCHEMA[kind]}`,
        () => checkSchemaGolden(probe, OLD_SCHEMA[kind], "0.1.0's"),
      );
      const inflight = writeDag({
        id: "inflight",
        tasks: [
          { id: "long_a", action: "hold", args: { name: "long_a" }, on: { node: "a" } },
          { id: "long_b", action: "hold", args: { name: "long_b" }, on: { node: "b" } },
          { id: "after_a", action: "note", args: { text: "after_a" }, needs: ["long_a"] },
          { id: "after_b", action: "note", args: { text: "after_b" }, needs: ["long_b"] },
          { id: "last", action: "note", args: { text: "last" }, needs: ["after_a", "after_b"] },
        ],
      });
      const published = await dagbot(old, ["submit", inflight, "--confirm", "--json"]);
      check(published.code === 0, `0.1.0 could not publish the in-flight run: ${said(published)}`);
      const inflightRun = String(parseJson(published)["runId"]);
      await step("the two long tasks run on the 0.1.0 nodes before the upgrade begins", () =>
        waitFor(
          "long_a on a and long_b on b started (action records)",
          () => f.read().filter((r) => r.phase === "start"),
          (rs) =>
            rs.some((r) => r.task === "long_a" && r.node === `a${OLD}`) &&
            rs.some((r) => r.task === "long_b" && r.node === `b${OLD}`),
          { timeoutMs: 30_000, intervalMs: 100 },
        ),
      );

      // ---- A read-only command of today's release on the older store changes nothing.
      await step("today's read-only commands on the 0.1.0 store", async () => {
        const before = await probe.schemaDigest();
        const read = await dagbot(now, ["list"]);
        check(
          read.code !== 0 && /dagbot migrate/.test(read.stdout + read.stderr),
          `\`dagbot list\` of today's release on a schema-${OLD_SCHEMA[kind]} store should refuse, naming \`dagbot migrate\`: ${said(read)}`,
        );
        check(
          (await probe.schemaVersion()) === OLD_SCHEMA[kind],
          `\`dagbot list\` moved the live store's schema to ${await probe.schemaVersion()}`,
        );
        check((await probe.schemaDigest()) === before, "`dagbot list` changed the live store's schema");
        if (kind === "sqlite") {
          // The live file changes with every heartbeat; a quiet copy (SQLite's online backup) does not.
          const copy = join(dir, "quiet-copy.db");
          await sqliteBackup(join(dir, "store.db"), copy);
          const files = (): string =>
            readdirSync(dir)
              .filter((n) => n.startsWith("quiet-copy"))
              .sort()
              .join(", ");
          const bytes = fileDigest(copy);
          const around = files();
          for (const args of [["list"], ["status", "inflight"], ["nodes"], ["migrate", "--dry-run"]]) {
            const r = await runCli(now, [...args, "--store", `sqlite:${copy}`], { cwd: dir });
            check(
              fileDigest(copy) === bytes,
              `\`dagbot ${args.join(" ")}\` of today's release changed the bytes of a quiet schema-8 SQLite file: ${said(r)}`,
            );
            check(
              files() === around,
              `\`dagbot ${args.join(" ")}\` left files beside it: ${files()} (before: ${around})`,
            );
          }
        }
      });

      // ---- docs/operations.md, "Upgrading", "The procedure".
      // 1. Back up the store (SQLite: `dagbot migrate` does, and prints where).
      const backup = await step("1. backing up the store", async () => {
        if (kind === "postgres") {
          const file = join(dir, "dagbot.dump");
          const dump = spawnSync(pgBin("pg_dump"), ["-Fc", "-f", file, probe.store], { encoding: "utf8" });
          check(dump.status === 0, `pg_dump exit ${dump.status}: ${dump.stderr}`);
          check(statSync(file).size > 0, `pg_dump wrote an empty ${file}`);
          return file;
        }
        return null;
      });
      // 2. On the first machine (a), the plan, which changes nothing.
      await step("2. `dagbot migrate --dry-run` prints the plan and changes nothing", async () => {
        const before = await probe.schemaDigest();
        const dry = await dagbot(now, ["migrate", "--dry-run"]);
        check(dry.code === 0, `dry run failed: ${said(dry)}`);
        const text = dry.stdout + dry.stderr;
        check(
          new RegExp(`\\b${OLD_SCHEMA[kind]}\\D+${NEW_SCHEMA}\\b`).test(text),
          `the plan should say from schema ${OLD_SCHEMA[kind]} to ${NEW_SCHEMA}: ${said(dry)}`,
        );
        for (let v = OLD_SCHEMA[kind] + 1; v <= NEW_SCHEMA; v += 1)
          check(
            new RegExp(`^\\s*${v}\\s+\\S`, "m").test(text),
            `the plan does not show step ${v}: ${said(dry)}`,
          );
        check(
          new RegExp(`^\\s*a\\s.*${newVersion}`, "m").test(text) &&
            new RegExp(`^\\s*b\\s.*${newVersion}`, "m").test(text),
          `the plan should say whether the live 0.1.0 nodes a and b may run beside it: ${said(dry)}`,
        );
        check(
          (await probe.schemaVersion()) === OLD_SCHEMA[kind],
          `--dry-run moved the schema to ${await probe.schemaVersion()}`,
        );
        check((await probe.schemaDigest()) === before, "--dry-run changed the store's schema");
      });
      // 3. Stop a's node (SIGTERM: it finishes its running action, long_a), then migrate. long_b
      // still runs on b: it is in flight across the migration.
      oldA.child.kill("SIGTERM");
      f.release("long_a");
      await step("3. a (0.1.0) stops gracefully once long_a finished", () =>
        withTimeout(oldA.exited, 60_000, `a (0.1.0) did not exit within 60 s of SIGTERM\n${tail(oldA)}`),
      );
      check(oldB.running(), `b (0.1.0) stopped by itself:\n${tail(oldB)}`);
      const migratedAt = Date.now();
      const migrated = await step("3. `dagbot migrate`", async () => {
        const r = await dagbot(now, ["migrate"], 120_000);
        check(r.code === 0, `migrate failed: ${said(r)}`);
        check(
          (await probe.schemaVersion()) === NEW_SCHEMA,
          `after migrate the schema is ${await probe.schemaVersion()}, expected ${NEW_SCHEMA}: ${said(r)}`,
        );
        return r;
      });
      await soft("today's migrate left the golden schema", () =>
        checkSchemaGolden(probe, NEW_SCHEMA, "today's migrate left the 0.1.0"),
      );
      if (kind === "sqlite") {
        await step("1. the SQLite backup `dagbot migrate` took and printed", async () => {
          const path = /backed up to (\S+)/.exec(migrated.stdout + migrated.stderr)?.[1];
          check(
            path !== undefined && existsSync(path),
            `no backup file named in the output: ${said(migrated)}`,
          );
          check(
            (await sqliteProbe(path!).schemaVersion()) === OLD_SCHEMA[kind],
            `the backup ${path} is not of schema ${OLD_SCHEMA[kind]}`,
          );
        });
      } else {
        check(backup !== null && existsSync(backup), "the PostgreSQL backup is gone");
      }
      check(
        f.read().some((r) => r.task === "long_b" && r.phase === "start") &&
          !f.read().some((r) => r.task === "long_b" && r.phase === "end"),
        "long_b should be running across the migration",
      );

      await soft("the 0.1.0 CLI refuses the migrated store, and leaves it as it is", async () => {
        const r = await dagbot(old, ["status", "inflight"]);
        check(
          r.code !== 0 && /schema|newer/i.test(r.stdout + r.stderr),
          `0.1.0's \`dagbot status\` on a schema-${NEW_SCHEMA} store should refuse it: ${said(r)}`,
        );
        check((await probe.schemaVersion()) === NEW_SCHEMA, "the 0.1.0 CLI changed the schema");
      });
      // A command sent while only a 0.1.0 node is live (which may no longer lead): it waits for
      // today's leader, and gets its outcome then.
      const sentBeforeLeader = dagbot(now, ["cap", "12"], 90_000);
      sentBeforeLeader.catch(() => {}); // awaited below; a failure before then is not unhandled

      // 4. Start a's node with today's release: it leads.
      const nodesJson = async (): Promise<NodesView> => {
        const r = await dagbot(now, ["nodes", "--json"]);
        check(r.code === 0, `dagbot nodes --json failed: ${said(r)}`);
        return parseJson(r) as unknown as NodesView;
      };
      const newA = f.start(now, "a");
      await step("4. a (today's) starts", () =>
        waitFor(
          "a alive with today's release (dagbot nodes --json)",
          nodesJson,
          (v) =>
            ["a", "b"].every((id) => v.nodes.some((n) => n.nodeId === id && n.state === "alive")) &&
            v.nodes.some((n) => n.nodeId === "a" && n["protocol"] === FLEET_PROTOCOL),
          { timeoutMs: 30_000, intervalMs: 250 },
        ).catch((e: unknown) => {
          throw new Error(`${String(e)}\na (today's) log:\n${tail(newA)}`);
        }),
      );
      await soft("4. a (today's) takes the lead from the 0.1.0 node", () =>
        waitFor(
          "a leading room local (dagbot nodes --json)",
          nodesJson,
          (v) => v.leaders.some((l) => l.room === "local" && l.nodeId === "a"),
          { timeoutMs: 30_000, intervalMs: 250 },
        ).catch((e: unknown) => {
          throw new Error(`${String(e)}\na (today's) log:\n${tail(newA)}`);
        }),
      );

      // ---- The mixed phase: a (today's) and b (0.1.0: a free slot, it offers approve and build).
      await soft("`dagbot nodes` shows the mixed phase", async () => {
        const view = await nodesJson();
        const entry = (id: string) => view.nodes.find((n) => n.nodeId === id);
        const shown = (id: string): string => JSON.stringify(entry(id));
        check(
          entry("a")?.["release"] === NEW_VERSION && entry("a")?.["protocol"] === FLEET_PROTOCOL,
          `dagbot nodes --json should show a as release ${NEW_VERSION}, protocol ${FLEET_PROTOCOL}: ${shown("a")}`,
        );
        check(
          entry("b")?.["release"] !== NEW_VERSION && Number(entry("b")?.["protocol"] ?? 1) < 2,
          `dagbot nodes --json should show b as an older release (protocol 1): ${shown("b")}`,
        );
        const text = await dagbot(now, ["nodes"]);
        const line = (id: string): string =>
          text.stdout.split("\n").find((l) => l.startsWith(`${id} `)) ?? "(no line)";
        check(
          line("a").includes(NEW_VERSION),
          `\`dagbot nodes\` should show ${NEW_VERSION} for a: ${said(text)}`,
        );
        check(
          !line("b").includes(` ${NEW_VERSION} `) && /0\.1\.0|older|before|unknown/i.test(line("b")),
          `\`dagbot nodes\` should show b as older or unknown: ${said(text)}`,
        );
        const mixedLine = text.stdout.split("\n").find((l) => /mixed/i.test(l)) ?? "";
        check(
          /\ba\b/.test(mixedLine) && /\bb\b/.test(mixedLine),
          `\`dagbot nodes\` should say the live nodes run mixed releases, naming each: ${said(text)}`,
        );
      });

      const answered: CliResult[] = [];
      await soft("the command sent before today's first node started gets its outcome", async () => {
        const r = await sentBeforeLeader;
        answered.push(r);
        check(
          r.code === 0 && /12/.test(r.stdout + r.stderr) && !/no body/i.test(r.stdout + r.stderr),
          `\`dagbot cap 12\` sent while only a 0.1.0 node was live: ${said(r)}`,
        );
      });
      const command = async (args: string[]): Promise<CliResult> => {
        const r = await dagbot(now, args, 90_000);
        answered.push(r);
        check(
          r.code === 0 && !/no body/i.test(r.stdout + r.stderr),
          `a command sent during the mixed phase did not get its outcome: ${said(r)}`,
        );
        return r;
      };
      const releaseDag = writeDag({
        id: "release",
        tasks: [
          // The producer: b (0.1.0) offers `build` too, with a free slot.
          { id: "build", action: "build", args: { v: "1.2.3" }, outputs: { version: VERSION_PATTERN } },
          { id: "side", action: "note", args: { text: "side" }, needs: ["build"] },
          { id: "ok", needs: ["build"], approve: { who: "operators", description: "roll out 1.2.3" } },
          {
            id: "deploy",
            action: "deploy",
            args: { version: "{tasks.build.outputs.version}" },
            needs: ["ok"],
          },
        ],
      });
      await step("publishing a gated DAG with an output reference through today's CLI", async () => {
        await command(["submit", releaseDag]);
        await command(["confirm", "release"]);
        await command(["cap", "8"]);
      });
      await step("the gate waits for an approval while b (0.1.0) runs", async () => {
        await waitFor(
          "build and side ran and the gate is open (dagbot status release)",
          async () => ({ records: f.read(), status: (await dagbot(now, ["status", "release"])).stdout }),
          (s) =>
            s.records.some((r) => r.task === "side") &&
            s.records.some((r) => r.task === "build") &&
            /awaits approval/.test(s.status),
          { timeoutMs: 60_000, intervalMs: 250 },
        );
        const ran = f.read();
        check(
          !ran.some((r) => r.kind === "approve"),
          `an action named approve ran: the gate was taken for a task\n${lines(ran.filter((r) => r.kind === "approve"))}`,
        );
        check(
          !ran.some((r) => r.kind === "deploy"),
          `deploy ran before anyone approved the gate\n${lines(ran.filter((r) => r.kind === "deploy"))}`,
        );
        const builds = ran.filter((r) => r.kind === "build");
        check(builds.length === 1, `build ran ${builds.length} times:\n${lines(builds)}`);
        check(
          typeof builds[0]!.output === "string" && builds[0]!.node.endsWith(NEW),
          `build ran without DAGBOT_OUTPUT (on ${builds[0]!.node}): a node that cannot publish outputs claimed the producer`,
        );
      });
      await step("approving through today's CLI", async () => {
        const r = await command(["approve", "release", "ok"]);
        check(/approved release\/ok/.test(r.stdout + r.stderr), `unexpected answer to approve: ${said(r)}`);
      });
      await step("the gated run ends, its dependent got the value", async () => {
        await waitForRun(now, dir, f.configPath("a", now), "release", 60_000);
        const deploys = f.read().filter((r) => r.kind === "deploy");
        check(deploys.length === 1, `deploy ran ${deploys.length} times:\n${lines(deploys)}`);
        check(
          deploys[0]!.arg === "1.2.3" && !String(deploys[0]!.arg).includes("{tasks."),
          `deploy received ${JSON.stringify(deploys[0]!.arg)}, expected the value 1.2.3`,
        );
      });
      await command(["status", "release"]);
      await soft("b's log (0.1.0) shows the statements the migrated store refused it", () =>
        waitFor(
          "a warning or error in b's log after `dagbot migrate`",
          () => complaints(oldB, migratedAt),
          (ls) => ls.length > 0,
          { timeoutMs: 20_000, intervalMs: 250 },
        ),
      );

      // ---- long_b ends while b (0.1.0) still serves (its finish passes the fence, its claims do
      // not): what needs it runs on today's node. Then b is replaced the same way.
      f.release("long_b");
      await step("long_b ends on b (0.1.0) while it serves, and after_b runs on today's node", async () => {
        const ran = await waitFor(
          "long_b's end and after_b's run in the action records",
          () => f.read(),
          (rs) =>
            rs.some((r) => r.task === "long_b" && r.phase === "end") && rs.some((r) => r.task === "after_b"),
          { timeoutMs: 30_000, intervalMs: 100 },
        );
        const afterB = ran.filter((r) => r.task === "after_b");
        check(
          afterB.every((r) => r.node.endsWith(NEW)),
          `after_b ran on a 0.1.0 node:\n${lines(afterB)}`,
        );
      });
      check(oldB.running(), `b (0.1.0) stopped by itself after finishing long_b:\n${tail(oldB)}`);
      oldB.child.kill("SIGTERM");
      await step("b (0.1.0) stops gracefully", () =>
        withTimeout(oldB.exited, 60_000, `b (0.1.0) did not exit within 60 s of SIGTERM\n${tail(oldB)}`),
      );
      f.start(now, "b");
      await step("the run in flight at the upgrade ends, each task run once", async () => {
        await waitForRun(now, dir, f.configPath("a", now), "inflight", 60_000);
        const all = f.read().filter((r) => r.run === inflightRun || r.kind === "hold");
        for (const task of ["long_a", "long_b", "after_a", "after_b", "last"]) {
          const runs = all.filter((r) => r.task === task && r.phase !== "end");
          check(runs.length === 1, `${task} ran ${runs.length} times, expected once:\n${lines(runs)}`);
        }
        for (const task of ["long_a", "long_b"]) {
          const ends = all.filter((r) => r.task === task && r.phase === "end");
          check(ends.length === 1, `${task} ended ${ends.length} times:\n${lines(ends)}`);
        }
        check(!f.read().some((r) => r.kind === "approve"), "an action named approve ran");
      });
      await soft("`dagbot nodes` shows one release once the last node is replaced", async () => {
        const text = await waitFor(
          "b alive with today's release and no mixed-releases line",
          async () => (await dagbot(now, ["nodes"])).stdout,
          (t) => !/mixed/i.test(t) && new RegExp(`^b .*${newVersion}`, "m").test(t),
          { timeoutMs: 30_000, intervalMs: 250 },
        );
        check(new RegExp(`^a .*${newVersion}`, "m").test(text), `a should show ${NEW_VERSION}:\n${text}`);
      });
      // What the 0.1.0 nodes said once the store was migrated under them (for the reader of the run).
      for (const n of [oldA, oldB]) {
        const said = [
          ...new Set(complaints(n, migratedAt).map((l) => `${l.msg}: ${l.err ?? l.reason ?? ""}`)),
        ];
        console.log(
          `${n.nodeId} (0.1.0) after migrate, exit ${JSON.stringify(await n.exited)}:\n  ${said.length > 0 ? said.join("\n  ") : "(nothing)"}`,
        );
      }
      expect(answered.every((r) => r.code === 0)).toBe(true);
      expect(problems, problems.join("\n\n")).toEqual([]);
      failed = false;
    } catch (e) {
      throw withProblems(e);
    } finally {
      await endUpgradeTest({ fleet, db, dir, failed, folder: "upgrade test folder" });
    }
  });
});

/** SQLite's online backup of a live file into `to` (a consistent copy no process writes to). */
async function sqliteBackup(from: string, to: string): Promise<void> {
  const src = new Database(from, { readonly: true, fileMustExist: true });
  try {
    await src.backup(to);
  } finally {
    src.close();
  }
}

/** A PostgreSQL client program: from the PATH, else the newest /usr/lib/postgresql/N/bin. */
function pgBin(name: string): string {
  try {
    return execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).trim();
  } catch {
    const root = "/usr/lib/postgresql";
    const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
    for (const v of versions) if (existsSync(join(root, v, "bin", name))) return join(root, v, "bin", name);
    throw new Error(`${name} not found on the PATH nor under ${root}`);
  }
}
