// A rolling upgrade (docs/architecture.md §11): each previous release of protocol 2 or later (0.2.0,
// 0.3.0, 0.3.1, 0.4.0; built from this repository's history) and today's share a store, on
// PostgreSQL and on SQLite. Of today's protocol, the releases work side by side; of an older one
// (today raises the protocol to 3: a protocol-2 leader would misjudge run conditions), its nodes
// finish what they run and take no new work once the store is migrated, refused at the database
// with a message naming the release needed, and today's nodes do the rest:
//
//   1. two nodes of the previous release (a, b) run on a store it made, with a long task running on
//      each; the store is the golden schema of its version (test/adapters/schema-golden/);
//   2. today's `dagbot migrate` migrates the store while they run (0.3.x: the schema is today's, and
//      it says there is nothing to migrate), leaving the golden schema; they finish their tasks and
//      run what needed them, none failing;
//   3. a node of today's release (c) joins; a new run's tasks are spread over both releases, each
//      run once, and `dagbot nodes` says the releases are mixed (when their versions differ); a run
//      with an approval gate and an output reference, published and approved through today's CLI
//      while a node of the previous release leads, waits for the approval and passes the value;
//   4. a node of the previous release restarted on the store: of an older schema (0.2.0), it refuses
//      it, saying the schema is newer; of today's schema (0.3.x), it runs on the store today's nodes
//      have been writing, and a run published with its own CLI runs a task on it;
//   5. the previous release's nodes are replaced one at a time by today's, with work in flight; of
//      today's schema, the previous release's CLI publishes the last run, which today's nodes run.
//
// Every action execution is counted from the actions' own records (test/upgrade/fixtures/act.mjs).
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { FLEET_PROTOCOL, STORE_SCHEMA } from "../../src/domain/release.js";
import { createTestDatabase } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";
import { waitFor } from "../support/store-wait.js";
import { Fleet } from "./fleet.js";
import type { ActionRecord } from "./fleet.js";
import {
  check,
  checkSchemaGolden,
  complaints,
  endUpgradeTest,
  lines,
  parseJson,
  softChecks,
  step,
  tail,
  waitForRun,
  withTimeout,
} from "./helpers.js";
import type { NodesView } from "./helpers.js";
import type { PreviousVersion, Release } from "./releases.js";
import { PREVIOUS_RELEASES, currentRelease, previousRelease, runCli, said, startNode } from "./releases.js";
import { postgresProbe, sqliteProbe } from "./store-probe.js";
import type { StoreProbe } from "./store-probe.js";

const VERSION_PATTERN = "[0-9]+\\.[0-9]+\\.[0-9]+";

/** The previous releases that declare a fleet protocol (2 or later), each with each store. */
const ROLLING = (Object.keys(PREVIOUS_RELEASES) as PreviousVersion[])
  .filter((v) => PREVIOUS_RELEASES[v].protocol >= 2)
  .flatMap((v) => (["postgres", "sqlite"] as const).map((kind) => [v, kind] as const));

