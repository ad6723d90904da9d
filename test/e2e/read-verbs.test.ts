// The read verbs are served from their declarations as the writes are: `dagbot status` and `dagbot list` are made by the same builder as the writes'
// subcommands, and GET /v1/runs/{id} and GET /v1/runs by the same builder as their routes, from
// src/app/commands/verbs/status.ts and list.ts.
// A read of the CLI or HTTP is stored nowhere, so it shows every task, not the chat card's selection.
import { Command } from "commander";
import { afterAll, describe, expect, it, vi } from "vitest";
import { executeCommand } from "../../src/app/commands/table.js";
import * as shapes from "../../src/app/commands/http-shapes.js";
import { httpRoutesOf } from "../../src/app/commands/verb.js";
import { list } from "../../src/app/commands/verbs/list.js";
import { status } from "../../src/app/commands/verbs/status.js";
import { VERB_REGISTRY } from "../../src/app/commands/verbs/index.js";
import { MAX_CARD_TASK_LINES } from "../../src/app/render/status-card.js";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { startHttpApi } from "../../src/adapters/http/server.js";
import { registerVerbCommands } from "../../src/cli/subcommands/verb-commands.js";
import { parseDag } from "../../src/domain/dag.js";
import { inProcessHttpConfig } from "../support/http-client.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import { becomeLeader } from "../support/store-fixtures.js";

const db = sqliteTestDb("read-verbs");
let failed = true;
afterAll(() => db.cleanup(failed));

/** More tasks than a chat card lists. */
const TASKS = MAX_CARD_TASK_LINES + 10;

describe("the read verbs, from their declarations", () => {
  it("status and list are CLI subcommands with --json and OpenAPI routes made from their verb files; status shows every task", async () => {
    const store = await db.open();
    try {
      const tasks = Array.from({ length: TASKS }, (_, i) => ({ id: `t${i}`, action: "true" }));
      const parsed = parseDag(JSON.stringify({ id: "wide", tasks }), "json");
      if (!parsed.ok) throw new Error("the test's DAG is not valid");
      await store.createRun(
        { fence: await becomeLeader(store, "local") },
        {
          roomId: "local",
          dag: parsed.dag,
          hash: parsed.hash,
          publisher: "local:test",
          publishEventId: null,
          needsConfirmation: false,
          confirmTimeoutMs: 60_000,
        },
      );

      // CLI: made by the verbs' builder (not a hand-written subcommand), with --json and its own option.
      const program = new Command().name("dagbot").exitOverride();
      registerVerbCommands(program, VERB_REGISTRY);
      const sub = program.commands.find((c) => c.name() === "status");
      expect(sub, "dagbot status is made from the status verb's declaration").toBeDefined();
      const helpText = sub!.helpInformation();
      expect(helpText).toContain("Usage: dagbot status [options] [run]");
      expect(helpText).toContain("--json");
      expect(helpText).toContain("--limit <n>");
      const out: string[] = [];
      const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
        out.push(String(chunk));
        return true;
      });
      try {
        await program.parseAsync(["status", "wide", "--json", "--store", `sqlite:${db.path}`], {
          from: "user",
        });
        await program.parseAsync(["status", "--json", "--store", `sqlite:${db.path}`], { from: "user" });
        await program.parseAsync(
          ["list", "wide", "--status", "running", "--json", "--store", `sqlite:${db.path}`],
          {
            from: "user",
          },
        );
      } finally {
        write.mockRestore();
      }
      const [one, latest, listed] = out.map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(one).toMatchObject({ ok: true, answer: "status", room: "local", run: { dagId: "wide" } });
      expect((one?.["tasks"] as unknown[]).length).toBe(TASKS);
      // Without a run, the room's latest runs (the list verb answers), as GET /v1/runs gives them.
      expect(latest).toMatchObject({
        ok: true,
        answer: "list",
        runs: [{ run: { dagId: "wide" } }],
        next: null,
      });

      const listCli = program.commands.find((c) => c.name() === "list");
      expect(listCli, "dagbot list is made from the list verb's declaration").toBeDefined();
      for (const option of ["--json", "--status <statuses>", "--limit <n>", "--cursor <cursor>"])
        expect(listCli!.helpInformation()).toContain(option);
      expect(listed).toMatchObject({
        ok: true,
        answer: "list",
        runs: [{ run: { dagId: "wide", status: "running" }, summary: { total: TASKS } }],
      });

      // HTTP: the route and its OpenAPI entry are the declaration's.
      const token = "t".repeat(32);
      const api = await startHttpApi({
        config: inProcessHttpConfig(token),
        session: "test/boot",
        rooms: ["local"],
        store,
        logger: silentLogger(),
        read: async (roomId, command) =>
          executeCommand(
            {
              store,
              fence: null,
              roomId,
              sender: "http:ci",
              eventId: null,
              standing: { kind: "local-operator" },
              policy: { nodeStaleAfterMs: 30_000 } as never,
              loadDag: async () => ({ ok: false, message: "none" }),
            },
            command,
          ),
        awaitCommand: async () => null,
        leaderTerm: () => null,
        outboxPending: async () => null,
        readiness: async () => ({}),
        snapshot: async () => ({}),
      });
      try {
        const base = `http://127.0.0.1:${api.port}`;
        const doc = (await (await fetch(`${base}/openapi.json`)).json()) as {
          paths: Record<string, Record<string, { summary?: string }>>;
        };
        const declared = httpRoutesOf(status, shapes)[0];
        expect(declared?.path).toBe("/v1/runs/:id");
        expect(doc.paths["/v1/runs/{id}"]?.["get"]?.summary).toBe(declared?.summary);
        const listRoute = httpRoutesOf(list, shapes)[0];
        expect(listRoute?.path).toBe("/v1/runs");
        expect(doc.paths["/v1/runs"]?.["get"]?.summary).toBe(listRoute?.summary);
        const answer = await fetch(`${base}/v1/runs/wide`, { headers: { authorization: `Bearer ${token}` } });
        expect(answer.status).toBe(200);
        const body = (await answer.json()) as { room: string; tasks: unknown[] };
        expect(body.room).toBe("local");
        expect(body.tasks.length).toBe(TASKS);
        // `dagbot list --json` is GET /v1/runs's answer with `ok` and `answer`: the same shape.
        const page = await fetch(`${base}/v1/runs?status=running`, {
          headers: { authorization: `Bearer ${token}` },
        });
        expect(page.status).toBe(200);
        const httpList = (await page.json()) as Record<string, unknown>;
        const { ok: _ok, answer: _answer, ...cliList } = listed!;
        expect(Object.keys(cliList).sort()).toEqual(Object.keys(httpList).sort());
        expect(cliList["runs"]).toEqual(httpList["runs"]);
        expect(cliList["next"]).toEqual(httpList["next"]);
        expect(cliList["room"]).toEqual(httpList["room"]);
        const missing = await fetch(`${base}/v1/runs/nope`, {
          headers: { authorization: `Bearer ${token}` },
        });
        expect(missing.status).toBe(404);
        expect(await missing.json()).toMatchObject({ code: "run-not-found" });
      } finally {
        await api.close();
      }
    } finally {
      await store.close();
    }
    failed = false;
  });
});
