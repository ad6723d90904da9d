// A verb declared once is served three ways: a trial verb, one declaration added to the
// verb list through the same functions the real list goes through, appears in chat help and the
// chat grammar, as a CLI subcommand with --help and --json (run against a real SQLite store), and
// as an HTTP route in the OpenAPI document (a real server on a free port), with nothing else added.
import { Command } from "commander";
import { afterAll, describe, expect, it, vi } from "vitest";
import type { HandlerContext } from "../../src/app/commands/context.js";
import { summarizeRun } from "../../src/app/commands/outcome.js";
import { notFoundRun } from "../../src/app/commands/shared.js";
import type { AnyVerb } from "../../src/app/commands/verb.js";
import { defineVerb } from "../../src/app/commands/verb.js";
import { helpOutcome } from "../../src/app/commands/verbs/help.js";
import { COMMANDS, registryOf } from "../../src/app/commands/verbs/index.js";
import { RUN_ID_ARG, grammarOf } from "../../src/domain/command-grammar.js";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { startHttpApi } from "../../src/adapters/http/server.js";
import { registerVerbCommands } from "../../src/cli/subcommands/verb-commands.js";
import { z } from "zod";
import { parseDag } from "../../src/domain/dag.js";
import { inProcessHttpConfig } from "../support/http-client.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import { becomeLeader } from "../support/store-fixtures.js";

/** The trial: a read verb that says how many tasks a run has. One declaration, nothing else. */
const trial = defineVerb<{ verb: "trial"; id: string }, "graph">({
  verb: "trial",
  args: [RUN_ID_ARG],
  summary: "a trial verb: one run's summary",
  group: "follow",
  permission: "open",
  details: [],
  handle: async (ctx: HandlerContext, c) => {
    const run = await ctx.store.getRun(ctx.roomId, c.id);
    return run === null ? notFoundRun(ctx, c.id) : { kind: "graph", run: summarizeRun(run) };
  },
  render: { graph: () => null },
  cli: { description: "Show one run's summary (a trial verb)." },
  http: (s) => ({
    method: "GET",
    path: "/v1/trial/:id",
    summary: "One run's summary (a trial verb)",
    params: s.runParams,
    response: z.object({ room: z.string(), taskCount: z.number() }),
    command: ({ params }) => ({ verb: "trial", id: params["id"] ?? "" }),
    answer: (o) => (o.kind === "graph" ? { taskCount: o.run.taskCount } : null),
  }),
});

const registry = registryOf([...COMMANDS, trial as unknown as AnyVerb]);
const db = sqliteTestDb("verb-faces");
let failed = true;
afterAll(() => db.cleanup(failed));

describe("a verb declared once", () => {
  it("is in chat help and the chat grammar, a CLI subcommand with --help and --json, and an HTTP route in the OpenAPI document", async () => {
    const store = await db.open();
    try {
      const parsed = parseDag(JSON.stringify({ id: "hello", tasks: [{ id: "a", action: "true" }] }), "json");
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

      // Chat: help lists it with its usage, the grammar parses it.
      const ctx = { policy: { requiredPowerLevel: 50 }, standing: { kind: "local-operator" } } as never;
      const help = helpOutcome(ctx, null, registry.verbs);
      expect(help).toMatchObject({ kind: "help" });
      const entries = help.kind === "help" ? help.entries : [];
      expect(entries).toContainEqual({ verb: "trial", usage: "!dag trial <id>", summary: trial.summary });
      expect(grammarOf(registry.verbs).parseCommand({ body: "!dag trial hello" })).toEqual({
        kind: "command",
        command: { verb: "trial", id: "hello" },
      });

      // CLI: a subcommand with --help and --json, answering from the real store.
      const program = new Command().name("dagbot").exitOverride();
      registerVerbCommands(program, registry);
      const sub = program.commands.find((c) => c.name() === "trial");
      expect(sub).toBeDefined();
      const helpText = sub!.helpInformation();
      expect(helpText).toContain("Usage: dagbot trial [options] <dag_id>");
      expect(helpText).toContain("--json");
      const out: string[] = [];
      const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
        out.push(String(chunk));
        return true;
      });
      try {
        await program.parseAsync(["trial", "hello", "--json", "--store", `sqlite:${db.path}`], {
          from: "user",
        });
      } finally {
        write.mockRestore();
      }
      expect(JSON.parse(out.join(""))).toMatchObject({
        ok: true,
        answer: "graph",
        run: { dagId: "hello", taskCount: 1 },
      });

      // HTTP: a route in the OpenAPI document, served from the same declaration.
      const token = "t".repeat(32);
      const api = await startHttpApi({
        config: inProcessHttpConfig(token),
        session: "test/boot",
        rooms: ["local"],
        store,
        logger: silentLogger(),
        registry,
        // The node's wiring (composition) runs a read with the caller's standing; here, the verb itself.
        read: async (roomId, command) =>
          trial.handle(
            {
              store,
              fence: null,
              roomId,
              sender: "http:ci",
              eventId: null,
              standing: { kind: "local-operator" },
              policy: {} as never,
              loadDag: async () => ({ ok: false, message: "none" }),
            },
            command as never,
            registry.verbs,
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
        expect(doc.paths["/v1/trial/{id}"]?.["get"]?.summary).toBe("One run's summary (a trial verb)");
        const answer = await fetch(`${base}/v1/trial/hello`, {
          headers: { authorization: `Bearer ${token}` },
        });
        expect(answer.status).toBe(200);
        expect(await answer.json()).toEqual({ room: "local", taskCount: 1 });
        const missing = await fetch(`${base}/v1/trial/nope`, {
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
