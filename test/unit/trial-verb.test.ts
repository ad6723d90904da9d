// A verb with an outcome kind of its own takes its file and one line in the verb list: the trial verb
// (test/fixtures/verbs/tally.ts) is added to the list the way VERBS is built, and chat, the CLI and
// HTTP each render its new outcome from the one renderer in that file, with the statuses declared
// there; no other file knows the kind "tally".
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, describe, expect, it, vi } from "vitest";
import type { Outcome } from "../../src/app/commands/outcome.js";
import { exitStatusOf, httpAnswerOf } from "../../src/app/commands/outcome-table.js";
import type { AnyVerb } from "../../src/app/commands/verb.js";
import { COMMANDS, registryOf } from "../../src/app/commands/verbs/index.js";
import { renderOutcome } from "../../src/app/render/reply.js";
import { silentLogger } from "../../src/adapters/log/pino-logger.js";
import { startHttpApi } from "../../src/adapters/http/server.js";
import { registerVerbCommands } from "../../src/cli/subcommands/verb-commands.js";
import { parseDag } from "../../src/domain/dag.js";
import { inProcessHttpConfig } from "../support/http-client.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";
import { becomeLeader } from "../support/store-fixtures.js";
import { tally } from "../fixtures/verbs/tally.js";

// The one registry line.
const registry = registryOf([...COMMANDS, tally as unknown as AnyVerb]);
const db = sqliteTestDb("trial-verb");
let failed = true;
afterAll(() => db.cleanup(failed));

/** Every source file under a folder, recursively. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** The CLI's stdout and exit status for one command line. */
async function cliRun(args: string[]): Promise<{ out: string; exit: number }> {
  const program = new Command().name("dagbot").exitOverride();
  registerVerbCommands(program, registry);
  const out: string[] = [];
  const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
    out.push(String(chunk));
    return true;
  });
  const before = process.exitCode;
  try {
    await program.parseAsync(args, { from: "user" });
    return { out: out.join(""), exit: Number(process.exitCode ?? 0) };
  } finally {
    write.mockRestore();
    process.exitCode = before;
  }
}

describe("a verb with a new outcome kind", () => {
  it("is known only to its own file", () => {
    const knowing = sources(join(import.meta.dirname, "../../src")).filter((f) =>
      /["']tally["']/.test(readFileSync(f, "utf8")),
    );
    expect(knowing).toEqual([]);
  });

  it("is rendered by chat, the CLI and HTTP from its one renderer, with the statuses it declares", async () => {
    const store = await db.open();
    try {
      const parsed = parseDag(
        JSON.stringify({
          id: "hello",
          tasks: [
            { id: "a", action: "true" },
            { id: "b", action: "true" },
          ],
        }),
        "json",
      );
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
      const outcome = { kind: "tally", dagId: "hello", tasks: 2 } as unknown as Outcome;

      // Chat: HTML and plain, commands as typed in the room.
      const chat = renderOutcome(outcome, registry.verbs);
      expect(chat?.html).toBe(
        "🧮 <code>hello</code> has 2 tasks; <code>!dag status hello</code> shows them.",
      );
      expect(chat?.body).toBe("🧮 `hello` has 2 tasks; `!dag status hello` shows them.");
      // Without the verb in the list, no face knows the kind: the words above are the verb's.
      expect(renderOutcome(outcome)?.body).toBe("(an answer of kind tally)");
      expect(httpAnswerOf(outcome, registry.verbs)).toEqual({ ok: true, status: 200 });
      expect(exitStatusOf(outcome, registry.verbs)).toBe(0);

      // CLI: the text in its idiom, and --json, answered from the real store.
      const store_ = ["--store", `sqlite:${db.path}`];
      const text = await cliRun(["tally", "hello", ...store_]);
      expect(text).toEqual({ out: "hello has 2 tasks; dagbot status hello shows them.\n", exit: 0 });
      const json = await cliRun(["tally", "hello", "--json", ...store_]);
      expect(JSON.parse(json.out)).toMatchObject({ ok: true, answer: "tally", room: "local", tasks: 2 });
      // A missing run is an answer any verb may give: the common renderer's, exit 1.
      const missing = await cliRun(["tally", "nope", ...store_]);
      expect(missing.exit).toBe(1);

      // HTTP: the route's data and the text in HTTP's idiom.
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
          (await tally.handle(
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
          )) as Outcome,
        awaitCommand: async () => null,
        leaderTerm: () => null,
        outboxPending: async () => null,
        readiness: async () => ({}),
        snapshot: async () => ({}),
      });
      try {
        const answer = await fetch(`http://127.0.0.1:${api.port}/v1/tally/hello`, {
          headers: { authorization: `Bearer ${token}` },
        });
        expect(answer.status).toBe(200);
        expect(await answer.json()).toEqual({
          room: "local",
          tasks: 2,
          text: "hello has 2 tasks; GET /v1/runs/hello shows them.",
        });
      } finally {
        await api.close();
      }
    } finally {
      await store.close();
    }
    failed = false;
  });
});