describe.each(ROLLING)("rolling upgrade from %s on %s", (PREVIOUS, kind) => {
  const oldSchema = PREVIOUS_RELEASES[PREVIOUS].schema[kind];
  const restartedRefuses = oldSchema < STORE_SCHEMA;
  // Today's migration raises the protocol: the previous release's nodes take no new work after it.
  const raise = PREVIOUS_RELEASES[PREVIOUS].protocol < FLEET_PROTOCOL;
  /** What a protocol-3 store says to an older node's claim or lease (migration 020). */
  const REFUSED = new RegExp(`needs dagbot [0-9.]+ or later \\(fleet protocol ${FLEET_PROTOCOL}\\)`);
  it(`${PREVIOUS} nodes beside today's on a migrated store: in-flight work ends, ${raise ? "new work on today's nodes only (a protocol raise)" : "new work spread over both"}, each action once, a restarted ${PREVIOUS} node ${restartedRefuses ? "refuses" : "works"}, then replaced`, async () => {
    const old = previousRelease(PREVIOUS);
    const now = currentRelease();
    const dir = mkdtempSync(join(tmpdir(), `dagbot-rolling-${kind}-`));
    let db: TestDatabase | null = null;
    let fleet: Fleet | null = null;
    let failed = true;
    const { problems, soft, withProblems } = softChecks();
    try {
      db = kind === "postgres" ? await createTestDatabase() : null;
      // The test database's URL as it is: every release of protocol 2 declares it on its connections
      // itself.
      const probe: StoreProbe = db !== null ? postgresProbe(db.url) : sqliteProbe(join(dir, "store.db"));
      const f = new Fleet(dir, probe.store);
      fleet = f;
      const dagbot = (release: Release, args: string[], timeoutMs = 60_000) =>
        runCli(release, [...args, "--config", f.config("cli", release)], { cwd: dir, timeoutMs });
      const writeDag = (dag: Record<string, unknown>): string => {
        const path = join(dir, `${String(dag["id"])}.json`);
        writeFileSync(path, JSON.stringify(dag, null, 1));
        return path;
      };
      const submit = async (release: Release, dag: Record<string, unknown>): Promise<string> => {
        const r = await dagbot(release, ["submit", writeDag(dag), "--confirm", "--json"], 90_000);
        check(r.code === 0, `${release.label} could not submit ${String(dag["id"])}: ${said(r)}`);
        return String(parseJson(r)["runId"]);
      };
      const OLD = `@${old.tag}`;
      const NEW = `@${now.tag}`;
      const started = (task: string) => (rs: ActionRecord[]) =>
        rs.some((r) => r.task === task && (r.phase === "start" || r.phase === "run"));
      const waitStarted = (what: string, tasks: string[], timeoutMs = 30_000) =>
        waitFor(
          what,
          () => f.read(),
          (rs) => tasks.every((t) => started(t)(rs)),
          { timeoutMs, intervalMs: 100 },
        );

      // ---- 1. A fleet of the previous release on a store of its schema, with a long task running on
      // each node.
      const oldA = f.start(old, "a");
      const oldB = f.start(old, "b");
      await step(`the two ${PREVIOUS} nodes start and beat`, () =>
        waitFor(
          "heartbeats of a and b in the nodes table",
          async () =>
            (await probe.query("SELECT node_id FROM nodes ORDER BY node_id").catch(() => [])).map((r) =>
              String(r["node_id"]),
            ),
          (ids) => ids.includes("a") && ids.includes("b"),
          { timeoutMs: 30_000, intervalMs: 100 },
        ).catch((e: unknown) => {
          throw new Error(`${String(e)}\na log:\n${tail(oldA)}\nb log:\n${tail(oldB)}`);
        }),
      );
      check(
        (await probe.schemaVersion()) === oldSchema,
        `${PREVIOUS} made a ${kind} store of schema ${await probe.schemaVersion()}, expected ${oldSchema}`,
      );
      await soft(`the store ${PREVIOUS} made with its own migrations is the golden schema ${oldSchema}`, () =>
        checkSchemaGolden(probe, oldSchema, PREVIOUS),
      );
      const capped = await dagbot(old, ["cap", "20"]);
      check(capped.code === 0, `${PREVIOUS} could not set the cap: ${said(capped)}`);
      const inflightRun = await submit(old, {
        id: "inflight",
        tasks: [
          { id: "long_a", action: "hold", args: { name: "long_a" }, on: { node: "a" } },
          { id: "long_b", action: "hold", args: { name: "long_b" }, on: { node: "b" } },
          { id: "after_a", action: "note", args: { text: "after_a" }, needs: ["long_a"] },
          { id: "after_b", action: "note", args: { text: "after_b" }, needs: ["long_b"] },
          { id: "last", action: "note", args: { text: "last" }, needs: ["after_a", "after_b"] },
        ],
      });
      await step(`the long tasks run on the ${PREVIOUS} nodes`, () =>
        waitStarted("long_a and long_b started (action records)", ["long_a", "long_b"]),
      );

      // ---- 2. Today's `dagbot migrate` while both nodes of the previous release run.
      const migratedAt = Date.now();
      await step(`\`dagbot migrate\` of today's release while the ${PREVIOUS} nodes run`, async () => {
        const r = await dagbot(now, ["migrate"], 120_000);
        check(r.code === 0, `migrate failed: ${said(r)}`);
        check(
          (await probe.schemaVersion()) === STORE_SCHEMA,
          `after migrate the schema is ${await probe.schemaVersion()}, expected ${STORE_SCHEMA}: ${said(r)}`,
        );
        check(
          restartedRefuses
            ? r.stdout.includes(`migrated: schema ${oldSchema} -> ${STORE_SCHEMA}`)
            : /nothing to migrate/.test(r.stdout),
          `migrate should say ${restartedRefuses ? "it migrated" : "there is nothing to migrate"}: ${said(r)}`,
        );
      });
      await soft("today's migrate left the golden schema", () =>
        checkSchemaGolden(probe, STORE_SCHEMA, `today's migrate left the ${PREVIOUS}`),
      );
      f.release("long_a");
      f.release("long_b");
      if (raise)
        await step(
          `the ${PREVIOUS} nodes finish their long tasks after the migration, and start nothing more`,
          async () => {
            await waitFor(
              "long_a and long_b ended (action records)",
              async () => f.read(),
              (rs) =>
                ["long_a", "long_b"].every((t) =>
                  rs.some((r) => r.run === inflightRun && r.task === t && r.phase === "end"),
                ),
              { timeoutMs: 30_000, intervalMs: 100 },
            );
            // Past a few of their claim rounds: nothing of the run starts on them.
            await sleep(3_000);
            const next = f
              .read()
              .filter(
                (r) => r.run === inflightRun && ["after_a", "after_b", "last"].includes(String(r.task)),
              );
            check(next.length === 0, `a ${PREVIOUS} node ran work after the protocol raise:\n${lines(next)}`);
          },
        );
      else
        await step(`the in-flight run ends on the ${PREVIOUS} nodes after the migration`, async () => {
          await waitForRun(now, dir, f.config("cli", now), "inflight", 60_000);
          const ran = f.read().filter((r) => r.run === inflightRun);
          for (const task of ["after_a", "after_b", "last"]) {
            const runs = ran.filter((r) => r.task === task);
            check(
              runs.length === 1 && runs[0]!.node.endsWith(OLD),
              `${task} should have run once on a ${PREVIOUS} node after the migration:\n${lines(runs)}`,
            );
          }
        });
      check(oldA.running() && oldB.running(), `a ${PREVIOUS} node stopped:\n${tail(oldA)}\n${tail(oldB)}`);
      if (raise)
        await soft(
          `the ${PREVIOUS} nodes say what the store refuses them, naming the release it needs`,
          async () => {
            const said = [oldA, oldB].flatMap((n) =>
              complaints(n, migratedAt).map((l) => `${l.msg}: ${l.err ?? l.reason ?? ""}`),
            );
            check(
              said.some((l) => REFUSED.test(l)),
              `no refusal naming fleet protocol ${FLEET_PROTOCOL} in their logs:\n${said.join("\n")}`,
            );
          },
        );
      else
        await soft(`the ${PREVIOUS} nodes logged no warning or error after the migration`, async () => {
          const said = [oldA, oldB].flatMap((n) =>
            complaints(n, migratedAt).map((l) => `${n.nodeId}: ${l.msg}: ${l.err ?? l.reason ?? ""}`),
          );
          check(said.length === 0, said.join("\n"));
        });

      // ---- 3. A node of today's release joins; new work is spread over both releases.
      const newC = f.start(now, "c");
      await step("c (today's) joins", () =>
        waitFor(
          "c's heartbeat",
          async () =>
            (await probe.query("SELECT node_id FROM nodes").catch(() => [])).map((r) => r["node_id"]),
          (ids) => ids.includes("c"),
          { timeoutMs: 30_000, intervalMs: 100 },
        ).catch((e: unknown) => {
          throw new Error(`${String(e)}\nc log:\n${tail(newC)}`);
        }),
      );
      if (raise)
        await step(
          "c leads and ends the in-flight run: the tasks after the long ones run on today's node",
          async () => {
            await waitForRun(now, dir, f.config("cli", now), "inflight", 60_000);
            const ran = f.read().filter((r) => r.run === inflightRun && r.phase !== "end");
            for (const task of ["after_a", "after_b", "last"]) {
              const runs = ran.filter((r) => r.task === task);
              check(
                runs.length === 1 && runs[0]!.node.endsWith(NEW),
                `${task} should have run once on c:\n${lines(runs)}`,
              );
            }
          },
        );
      const spread = ["s_a", "s_b", "s_c", "s_d", "s_e", "s_f"];
      const spreadRun = await submit(now, {
        id: "spread",
        tasks: [
          ...spread.map((id) => ({ id, action: "hold", args: { name: id } })),
          { id: "join", action: "note", args: { text: "join" }, needs: spread },
        ],
      });
      if (raise) {
        // Only today's node claims: the holds are let go at once and run two at a time on c.
        for (const id of spread) f.release(id);
        await step("a new run's tasks all run on today's node, none on the older ones", async () => {
          await waitForRun(now, dir, f.config("cli", now), "spread", 60_000);
          const on = f.read().filter((r) => r.run === spreadRun && r.phase !== "end");
          check(
            on.length === spread.length + 1 && on.every((r) => r.node.endsWith(NEW)),
            `every task should have run once, on c:\n${lines(on)}`,
          );
        });
      } else
        await step("the six holds of a new run run at once, on both releases", async () => {
          // Three nodes of capacity 2: every slot taken.
          await waitStarted("s_a…s_f started (action records)", spread);
          const on = f.read().filter((r) => r.run === spreadRun && r.phase === "start");
          check(
            on.some((r) => r.node.endsWith(OLD)) && on.some((r) => r.node.endsWith(NEW)),
            `the new run's tasks should run on both releases:\n${lines(on)}`,
          );
        });
      // Mixed when the versions differ, or the protocols do (today's build carries the version of the
      // release before it until it is released, src/domain/release.ts RELEASE).
      if (old.version !== now.version || raise)
        await soft("`dagbot nodes` shows `mixed releases:` naming both releases' nodes", async () => {
          const r = await dagbot(now, ["nodes"]);
          const mixed = r.stdout.split("\n").find((l) => l.startsWith("mixed releases:")) ?? "";
          check(
            /\ba\b/.test(mixed) && /\bb\b/.test(mixed) && /\bc\b/.test(mixed),
            `no \`mixed releases:\` line naming a, b (${old.label}) and c (${now.label})\n${said(r)}`,
          );
        });
      // Until it is released, today's build carries the version of the release before it
      // (package.json, src/domain/release.ts RELEASE): `dagbot nodes` names one release for all three.
      else
        await soft(
          `\`dagbot nodes\` shows a, b and c as dagbot ${now.version}, no \`mixed releases:\``,
          async () => {
            const r = await dagbot(now, ["nodes"]);
            const release = `dagbot ${now.version}, protocol ${FLEET_PROTOCOL}`;
            check(
              ["a", "b", "c"].every((id) =>
                r.stdout.split("\n").some((l) => l.startsWith(`${id} `) && l.includes(release)),
              ) && !/^mixed releases:/m.test(r.stdout),
              `expected a, b and c each as \`${release}\` and no \`mixed releases:\` line\n${said(r)}`,
            );
          },
        );
      if (!raise) {
        // Held past two room-lease ttls (2 s, test/upgrade/fleet.ts): each release's task-lease renewals
        // are judged by the other's reaper (the leader is a node of the previous release here), and a task taken for lost
        // would run twice.
        await sleep(5_000);
        for (const id of spread) f.release(id);
        await step("the spread run ends", () => waitForRun(now, dir, f.config("cli", now), "spread", 60_000));
      }

      // Commands of today's CLI answered by a leader of the previous release: a gated run with an
      // output reference, published, confirmed and approved through today's CLI.
      const leader = async (): Promise<string> => {
        const r = await dagbot(now, ["nodes", "--json"]);
        check(r.code === 0, `dagbot nodes --json failed: ${said(r)}`);
        const view = parseJson(r) as unknown as NodesView;
        return view.leaders.find((l) => l.room === "local")?.nodeId ?? "(none)";
      };
      await soft(
        raise
          ? `the room is led by c (today's): a ${PREVIOUS} node may not take the lease`
          : `the room is led by a node of ${PREVIOUS} while today's CLI publishes a gated run`,
        async () => {
          const id = await leader();
          if (raise) check(id === "c", `the leader is ${id}, not c (today's)`);
          else check(id === "a" || id === "b", `the leader is ${id}, not a or b (${PREVIOUS})`);
        },
      );
      const gatedRun = await submit(now, {
        id: "gated",
        tasks: [
          { id: "build", action: "build", args: { v: "1.2.3" }, outputs: { version: VERSION_PATTERN } },
          { id: "ok", needs: ["build"], approve: { who: "operators", description: "roll out 1.2.3" } },
          {
            id: "deploy",
            action: "deploy",
            args: { version: "{tasks.build.outputs.version}" },
            needs: ["ok"],
          },
        ],
      });
      await step("the gate of the gated run waits for an approval", async () => {
        await waitFor(
          "build ran and the gate is open (dagbot status gated)",
          async () => ({ records: f.read(), status: (await dagbot(now, ["status", "gated"])).stdout }),
          (st) =>
            st.records.some((r) => r.run === gatedRun && r.task === "build") &&
            /awaits approval/.test(st.status),
          { timeoutMs: 60_000, intervalMs: 250 },
        );
        const ran = f.read().filter((r) => r.run === gatedRun);
        check(
          !ran.some((r) => r.kind === "approve" || r.kind === "deploy"),
          `the gate was taken for a task, or deploy ran before the approval:\n${lines(ran)}`,
        );
      });
      await step("approving through today's CLI", async () => {
        const r = await dagbot(now, ["approve", "gated", "ok"], 90_000);
        check(
          r.code === 0 && /approved gated\/ok/.test(r.stdout + r.stderr),
          `unexpected answer to approve (leader ${await leader()}): ${said(r)}`,
        );
      });
      await step("the gated run ends, its deploy got the value", async () => {
        await waitForRun(now, dir, f.config("cli", now), "gated", 60_000);
        const deploys = f.read().filter((r) => r.run === gatedRun && r.kind === "deploy");
        check(
          deploys.length === 1 && deploys[0]!.arg === "1.2.3",
          `deploy should have run once with 1.2.3:\n${lines(deploys)}`,
        );
      });

      // ---- 4. A node of the previous release restarted on the store today's build migrated.
      oldB.child.kill("SIGTERM");
      await step(`b (${PREVIOUS}) stops gracefully`, () =>
        withTimeout(oldB.exited, 60_000, `b did not exit within 60 s of SIGTERM\n${tail(oldB)}`),
      );
      const restarted = startNode(old, dir, f.config("b", old), "b-restart");
      f.nodes.push(restarted);
      let backRun: string | null = null;
      if (restartedRefuses)
        await step(`b (${PREVIOUS}) restarted on the schema-${STORE_SCHEMA} store refuses it`, async () => {
          const exit = await withTimeout(
            restarted.exited,
            30_000,
            `a restarted ${PREVIOUS} node still runs on a schema-${STORE_SCHEMA} store after 30 s:\n${tail(restarted)}`,
          );
          check(
            exit.code !== null && exit.code !== 0,
            `it exited ${JSON.stringify(exit)}:\n${tail(restarted)}`,
          );
          check(
            new RegExp(
              `schema is version ${STORE_SCHEMA}, newer than this dagbot supports \\(${oldSchema}\\)`,
            ).test(restarted.log()),
            `it should say the store's schema is newer than it supports:\n${tail(restarted)}`,
          );
          console.log(
            `${PREVIOUS} restarted on the migrated store (${kind}), exit ${JSON.stringify(exit)}: ${
              restarted
                .log()
                .split("\n")
                .find((l) => /newer than this dagbot/.test(l)) ?? ""
            }`,
          );
        });
      else {
        // Same schema: the store today's nodes have written stays the store of the previous release.
        backRun = await submit(old, {
          id: "back",
          tasks: [
            { id: "on_b", action: "note", args: { text: "on_b" }, on: { node: "b" } },
            { id: "then", action: "note", args: { text: "then" }, needs: ["on_b"] },
          ],
        });
        await step(
          `b (${PREVIOUS}) restarted on the store today's nodes wrote runs a task of a run its own CLI published`,
          async () => {
            await waitForRun(now, dir, f.config("cli", now), "back", 60_000).catch((e: unknown) => {
              throw new Error(`${String(e)}\nb (${PREVIOUS}, restarted) log:\n${tail(restarted)}`);
            });
            const onB = f.read().filter((r) => r.run === backRun && r.task === "on_b" && r.phase !== "end");
            check(
              onB.length === 1 && onB[0]!.node === `b${OLD}`,
              `on_b should have run once, on b (${PREVIOUS}):\n${lines(onB)}`,
            );
          },
        );
        restarted.child.kill("SIGTERM");
        await step(`b (${PREVIOUS}, restarted) stops gracefully`, () =>
          withTimeout(restarted.exited, 60_000, `b did not exit within 60 s of SIGTERM\n${tail(restarted)}`),
        );
      }

      // ---- 5. The previous release's nodes replaced one at a time, with work in flight.
      const newB = f.start(now, "b");
      const rolling = ["r_a", "r_b", "r_c", "r_d"];
      const rollingRun = await submit(now, {
        id: "rolling",
        tasks: [
          ...rolling.map((id) => ({ id, action: "hold", args: { name: id } })),
          { id: "end", action: "note", args: { text: "end" }, needs: rolling },
        ],
      });
      await step("the rolling run's holds start", () => waitStarted("r_a…r_d started", rolling));
      // a (the previous release), stopping, hands the room over and finishes its holds under today's leader.
      oldA.child.kill("SIGTERM");
      await sleep(5_000);
      for (const id of rolling) f.release(id);
      await step(`a (${PREVIOUS}) stops gracefully`, () =>
        withTimeout(oldA.exited, 60_000, `a did not exit within 60 s of SIGTERM\n${tail(oldA)}`),
      );
      const newA = f.start(now, "a");
      // Same schema: the previous release's CLI publishes it, and today's nodes alone answer it.
      const lastRun = await submit(restartedRefuses ? now : old, {
        id: "after",
        tasks: [
          { id: "x", action: "note", args: { text: "x" } },
          { id: "y", action: "note", args: { text: "y" }, needs: ["x"] },
        ],
      });
      await step("the work goes on once every node runs today's release", async () => {
        await waitForRun(now, dir, f.config("cli", now), "rolling", 60_000);
        await waitForRun(now, dir, f.config("cli", now), "after", 60_000);
      });
      await soft("`dagbot nodes` shows one release once every node is replaced", async () => {
        const text = await waitFor(
          "no mixed-releases line",
          async () => (await dagbot(now, ["nodes"])).stdout,
          (t) => !/mixed/i.test(t),
          { timeoutMs: 30_000, intervalMs: 250 },
        );
        check(/^a .*/m.test(text) && /^b .*/m.test(text), text);
      });

      await step("every action of every run ran exactly once", () => {
        const all = f.read();
        const runs = [
          inflightRun,
          spreadRun,
          gatedRun,
          rollingRun,
          lastRun,
          ...(backRun === null ? [] : [backRun]),
        ];
        for (const run of runs) {
          const byTask = new Map<string, ActionRecord[]>();
          for (const r of all.filter((x) => x.run === run && x.phase !== "end"))
            byTask.set(String(r.task), [...(byTask.get(String(r.task)) ?? []), r]);
          const twice = [...byTask].filter(([, rs]) => rs.length !== 1);
          check(
            twice.length === 0,
            `run ${run}: ${twice.map(([t, rs]) => `${t} ran ${rs.length} times:\n${lines(rs)}`).join("\n")}`,
          );
        }
        const counts = {
          inflight: 5,
          spread: 7,
          gated: 2,
          rolling: 5,
          after: 2,
          back: backRun === null ? 0 : 2,
        };
        const total = Object.values(counts).reduce((x, y) => x + y, 0);
        const executions = all.filter((r) => runs.includes(String(r.run)) && r.phase !== "end");
        check(
          executions.length === total,
          `expected ${total} executions, the records show ${executions.length}`,
        );
      });
      for (const n of [newA, newB, newC]) check(n.running(), `${n.nodeId} (today's) stopped:\n${tail(n)}`);
      expect(problems, problems.join("\n\n")).toEqual([]);
      failed = false;
    } catch (e) {
      throw withProblems(e);
    } finally {
      await endUpgradeTest({ fleet, db, dir, failed, folder: "rolling upgrade test folder" });
    }
  });
});
